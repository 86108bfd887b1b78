;; Grows from 1 page to exactly 64 pages (4 MiB), then exits 0; exits 1 if refused.
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (if (i32.eq (memory.grow (i32.const 63)) (i32.const -1))
      (then (call $exit (i32.const 1))))
    (call $exit (i32.const 0))))
