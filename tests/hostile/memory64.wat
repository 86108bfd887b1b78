;; A 64-bit memory: not a WASI preview 1 module, refused at compile time.
(module (memory (export "memory") i64 1) (func (export "_start")))
