;; Grows memory a page at a time until refused, then traps on the refusal.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $grow
      (if (i32.eq (memory.grow (i32.const 1)) (i32.const -1)) (then unreachable))
      (br $grow))))
