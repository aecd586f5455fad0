"""The suite's programs (bench/suite.py) on whatever device jax sees, at the suite's sizes and
scaled up until an accelerator pays: per-call gradient times of xform's XLA backend (jax
arrays on the device in, results left there), JAX's jit and PyTorch (on the same device,
when installed), with xform's numpy backend on the CPU beside them. Medians of round-robin
samples; every device time includes waiting for the result (`block_until_ready`, CUDA's
synchronize). It runs on a CPU-only machine too (jax's device is then the CPU).

`python -m bench.gpu_check [--scales 1,100,1000] [--rows a,b] [--samples N] [--markdown PATH]`
"""
from __future__ import annotations

import argparse
import datetime
import math
import time

import numpy as np

import xform
from bench import suite
from bench.timing import compare, fmt, machine, report

# Rows whose Python loops unroll to one equation per element: scaling them up scales the
# graph (and every system's compile), not the arrays, so they run at the suite's size only.
UNROLLED = frozenset({"_sum_1000", "_sum_sin_1000", "naive_map_sin_cos_exp", "map_sin_cos_exp",
                      "large_single_block", "tiny_scalar"})
SLOW_CALL = 2.0   # seconds: a system slower than this on one call is reported, not sampled


def _scaled(name, args, scale):
    """The row's arguments with about `scale` times the elements (matrices grow by the
    square root of `scale` per side, the GP's n by it too, capped at 4096)."""
    if scale == 1:
        return args
    side = max(1, round(math.sqrt(scale)))
    rng = np.random.default_rng(1)
    if name in ("sum_1000", "sum_sin_1000"):
        return (rng.standard_normal(args[0].size * scale),)
    if name == "broadcast_sin_cos_exp":
        return (rng.standard_normal((args[0].shape[0] * side, args[0].shape[1] * side)),)
    if name in ("kron_sum", "kron_view_sum"):
        a, b = args
        grow = max(1, round(scale ** 0.25))   # kron's output grows with both factors
        return (rng.standard_normal((a.shape[0] * grow, a.shape[1] * grow)),
                rng.standard_normal((b.shape[0] * grow, b.shape[1] * grow)))
    if name == "simple_mlp":
        w1, w2, x, y = args
        return (w1, w2, rng.standard_normal((x.shape[0], x.shape[1] * scale)),
                rng.standard_normal((y.shape[0], y.shape[1] * scale)))
    if name.startswith("gp_lml"):
        n = min(4096, args[0].size * side)
        grid = np.linspace(-3, 3, n)
        return (grid, np.sin(grid), args[2])
    return args


def _in_x64(jax, fn):
    """`fn` run in float64 (jax's x64 mode, for the call only, as xform's XLA backend)."""
    def call(*args):
        with jax.enable_x64(True):
            return fn(*args)
    return call


def _systems(jax, jnp, torch):
    """name -> (make(row, nums) -> gradient function, convert(args) -> its arguments,
    block(result))."""
    def on_device(args):
        with jax.enable_x64(True):
            return tuple(jax.device_put(a) if isinstance(a, np.ndarray) else a for a in args)

    systems = {
        "xform xla": (lambda row, nums: xform.grad(lambda *a: row(np, *a), nums,
                                                   backend="xla"),
                      on_device, jax.block_until_ready),
        "jax jit": (lambda row, nums: _in_x64(jax, jax.jit(jax.grad(lambda *a: row(jnp, *a),
                                                                    nums))),
                    on_device, jax.block_until_ready),
        "xform numpy (CPU)": (lambda row, nums: xform.grad(lambda *a: row(np, *a), nums),
                              lambda args: args, lambda result: result),
    }
    if torch is not None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        torch_np = suite._TorchNumpy(torch)

        def make_torch(row, nums):
            nums = (nums,) if isinstance(nums, int) else nums

            def grad_fn(*tensors):
                tensors = [t.detach().requires_grad_(i in nums) if hasattr(t, "detach") else t
                           for i, t in enumerate(tensors)]
                out = row(torch_np, *tensors)
                return torch.autograd.grad(out, [tensors[i] for i in nums])
            return grad_fn

        def to_torch(args):
            return tuple(torch.tensor(a, dtype=torch.float64, device=device)
                         if isinstance(a, np.ndarray) else a for a in args)

        def sync(result):
            if device == "cuda":
                torch.cuda.synchronize()
            return result
        systems[f"torch ({device})"] = (make_torch, to_torch, sync)
    return systems


def _optional_torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def run(scales=(1, 100, 1000), only=None, samples=7):
    import jax
    import jax.numpy as jnp
    torch = _optional_torch()
    systems = _systems(jax, jnp, torch)
    rows = suite._rows(np.random.default_rng(0))
    results = []
    for name, (row, args, nums, _) in rows.items():
        if only and name not in only:
            continue
        for scale in scales:
            if scale != 1 and name in UNROLLED:
                continue
            scaled = _scaled(name, args, scale)
            candidates, notes = {}, {}
            for system, (make, convert, block) in systems.items():
                fn, system_args = make(row, nums), convert(scaled)
                try:
                    block(fn(*system_args))        # the first call: compile
                    start = time.perf_counter()
                    block(fn(*system_args))
                    if time.perf_counter() - start > SLOW_CALL:
                        notes[system] = f"> {fmt(SLOW_CALL)}"
                        continue
                except Exception as err:   # a system that cannot run a row is reported
                    notes[system] = f"error: {type(err).__name__}"
                    continue
                candidates[system] = (lambda f=fn, a=system_args, b=block: b(f(*a)))
            times = compare(candidates, samples=samples) if candidates else {}
            elements = sum(np.size(a) for a in scaled)
            results.append((name, scale, elements, times, notes))
    return list(systems), results, jax.devices()


def markdown(columns, results, devices) -> str:
    lines = [f"Per-call gradient times on {', '.join(str(d) for d in devices)} (jax's "
             f"devices; medians, round-robin, results waited for); xform numpy on the CPU; "
             f"{datetime.date.today()}; {machine()}", "",
             "| row | scale | elements | " + " | ".join(columns) + " | xla / jax jit |",
             "|" + "---|" * (len(columns) + 4)]
    for name, scale, elements, times, notes in results:
        cells = [fmt(times[c]) if c in times else notes.get(c, "n/a") for c in columns]
        ratio = (f"{times['xform xla'] / times['jax jit']:.2f}"
                 if "xform xla" in times and "jax jit" in times else "n/a")
        lines.append(f"| {name} | {scale} | {elements} | " + " | ".join(cells)
                     + f" | {ratio} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scales", default="1,100,1000")
    parser.add_argument("--rows", default="")
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--markdown", default="")
    options = parser.parse_args()
    columns, results, devices = run(tuple(int(s) for s in options.scales.split(",")),
                                    [r for r in options.rows.split(",") if r], options.samples)
    report(markdown(columns, results, devices), options.markdown)


if __name__ == "__main__":
    main()
