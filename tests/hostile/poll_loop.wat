;; Polls forever: a 1 s clock plus a read on stdin (always ready), in a loop.
(module
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    ;; subscription 0: clock, monotonic, 1 s relative
    (i32.store8 (i32.const 8) (i32.const 0))
    (i32.store (i32.const 16) (i32.const 1))
    (i64.store (i32.const 24) (i64.const 1000000000))
    ;; subscription 1 (at 48): fd_read on fd 0
    (i32.store8 (i32.const 56) (i32.const 1))
    (i32.store (i32.const 64) (i32.const 0))
    (loop $again
      (drop (call $poll (i32.const 0) (i32.const 256) (i32.const 2) (i32.const 512)))
      (br $again))))
