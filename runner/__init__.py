"""zigclaw: run untrusted agent tools as WASI modules in-process, under zigclaw's protocol v0.

from runner import Runner
result = Runner.from_config().run("echo", {"text": "hi"})
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .cancel import CancelToken
from .errors import (
    ALL_ERRORS,
    ApprovalDenied,
    ApprovalRequired,
    AuditUnavailable,
    ExampleFailed,
    ExternalToolDenied,
    InternalError,
    InvalidArchive,
    InvalidConfig,
    InvalidManifest,
    InvalidModule,
    InvalidToolArgs,
    InvalidToolName,
    MalformedResponse,
    SandboxUnavailable,
    ServerUnavailable,
    StreamTooLong,
    ToolAbiMismatch,
    ToolBlocked,
    ToolCancelled,
    ToolExists,
    ToolFailed,
    ToolIntegrityMismatch,
    ToolMemoryLimit,
    ToolNetworkNotAllowed,
    ToolNotAllowed,
    ToolNotFound,
    ToolNotInRegistry,
    ToolOutOfFuel,
    ToolTimeout,
    ToolTrap,
    ZigclawError,
)

if TYPE_CHECKING:
    from .service import Runner, RunResult

__version__ = "0.1.0"

__all__ = [
    "ALL_ERRORS",
    "ApprovalDenied",
    "ApprovalRequired",
    "AuditUnavailable",
    "CancelToken",
    "ExampleFailed",
    "ExternalToolDenied",
    "InternalError",
    "InvalidArchive",
    "InvalidConfig",
    "InvalidManifest",
    "InvalidModule",
    "InvalidToolArgs",
    "InvalidToolName",
    "MalformedResponse",
    "RunResult",
    "Runner",
    "SandboxUnavailable",
    "ServerUnavailable",
    "StreamTooLong",
    "ToolAbiMismatch",
    "ToolBlocked",
    "ToolCancelled",
    "ToolExists",
    "ToolFailed",
    "ToolIntegrityMismatch",
    "ToolMemoryLimit",
    "ToolNetworkNotAllowed",
    "ToolNotAllowed",
    "ToolNotFound",
    "ToolNotInRegistry",
    "ToolOutOfFuel",
    "ToolTimeout",
    "ToolTrap",
    "ZigclawError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # Runner pulls in pydantic and jsonschema: load it on first use, not at import.
    if name in ("Runner", "RunResult"):
        from . import service

        return getattr(service, name)
    raise AttributeError(f"module 'runner' has no attribute {name!r}")
