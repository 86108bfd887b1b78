;; Opens /workspace/pipe (the first preopen is fd 3) and reads it: on a FIFO with
;; no writer this blocks inside the host, where no epoch check can reach it.
(module
  (import "wasi_snapshot_preview1" "path_open"
    (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $read (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "pipe")
  (func (export "_start")
    (drop (call $open (i32.const 3) (i32.const 0) (i32.const 0) (i32.const 4)
                      (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 16)))
    (i32.store (i32.const 32) (i32.const 64))
    (i32.store (i32.const 36) (i32.const 64))
    (drop (call $read (i32.load (i32.const 16)) (i32.const 32) (i32.const 1) (i32.const 48)))))
