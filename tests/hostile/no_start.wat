;; Exports memory but no _start.
(module (memory (export "memory") 1) (func (export "main")))
