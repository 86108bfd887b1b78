;; Imports wasi-threads' thread-spawn, which this runner does not offer.
(module
  (import "wasi" "thread-spawn" (func (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")))
