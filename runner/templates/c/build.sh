#!/bin/sh
# Build {{name}}.wasm (WASI preview 1) from main.c with Zig from PyPI: pip install ziglang
set -eu
cd "$(dirname "$0")"
"${PYTHON:-python3}" -m ziglang cc --target=wasm32-wasi -Os -o {{name}}.wasm main.c
