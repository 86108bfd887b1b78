#!/bin/sh
# Build {{name}}.wasm (WASI preview 1) from main.zig with Zig from PyPI: pip install ziglang
set -eu
cd "$(dirname "$0")"
"${PYTHON:-python3}" -m ziglang build-exe -target wasm32-wasi -O ReleaseSmall -lc \
    -femit-bin={{name}}.wasm main.zig
rm -f {{name}}.wasm.o
