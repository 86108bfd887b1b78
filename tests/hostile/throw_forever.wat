;; Throws and catches a WebAssembly exception forever: fuel and the epoch must still stop it.
(module
  (tag $boom (param i32))
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $again
      (block $caught (result i32)
        (try_table (catch $boom $caught)
          (throw $boom (i32.const 1)))
        (unreachable))
      drop
      br $again)))
