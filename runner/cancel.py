"""A cancellation flag a caller hands to `Runner.run` and sets from any thread."""

from __future__ import annotations

import threading


class CancelToken:
    """Set once to stop a call: before the sandbox starts it never runs, a running guest
    traps at the next epoch tick (1 ms) and a sleeping guest wakes at once."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds, waking early when cancelled; True when cancelled."""
        return self._event.wait(timeout)
