"""The worker pool behind the blocking-call guard."""

from __future__ import annotations

import threading

import pytest

from runner.sandbox import workers
from runner.sandbox.workers import WorkerPool, WorkersExhausted, WorkerTimeout


def test_a_call_returns_its_result_and_reraises_its_error():
    pool = WorkerPool()
    assert pool.call(lambda: 42, timeout=5) == 42
    with pytest.raises(ZeroDivisionError):
        pool.call(lambda: 1 / 0, timeout=5)


def test_a_stuck_call_is_given_up_on_and_stuck_workers_are_capped(monkeypatch):
    monkeypatch.setattr(workers, "MAX_STUCK_WORKERS", 1)
    pool = WorkerPool()
    release = threading.Event()
    with pytest.raises(WorkerTimeout):
        pool.call(release.wait, timeout=0.05)
    with pytest.raises(WorkersExhausted):
        pool.call(lambda: 1, timeout=5)
    release.set()  # the stuck worker comes back and frees its slot
    for _ in range(200):
        try:
            assert pool.call(lambda: 2, timeout=5) == 2
            break
        except WorkersExhausted:
            threading.Event().wait(0.01)
    else:
        raise AssertionError("the returning worker never freed its slot")


def test_workers_run_with_a_known_large_stack():
    from runner.sandbox.stack import _query_stack_bytes

    size = WorkerPool().call(_query_stack_bytes, timeout=5)
    assert size >= workers.WORKER_STACK_BYTES
