;; One fd_write with 1024 iovecs that all point at the same 60 KiB: 60 MiB asked for in one call.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func (export "_start") (local $i i32)
    (loop $fill
      (i32.store (i32.add (i32.const 0) (i32.mul (local.get $i) (i32.const 8))) (i32.const 65536))
      (i32.store (i32.add (i32.const 4) (i32.mul (local.get $i) (i32.const 8))) (i32.const 61440))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $fill (i32.lt_u (local.get $i) (i32.const 1024))))
    (loop $again
      (drop (call $write (i32.const 1) (i32.const 0) (i32.const 1024) (i32.const 8192)))
      (br $again))))
