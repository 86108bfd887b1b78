;; Asks for 512 MiB of memory before running a single instruction.
(module
  (memory (export "memory") 8192)
  (func (export "_start")))
