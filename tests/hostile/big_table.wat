;; Starts with a table of ten million elements.
(module (memory (export "memory") 1) (table 10000000 funcref) (func (export "_start")))
