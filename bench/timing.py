"""Shared by the micro-benchmarks (bench/metrics.py, bench/querylog.py)."""
from __future__ import annotations

import statistics
import time


def per_call_us(fn, runs: int, repeats: int = 7) -> float:
    """Median over `repeats` of the mean time of one call `fn(i)`, in µs."""
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(runs):
            fn(i)
        samples.append((time.perf_counter() - t0) / runs * 1e6)
    return statistics.median(samples)
