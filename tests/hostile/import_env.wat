;; Imports a host function that is not WASI.
(module
  (import "env" "system" (func $system (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start") (drop (call $system (i32.const 0)))))
