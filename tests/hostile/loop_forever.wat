;; Spins forever: the wall clock (or fuel) must stop it.
(module
  (memory (export "memory") 1)
  (func (export "_start") (loop $spin (br $spin))))
