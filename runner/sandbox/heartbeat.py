"""One thread that ticks every millisecond while any run is live.

Each tick advances the wasmtime epoch (the wall-clock check of every guest) and
pumps the output pipes. After the last run it keeps ticking for a short grace
period, so back-to-back runs do not pay for waking it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

TICK_SECONDS = 0.001
IDLE_GRACE_SECONDS = 0.25


class Heartbeat:
    """Calls `on_tick` every TICK_SECONDS while held, from one daemon thread."""

    def __init__(self, on_tick: Callable[[], None]) -> None:
        self._on_tick = on_tick
        self._holders = 0
        self._parked = True
        self._last_release = 0.0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def hold(self) -> None:
        with self._cond:
            self._holders += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="zigclaw-heartbeat", daemon=True)
                self._thread.start()
            elif self._parked:
                self._cond.notify()

    def release(self) -> None:
        with self._cond:
            self._holders -= 1
            self._last_release = time.monotonic()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._holders == 0 and time.monotonic() - self._last_release > IDLE_GRACE_SECONDS:
                    self._parked = True
                    self._cond.wait()
                self._parked = False
            self._on_tick()
            time.sleep(TICK_SECONDS)
