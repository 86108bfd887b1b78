"""`python -m runner` runs the zigclaw CLI."""

from .cli import run

run()
