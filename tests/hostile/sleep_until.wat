;; Sleeps until an absolute monotonic time 100 ms ahead (TIMER_ABSTIME), then exits 0
;; if its own clock moved at least 90 ms, else 1: absolute sleeps must really sleep.
(module
  (import "wasi_snapshot_preview1" "clock_time_get" (func $now (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (func (export "_start") (local $t0 i64)
    (drop (call $now (i32.const 1) (i64.const 1) (i32.const 200)))
    (local.set $t0 (i64.load (i32.const 200)))
    ;; subscription at 0: userdata 1, clock, monotonic, absolute timeout t0 + 100 ms
    (i64.store (i32.const 0) (i64.const 1))
    (i32.store8 (i32.const 8) (i32.const 0))
    (i32.store (i32.const 16) (i32.const 1))
    (i64.store (i32.const 24) (i64.add (local.get $t0) (i64.const 100000000)))
    (i64.store (i32.const 32) (i64.const 0))
    (i32.store16 (i32.const 40) (i32.const 1))
    (drop (call $poll (i32.const 0) (i32.const 64) (i32.const 1) (i32.const 128)))
    (drop (call $now (i32.const 1) (i64.const 1) (i32.const 208)))
    (call $exit (i64.lt_u (i64.sub (i64.load (i32.const 208)) (local.get $t0)) (i64.const 90000000)))))
