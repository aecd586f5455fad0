"""The benchmark table of Mooncake's README, re-expressed in numpy: gradient time / primal
time for each row, for xform and every installed peer (autograd, JAX eager, JAX jit, PyTorch
eager), medians of samples taken round-robin in one process, plus first-call times
(stage + transform + compile + run: the median over fresh functions) and a cross-check of the
gradients between systems. With jax installed, xform's XLA backend (`backend="xla"`) is a
column too. JAX returns before its computation has finished (asynchronous dispatch): its
times include `block_until_ready`, as every other column's include the computation.

`python -m bench.suite [--samples N] [--rows a,b] [--markdown PATH]`
"""
from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import math
import statistics
import time

import numpy as np

import xform
from bench.timing import compare, fmt, machine, report

# -- the rows, written once against a numpy-like namespace `xp` ------------------------------


def sum_1000(xp, x):
    return xp.sum(x)


def loop_sum_1000(xp, x):
    y = 0.0
    for i in range(x.shape[0]):
        y = y + x[i]
    return y


def sum_sin_1000(xp, x):
    return xp.sum(xp.sin(x))


def loop_sum_sin_1000(xp, x):
    y = 0.0
    for i in range(x.shape[0]):
        y = y + xp.sin(x[i])
    return y


def kron_sum(xp, a, b):
    return xp.sum(xp.kron(a, b))


def kron_view_sum(xp, a, b):
    return xp.sum(xp.kron(a[:20, :20], xp.triu(b)))


def naive_map_sin_cos_exp(xp, x):
    flat = xp.reshape(x, (-1,))
    return xp.sum(xp.stack([xp.sin(xp.cos(xp.exp(flat[i]))) for i in range(flat.shape[0])]))


def map_sin_cos_exp(xp, x):
    flat = xp.reshape(x, (-1,))
    return xp.sum(xp.stack(list(map(lambda v: xp.sin(xp.cos(xp.exp(v))),
                                    [flat[i] for i in range(flat.shape[0])]))))


def broadcast_sin_cos_exp(xp, x):
    return xp.sum(xp.sin(xp.cos(xp.exp(x))))


def simple_mlp(xp, w1, w2, x, y):
    hidden = w1 @ x
    return xp.sum((y - w2 @ (hidden * (hidden > 0))) ** 2)


def gp_lml(xp, x, y, noise):
    n = x.shape[0]
    sq = (x[:, None] - x[None, :]) ** 2
    k = xp.exp(-0.5 * sq) + (noise * noise + 1e-3) * xp.eye(n)
    chol = xp.linalg.cholesky(k)
    alpha = xp.linalg.solve(k, y)
    return (-0.5 * xp.sum(y * alpha) - xp.sum(xp.log(xp.diagonal(chol, 0, -2, -1)))
            - 0.5 * n * math.log(2 * math.pi))


def _gp_cholesky(xp, x, noise):
    n = x.shape[0]
    k = xp.exp(-0.5 * (x[:, None] - x[None, :]) ** 2) + (noise * noise + 1e-3) * xp.eye(n)
    return xp.linalg.cholesky(k)


def _log_det_half(xp, chol):
    # diagonal over axes (-1, -2), the one form autograd differentiates
    return xp.sum(xp.log(xp.diagonal(chol, 0, -1, -2)))


def gp_lml_chol(xp, x, y, noise):
    """The GP row as people write it with a Cholesky factor: alpha = L^-1 y."""
    chol = _gp_cholesky(xp, x, noise)
    alpha = xp.linalg.solve(chol, y)
    return -0.5 * xp.sum(alpha * alpha) - _log_det_half(xp, chol)


def gp_lml_trsm(xp, x, y, noise):
    """gp_lml_chol with SciPy's triangular solve (each system's own scipy.linalg)."""
    chol = _gp_cholesky(xp, x, noise)
    alpha = _scipy_linalg(xp).solve_triangular(chol, y, lower=True)
    return -0.5 * xp.sum(alpha * alpha) - _log_det_half(xp, chol)


def _scipy_linalg(xp):
    """The scipy.linalg of the system behind `xp`."""
    name = getattr(xp, "__name__", "")
    if name == "numpy":
        import scipy.linalg
        return scipy.linalg
    if name.startswith("autograd"):
        import autograd.scipy.linalg
        return autograd.scipy.linalg
    if name.startswith("jax"):
        import jax.scipy.linalg
        return jax.scipy.linalg
    return _TorchScipyLinalg(xp.torch)


def large_single_block(xp, x):
    y = x[0]
    for _ in range(400):
        y = y * x[1]
    return y


def tiny_scalar(xp, x):
    return xp.sin(x) * x + 1.0


def _rows(rng):
    """name -> (row function, arguments, argnums, target ratio for xform)."""
    x1000 = rng.standard_normal(1000)
    grid = rng.standard_normal((10, 10))
    return {
        "sum_1000": (sum_1000, (x1000,), 0, 3),
        "_sum_1000": (loop_sum_1000, (x1000,), 0, 30),
        "sum_sin_1000": (sum_sin_1000, (x1000,), 0, 3),
        "_sum_sin_1000": (loop_sum_sin_1000, (x1000,), 0, 30),
        "kron_sum": (kron_sum, (rng.standard_normal((20, 20)), rng.standard_normal((40, 40))),
                     (0, 1), 3),
        "kron_view_sum": (kron_view_sum, (rng.standard_normal((40, 30)),
                                          rng.standard_normal((40, 40))), (0, 1), 3),
        "naive_map_sin_cos_exp": (naive_map_sin_cos_exp, (grid,), 0, 15),
        "map_sin_cos_exp": (map_sin_cos_exp, (grid,), 0, 3),
        "broadcast_sin_cos_exp": (broadcast_sin_cos_exp, (grid,), 0, 3),
        "simple_mlp": (simple_mlp, (rng.standard_normal((256, 128)) * 0.1,
                                    rng.standard_normal((128, 256)) * 0.1,
                                    rng.standard_normal((128, 70)),
                                    rng.standard_normal((128, 70))), (0, 1, 2, 3), 3.5),
        "gp_lml": (gp_lml, (np.linspace(-3, 3, 128), np.sin(np.linspace(-3, 3, 128)), 0.3),
                   (0, 1, 2), 3.5),
        "gp_lml_chol": (gp_lml_chol, (np.linspace(-3, 3, 128), np.sin(np.linspace(-3, 3, 128)),
                                      0.3), (0, 1, 2), 3.0),
        "gp_lml_trsm": (gp_lml_trsm, (np.linspace(-3, 3, 128), np.sin(np.linspace(-3, 3, 128)),
                                      0.3), (0, 1, 2), 2.5),
        "large_single_block": (large_single_block, (np.array([0.9, 1.0001]),), 0, 10),
        "tiny_scalar": (tiny_scalar, (0.7,), 0, 5),
    }


# -- systems ----------------------------------------------------------------------------------

class _TorchNumpy:
    """The few numpy names the rows use, on torch tensors (float64)."""

    def __init__(self, torch):
        self.torch = torch
        self.linalg = torch.linalg

    def __getattr__(self, name):
        return getattr(self.torch, name)

    def eye(self, n):
        return self.torch.eye(n, dtype=self.torch.float64)

    def reshape(self, x, shape):
        return self.torch.reshape(x, shape)


class _TorchScipyLinalg:
    def __init__(self, torch):
        self.torch = torch

    def solve_triangular(self, a, b, lower=False):
        return self.torch.linalg.solve_triangular(a, b[:, None], upper=not lower)[:, 0]


def _systems():
    systems = {}
    try:
        import autograd
        import autograd.numpy as anp
        systems["autograd"] = ("grad", lambda row, nums: autograd.grad(
            lambda *a: row(anp, *a), nums), lambda v: v)
    except ImportError:
        pass
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
        systems["jax eager"] = ("grad", lambda row, nums: jax.grad(
            lambda *a: row(jnp, *a), nums), lambda v: v)
        systems["jax jit"] = ("grad", lambda row, nums: _blocking(jax, jax.jit(jax.grad(
            lambda *a: row(jnp, *a), nums))), lambda v: v)
    except ImportError:
        pass
    try:
        import torch
        torch_np = _TorchNumpy(torch)

        def torch_grad(row, nums):
            nums = (nums,) if isinstance(nums, int) else nums

            def grad_fn(*args):
                tensors = [torch.tensor(a, dtype=torch.float64, requires_grad=i in nums)
                           if isinstance(a, (np.ndarray, float)) else a
                           for i, a in enumerate(args)]
                out = row(torch_np, *tensors)
                grads = torch.autograd.grad(out, [tensors[i] for i in nums])
                return grads[0] if len(nums) == 1 else grads
            return grad_fn
        systems["torch eager"] = ("grad", torch_grad, lambda v: v)
    except ImportError:
        pass
    return systems


def _blocking(jax, fn):
    """`fn` returning once its results are computed (jax dispatches asynchronously)."""
    return lambda *args: jax.block_until_ready(fn(*args))


def _xla_available() -> bool:
    try:
        import jax  # noqa: F401
    except ImportError:
        return False
    return True


def _as_numpy(value):
    if isinstance(value, (tuple, list)):
        return [_as_numpy(v) for v in value]
    if hasattr(value, "detach"):
        value = value.detach().numpy()
    return np.asarray(value, dtype=np.float64)


def _agree(a, b) -> bool:
    a, b = _as_numpy(a), _as_numpy(b)
    if isinstance(a, list):
        return len(a) == len(b) and all(_agree(x, y) for x, y in zip(a, b))
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-6, atol=1e-8)


FIRST_CALL_SAMPLES = 3
FIRST_CALL_BUDGET = 5.0  # seconds: slower first calls are measured once


def _first_call(make, args):
    """(median first-call time, the last function, its value): each sample makes a fresh
    gradient function (nothing cached for it) and times its first call, while the samples
    so far took under FIRST_CALL_BUDGET."""
    times = []
    while len(times) < FIRST_CALL_SAMPLES and sum(times) < FIRST_CALL_BUDGET:
        fn = make()
        start = time.perf_counter()
        value = fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times), fn, value


def run(samples=11, only=None):
    rng = np.random.default_rng(0)
    peers = _systems()
    with_xla = _xla_available()
    columns = ["xform"] + (["xform xla"] if with_xla else []) + list(peers)
    results = []
    for name, (row, args, nums, target) in _rows(rng).items():
        if only and name not in only:
            continue
        primal = (lambda row=row, args=args: row(np, *args))
        # numpy's own first-use costs (BLAS/LAPACK start-up: tens of ms) are not ours to count
        primal()
        first, checks = {}, {}
        first["xform"], xgrad, reference = _first_call(
            lambda row=row: xform.grad(lambda *a: row(np, *a), nums), args)
        candidates = {"primal": primal, "xform": lambda f=xgrad, a=args: f(*a)}
        if with_xla:
            first["xform xla"], fn, value = _first_call(
                lambda row=row: xform.grad(lambda *a: row(np, *a), nums, backend="xla"), args)
            checks["xform xla"] = _agree(reference, value)
            candidates["xform xla"] = (lambda f=fn, a=args: f(*a))
        for peer, (_, make, _) in peers.items():
            try:
                first[peer], fn, value = _first_call(lambda: make(row, nums), args)
                checks[peer] = _agree(reference, value)
                candidates[peer] = (lambda f=fn, a=args: f(*a))
            except Exception as err:  # a peer that cannot run a row is reported, not fatal
                checks[peer] = f"error: {type(err).__name__}"
        times = compare(candidates, samples=samples)
        results.append((name, target, times, first, checks))
    return columns, results


def _peer_versions() -> str:
    versions = []
    for package in ("autograd", "jax", "jaxlib", "torch"):
        try:
            versions.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return ", ".join(versions) or "none installed"


def _geomean(values) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def markdown(columns, results) -> str:
    """Two tables from one run: per-call gradient time / primal (with each system's geomean),
    and first calls (with xform / autograd: a quick look, each system's samples taken in a
    row with no warm-up; issue 17's target is judged by bench/first_call.py)."""
    lines = [f"Benchmarks: gradient time / numpy primal time (medians, round-robin, same run); "
             f"{datetime.date.today()}; {machine()}; peers: {_peer_versions()}", ""]
    lines += ["| row | primal | " + " | ".join(columns) + " | xform target |",
              "|" + "---|" * (len(columns) + 3)]
    ratios = {column: [] for column in columns}
    for name, target, times, first, checks in results:
        cells = []
        for column in columns:
            if column in times:
                ratio = times[column] / times["primal"]
                ratios[column].append(ratio)
                mark = "" if column == "xform" or checks.get(column) is True else " (!)"
                cells.append(f"{ratio:.2f}{mark}")
            else:
                cells.append(str(checks.get(column, "n/a")))
        met = "met" if times["xform"] / times["primal"] <= target else "missed"
        lines.append(f"| {name} | {fmt(times['primal'])} | " + " | ".join(cells)
                     + f" | {target} ({met}) |")
    lines.append("| geomean (rows each system ran) | | " + " | ".join(
        f"{_geomean(ratios[c]):.2f}" for c in columns) + " | |")
    if "xform xla" in columns and "jax jit" in columns:
        pairs = [(name, times["xform xla"] / times["jax jit"])
                 for name, _, times, _, _ in results
                 if "xform xla" in times and "jax jit" in times]
        worst = max(pairs, key=lambda pair: pair[1]) if pairs else ("n/a", math.nan)
        lines += ["", f"xform xla / jax jit per call: geomean {_geomean([r for _, r in pairs]):.2f}"
                  f" over {len(pairs)} rows; slowest row {worst[0]} at {worst[1]:.2f}; per row: "
                  + ", ".join(f"{name} {ratio:.2f}" for name, ratio in pairs) + "."]
    lines += ["", f"First gradient call (xform's default tier; the peer's first gradient "
              f"call; median of {FIRST_CALL_SAMPLES} fresh functions taken in a row, one when a "
              f"call takes over {FIRST_CALL_BUDGET:g} s; no warm-up, so the small rows read "
              f"high: issue 17's target is judged by `python -m bench.first_call`):", "",
              "| row | " + " | ".join(columns) + " | xform / autograd |",
              "|" + "---|" * (len(columns) + 2)]
    for name, _, _, first, _ in results:
        cells = [fmt(first[c]) if c in first else "n/a" for c in columns]
        ratio = (f"{first['xform'] / first['autograd']:.2f}" if "autograd" in first
                 else "n/a")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")
    if "xform xla" in columns and "jax jit" in columns:
        firsts = [first["xform xla"] / first["jax jit"] for _, _, _, first, _ in results
                  if "xform xla" in first and "jax jit" in first]
        lines += ["", f"xform xla / jax jit first call: geomean {_geomean(firsts):.2f}; "
                  f"rows at most 1: {sum(r <= 1 for r in firsts)} of {len(firsts)}."]
    lines += ["", "(!) marks a peer whose gradient disagrees with xform's (rtol 1e-6)."]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=11)
    parser.add_argument("--rows", default="")
    parser.add_argument("--markdown", default="")
    options = parser.parse_args()
    columns, results = run(options.samples, [r for r in options.rows.split(",") if r])
    report(markdown(columns, results), options.markdown)


if __name__ == "__main__":
    main()


