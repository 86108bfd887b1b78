"""One thread that ticks every millisecond while a run has been going for a while.

Each tick advances the wasmtime epoch (the wall-clock check of every guest) and
pumps the output pipes. A run shorter than a tick never needs either: its
deadline is far off and its pipes hold its output. So the thread looks for runs
that have grown old only every IDLE_POLL_SECONDS and ticks only while one is
live; short back-to-back runs do not wake it a thousand times a second (each
wake takes the GIL from the thread running the guests). After the last run it
waits a grace period before parking, so a burst of runs does not pay for
waking it either.

The cost: a run's first tick can come up to IDLE_POLL_SECONDS + TICK_SECONDS
after it started, which bounds how late a very short deadline is noticed and
how long a guest that fills its pipe waits for the first drain.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

TICK_SECONDS = 0.001
IDLE_POLL_SECONDS = 0.005
IDLE_GRACE_SECONDS = 0.25


class Heartbeat:
    """Calls `on_tick` every TICK_SECONDS while a held run is older than a tick, from one daemon thread."""

    def __init__(self, on_tick: Callable[[], None]) -> None:
        self._on_tick = on_tick
        self._live: dict[int, float] = {}  # token -> when that run started (monotonic)
        self._tokens = itertools.count()
        self._parked = True
        self._last_release = 0.0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def hold(self) -> int:
        """Register a run that starts now; returns the token to `release` it with."""
        token = next(self._tokens)
        now = time.monotonic()
        with self._cond:
            self._live[token] = now
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="zigclaw-heartbeat", daemon=True)
                self._thread.start()
            elif self._parked:
                self._cond.notify()
        return token

    def release(self, token: int) -> None:
        with self._cond:
            self._live.pop(token, None)
            self._last_release = time.monotonic()

    def _oldest(self) -> float | None:
        """When the oldest live run started, parking the thread while there is none for a while."""
        with self._cond:
            while not self._live and time.monotonic() - self._last_release > IDLE_GRACE_SECONDS:
                self._parked = True
                self._cond.wait()
            self._parked = False
            return min(self._live.values()) if self._live else None

    def _run(self) -> None:
        while True:
            oldest = self._oldest()
            if oldest is not None and time.monotonic() - oldest >= TICK_SECONDS:
                self._on_tick()
                time.sleep(TICK_SECONDS)
            else:
                time.sleep(IDLE_POLL_SECONDS)
