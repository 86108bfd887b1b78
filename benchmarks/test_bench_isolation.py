"""What isolation costs beyond the floor: compute, two threads, output capture (issue 4, targets 4-6)."""

from __future__ import annotations

import statistics
import subprocess
import threading
import time

from runner import Runner

ROUNDS = 100_000_000  # ~0.15 s of hashing: long enough that start-up is noise


def _request(rounds: int) -> bytes:
    args = '{\\"rounds\\":' + str(rounds) + "}"
    return ('{"request_id":"0123456789abcdef0123456789abcdef","args_json":"' + args + '"}').encode()


def test_cpu_bound_guest_runs_within_1_2x_of_native(benchmark, spin_tool):
    config, native = spin_tool
    runner = Runner.from_config(config)
    runner.run("spin", {"rounds": 1000})  # compiled and cached before timing

    def wasm_run() -> float:
        started = time.perf_counter()
        runner.run("spin", {"rounds": ROUNDS})
        return time.perf_counter() - started

    def native_run() -> float:
        started = time.perf_counter()
        subprocess.run([native], input=_request(ROUNDS), capture_output=True, check=True)
        return time.perf_counter() - started

    benchmark.pedantic(wasm_run, rounds=1, iterations=1)
    wasm = statistics.median(wasm_run() for _ in range(5))
    base = statistics.median(native_run() for _ in range(5))
    ratio = wasm / base
    figures = f"wasm (fuel + epoch on) {wasm * 1000:.1f} ms, native -O2 {base * 1000:.1f} ms"
    print(f"\ncompute: {figures}, x{ratio:.2f}")
    if benchmark.stats is not None:
        assert ratio <= 1.2, f"CPU-bound guest is x{ratio:.2f} native (target <= 1.2)"


def test_two_threads_reach_1_7x_the_throughput_of_one(benchmark, spin_tool):
    config, _ = spin_tool
    runner = Runner.from_config(config)
    runner.run("spin", {"rounds": 1000})
    calls, rounds = 16, 20_000_000

    def work(count: int) -> None:
        for _ in range(count):
            runner.run("spin", {"rounds": rounds})

    def throughput(threads: int) -> float:
        workers = [threading.Thread(target=work, args=(calls // threads,)) for _ in range(threads)]
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return calls / (time.perf_counter() - started)

    benchmark.pedantic(lambda: throughput(1), rounds=1, iterations=1)
    one, two = throughput(1), throughput(2)
    print(f"\nscale: 1 thread {one:.1f} runs/s, 2 threads {two:.1f} runs/s, x{two / one:.2f}")
    if benchmark.stats is not None:
        assert two / one >= 1.7, f"2 threads give x{two / one:.2f} (target >= 1.7)"


def test_capturing_1_mib_of_stdout_costs_at_most_5_ms(benchmark, spin_tool):
    config, _ = spin_tool
    runner = Runner.from_config(config)
    small, big = {"out_kib": 0}, {"out_kib": 1000}  # 1000 KiB of text in a ~1 MiB answer
    assert len(runner.run("spin", big).stdout) == 1000 * 1024

    def median_ms(args: dict[str, int]) -> float:
        times = []
        for _ in range(30):
            started = time.perf_counter()
            runner.run("spin", args)
            times.append(time.perf_counter() - started)
        return statistics.median(times) * 1000

    benchmark(runner.run, "spin", big)
    cost = median_ms(big) - median_ms(small)
    print(f"\ncapture: 1000 KiB of stdout costs {cost:.2f} ms over an empty answer")
    if benchmark.stats is not None:
        assert cost <= 5.0, f"capturing 1 MiB cost {cost:.2f} ms (target <= 5 ms)"
