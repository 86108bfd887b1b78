;; Traps on an integer division by zero.
(module
  (memory (export "memory") 1)
  (func (export "_start") (drop (i32.div_s (i32.const 1) (i32.const 0)))))
