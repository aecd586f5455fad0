"""Timing helpers: medians of repeated samples, taken round-robin so that slow drifts of the
machine affect every candidate alike."""
from __future__ import annotations

import platform
import statistics
import sys
import time

import numpy as np


def _per_call(fn, number):
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def calibrate(fn, target=0.02) -> int:
    """Calls per sample so that one sample takes about `target` seconds."""
    fn()
    number = 1
    while True:
        elapsed = _per_call(fn, number) * number
        if elapsed >= target or number >= 1 << 20:
            return number
        number *= 2 if elapsed > target / 8 else 8


def compare(candidates: dict, samples=15, target=0.02) -> dict:
    """Median seconds per call of each candidate, sampled round-robin."""
    numbers = {name: calibrate(fn, target) for name, fn in candidates.items()}
    times = {name: [] for name in candidates}
    for _ in range(samples):
        for name, fn in candidates.items():
            times[name].append(_per_call(fn, numbers[name]))
    return {name: statistics.median(values) for name, values in times.items()}


def machine() -> str:
    import xform
    return (f"{platform.machine()}, {platform.processor() or 'cpu'}, Python "
            f"{sys.version.split()[0]}, numpy {np.__version__}, xform {xform.__version__}")


def fmt(seconds: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


def report(text: str, markdown_path: str = "") -> None:
    """Print a benchmark's markdown and also write it to `markdown_path` when one is given
    (the benches' `--markdown` option)."""
    print(text)
    if markdown_path:
        with open(markdown_path, "w") as out:
            out.write(text.rstrip("\n") + "\n")
