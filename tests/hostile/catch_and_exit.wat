;; Throws a WebAssembly exception, catches it, and exits with the code it carried (7).
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (tag $boom (param i32))
  (memory (export "memory") 1)
  (func (export "_start")
    (block $caught (result i32)
      (try_table (catch $boom $caught)
        (throw $boom (i32.const 7)))
      (unreachable))
    call $exit))
