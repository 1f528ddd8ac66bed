"""Timing helper shared by the benchmark scripts."""

import time


def timed(fn, repeats: int) -> float:
    """Mean seconds per call of fn() over `repeats` calls, after one warm-up call."""
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats
