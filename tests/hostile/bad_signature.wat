;; Imports fd_write with the wrong signature.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start") (drop (call $write (i32.const 0)))))
