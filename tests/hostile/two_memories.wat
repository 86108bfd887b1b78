;; Defines a second linear memory (multi-memory): more than one memory is refused.
(module (memory (export "memory") 1) (memory 1) (func (export "_start")))
