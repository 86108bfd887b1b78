;; Loops forever in its start function, which runs while the module is instantiated.
(module
  (memory (export "memory") 1)
  (func $spin (loop $l (br $l)))
  (start $spin)
  (func (export "_start")))
