"""Benchmarks run only with `just bench` (pytest benchmarks --benchmark-enable)."""
