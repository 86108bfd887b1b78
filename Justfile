# Developer recipes. `just setup` once, then `just test`.

python := env_var_or_default("PYTHON", "python3")

# Create .venv with the package (editable) and the dev tools; builds the built-in tools.
setup:
    {{python}} -m venv .venv
    .venv/bin/python -m pip install --upgrade pip
    .venv/bin/python -m pip install -e '.[dev]'

# Rebuild the built-in tools from plugins/ into runner/_builtin with the ziglang package.
build-plugins:
    python scripts/build_plugins.py --out runner/_builtin
    python scripts/build_ext_tools.py

# Regenerate manifests/*.schema.json from the pydantic models.
schemas:
    python -m runner.schemas_export

# The test suite (the same command as the README and CI).
test:
    pytest

# Benchmarks with pytest-benchmark; prints each figure and its ratio.
bench:
    pytest benchmarks --benchmark-enable --benchmark-columns=min,median,mean,max,rounds

# The soak test at full size: 10,000 mixed good and hostile runs from 2 threads.
soak:
    ZIGCLAW_SOAK_FULL=1 pytest tests/test_soak.py -s

# Fuzz manifest, config, argument and response parsing with atheris (SECONDS, default 60).
fuzz seconds="60":
    python tests/fuzz/fuzz_inputs.py -max_total_time={{seconds}} -timeout=5

# ruff and mypy (strict on runner/).
lint:
    ruff check runner tests benchmarks scripts hatch_build.py
    ruff format --check runner
    mypy
