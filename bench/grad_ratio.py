"""Gradient time / primal time for the issue-3 functions, side by side with autograd (and JAX,
PyTorch where installed), medians of round-robin samples in one run.

`python -m bench.grad_ratio`
"""
from __future__ import annotations

import numpy as np

import xform
from bench.timing import compare, fmt, machine


def sum_(x):
    return np.sum(x)


def sum_sin(x):
    return np.sum(np.sin(x))


def mlp_loss(params, x, y):
    """2-layer tanh MLP, 256 -> 128 -> 1, squared error."""
    w1, b1, w2, b2 = params
    hidden = np.tanh(x @ w1 + b1)
    out = hidden @ w2 + b2
    return np.mean((out[:, 0] - y) ** 2)


def gp_lml(x, y, noise):
    """GP log marginal likelihood with a squared-exponential kernel (64 points)."""
    sq = (x[:, None] - x[None, :]) ** 2
    k = np.exp(-0.5 * sq) + (noise ** 2 + 1e-6) * np.eye(x.shape[0])
    chol = np.linalg.cholesky(k)
    alpha = np.linalg.solve(k, y)
    return -0.5 * np.dot(y, alpha) - np.sum(np.log(np.diagonal(chol, 0, -1, -2))) \
        - 0.5 * x.shape[0] * np.log(2 * np.pi)


def problems(rng):
    x1000 = rng.standard_normal(1000)
    params = (rng.standard_normal((256, 128)) * 0.05, np.zeros(128),
              rng.standard_normal((128, 1)) * 0.05, np.zeros(1))
    xb, yb = rng.standard_normal((64, 256)), rng.standard_normal(64)
    xs, ys = np.linspace(-3, 3, 64), np.sin(np.linspace(-3, 3, 64))
    return {
        "sum": (sum_, (x1000,), 0),
        "sum_sin": (sum_sin, (x1000,), 0),
        "mlp": (mlp_loss, (params, xb, yb), 0),
        "gp_lml": (gp_lml, (xs, ys, 0.3), (0, 1, 2)),
    }


def _autograd_version(fun, args, argnums):
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError:
        return None
    namespace = dict(fun.__globals__, np=anp)
    import types
    ported = types.FunctionType(fun.__code__, namespace, fun.__name__)
    grad = autograd.grad(ported, argnums)
    return lambda: grad(*args)


def main(samples=15):
    rng = np.random.default_rng(0)
    print(f"machine: {machine()}")
    print("| function | primal | xform grad/primal | autograd grad/primal |")
    print("|---|---|---|---|")
    for name, (fun, args, argnums) in problems(rng).items():
        xgrad = xform.grad(fun, argnums)
        xgrad(*args)  # stage, transform and compile outside the timing
        candidates = {"primal": lambda: fun(*args), "xform": lambda: xgrad(*args)}
        ag = _autograd_version(fun, args, argnums)
        if ag is not None:
            candidates["autograd"] = ag
        times = compare(candidates, samples=samples)
        ratio = {k: times[k] / times["primal"] for k in times}
        print(f"| {name} | {fmt(times['primal'])} | {ratio['xform']:.2f} | "
              f"{ratio.get('autograd', float('nan')):.2f} |")


if __name__ == "__main__":
    main()
