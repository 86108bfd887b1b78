"""Approvals: which calls need a person's yes, how they are asked, and what is remembered.

The policy is pure data from `[approval]`: `blocked` refuses, `preApproved` runs,
`ask` needs an answer from an approver (a terminal prompt, an MCP client's
elicitation, or the caller's own function). An approval covers one tool, the
values of the arguments its manifest names in `approval_key`, the policy hash
and the module's SHA-256: "yes for this session" is remembered for exactly that,
in memory only, for as long as the Runner lives.
"""

from __future__ import annotations

import enum
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from .errors import ApprovalDenied, ApprovalRequired, ToolBlocked, ZigclawError, printable
from .policy import Decision

ASK = "ask"
PRE_APPROVED = "preApproved"
BLOCKED = "blocked"
MODES = (ASK, PRE_APPROVED, BLOCKED)
# How many unreadable answers a terminal prompt takes before it gives up.
PROMPT_ATTEMPTS = 3
# A shown argument value is cut to this many characters.
MAX_SHOWN = 200


class Answer(enum.Enum):
    """An approver's answer."""

    YES = "yes"  # this call only
    NO = "no"
    SESSION = "session"  # this call and every later one with the same key


@dataclass(frozen=True)
class ApprovalRequest:
    """What is being approved; equal requests are covered by one remembered approval."""

    tool: str
    key: tuple[tuple[str, str], ...]  # (argument name, its value as canonical JSON)
    policy_hash: str
    module_sha256: str

    def describe(self) -> str:
        """One line for a person: the tool and the argument values the approval covers."""
        if not self.key:
            return f"run tool '{self.tool}' (any arguments)"
        shown = ", ".join(f"{name}={_short(value)}" for name, value in self.key)
        return printable(f"run tool '{self.tool}' with {shown}")

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "key": {name: json.loads(value) for name, value in self.key},
            "policy_hash": self.policy_hash,
            "module_sha256": self.module_sha256,
        }


Approver = Callable[[ApprovalRequest], Answer]


def _short(value: str) -> str:
    return value if len(value) <= MAX_SHOWN else value[:MAX_SHOWN] + "..."


def mode_for(default: str | None, per_tool: Mapping[str, str], tool: str, *, builtin: bool) -> str:
    """The approval mode of `tool`: its own entry, else the default, else by origin."""
    if tool in per_tool:
        return per_tool[tool]
    if default is not None:
        return default
    return PRE_APPROVED if builtin else ASK


def approval_key(names: Sequence[str], args: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The values of the named arguments (null when absent), as canonical JSON."""
    return tuple(
        (name, json.dumps(args.get(name), sort_keys=True, separators=(",", ":"), ensure_ascii=False))
        for name in names
    )


class ApprovalMemory:
    """Approvals given "for this session"; shared by every thread of one Runner."""

    def __init__(self) -> None:
        self._approved: set[ApprovalRequest] = set()
        self._lock = threading.Lock()

    def remember(self, request: ApprovalRequest) -> None:
        with self._lock:
            self._approved.add(request)

    def knows(self, request: ApprovalRequest) -> bool:
        with self._lock:
            return request in self._approved


def parse_answer(text: str) -> Answer | None:
    """A typed answer, or None when it is not one of the accepted words."""
    word = text.strip().lower()
    if word in ("y", "yes"):
        return Answer.YES
    if word in ("n", "no"):
        return Answer.NO
    if word in ("s", "session", "yes for this session", "always"):
        return Answer.SESSION
    return None


def terminal_approver(stdin: TextIO, stderr: TextIO, attempts: int = PROMPT_ATTEMPTS) -> Approver:
    """Ask on a terminal: the question on stderr, the answer from stdin.

    Garbage is asked again, up to `attempts` times; then, or at end of input, the answer is no.
    """
    lock = threading.Lock()  # one question at a time on one terminal

    def ask(request: ApprovalRequest) -> Answer:
        with lock:
            stderr.write(f"zigclaw: approve: {request.describe()}?\n")
            for _ in range(attempts):
                stderr.write("  [y]es / [n]o / [s] yes for this session: ")
                stderr.flush()
                line = stdin.readline()
                if not line:
                    stderr.write("\n")
                    return Answer.NO
                answer = parse_answer(line)
                if answer is not None:
                    return answer
                stderr.write(f"  not an answer: {printable(line.strip())[:40]!r}\n")
            stderr.write("  no valid answer; refusing.\n")
            return Answer.NO

    return ask


def decide_approval(
    tool: str,
    mode: str,
    request: Callable[[], ApprovalRequest],
    memory: ApprovalMemory,
    approve: Approver | None,
) -> tuple[Decision, ZigclawError | None]:
    """The `tool.approval` decision of one call, and the error that refuses it (None: it may run).

    `request` builds what is approved; only "ask" needs it. A "yes for this session"
    is remembered in `memory`.
    """
    if mode == BLOCKED:
        return Decision("tool.approval", False, "blocked by [approval]"), ToolBlocked(
            f"tool '{tool}' is blocked by [approval]",
            hint=f"change [approval.tools] {tool} in zigclaw.toml to allow it.",
        )
    if mode != ASK:
        return Decision("tool.approval", True, "pre-approved by [approval]"), None
    asked = request()
    if memory.knows(asked):
        return Decision("tool.approval", True, "approved earlier for this session"), None
    if approve is None:
        return Decision("tool.approval", False, "needs approval; no approver"), ApprovalRequired(
            f"tool '{tool}' needs approval and there is no one to ask",
            hint=(
                "run it on a terminal to be asked, pass --yes to `zigclaw tools run`, or set "
                f'[approval.tools] {tool} = "preApproved" in zigclaw.toml.'
            ),
        )
    try:
        answer = approve(asked)
    except ZigclawError as exc:  # the approver could not ask, or got no usable answer
        return Decision("tool.approval", False, f"{exc.name}: {exc.message}"), exc
    if answer is Answer.NO or not isinstance(answer, Answer):
        return Decision("tool.approval", False, "approval declined"), ApprovalDenied(
            f"approval to {asked.describe()} was declined"
        )
    if answer is Answer.SESSION:
        memory.remember(asked)
        return Decision("tool.approval", True, "approved for this session"), None
    return Decision("tool.approval", True, "approved once"), None


def fixed_approver(answer: Answer) -> Approver:
    """An approver that always gives `answer` (`--yes`, or an answer already obtained)."""
    return lambda _request: answer


def answer_for(request: ApprovalRequest, answer: Answer) -> Approver:
    """`answer` for exactly `request`; no for anything else (the call changed meanwhile)."""
    return lambda asked: answer if asked == request else Answer.NO
