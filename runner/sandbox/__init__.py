"""Where tools run: the plan they get, the limits they meet, and what comes back."""

from .plan import Limits, RunPlan, SandboxResult

__all__ = ["Limits", "RunPlan", "SandboxResult"]
