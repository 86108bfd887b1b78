;; Throws a WebAssembly exception that nothing catches.
(module
  (tag $boom (param i32))
  (memory (export "memory") 1)
  (func (export "_start")
    (throw $boom (i32.const 7))))
