"""Per-call time of a drawing gradient (a reparameterised Monte-Carlo estimate): draws staged
as `random_draw` equations (the cached graph runs; issue 14) against the fallback that stages
the function again on every call (what every drawing function paid before, and what a draw
that cannot be staged still pays: a generator held in a tuple), and eager numpy of the same
function. Medians of round-robin samples.

`python -m bench.random_draws`
"""
import numpy as np

import xform
from bench.timing import compare, fmt, machine

N = 16


def main():
    staged_rng = np.random.default_rng(0)
    held_in_tuple = (np.random.default_rng(0),)     # no proxy can stand in a tuple

    def estimate_staged(mu):
        eps = staged_rng.standard_normal(N)
        return np.mean(np.sin(mu + 0.5 * eps) ** 2)

    def estimate_restaged(mu):
        eps = held_in_tuple[0].standard_normal(N)
        return np.mean(np.sin(mu + 0.5 * eps) ** 2)

    staged, restaged = xform.grad(estimate_staged), xform.grad(estimate_restaged)
    mu = np.zeros(N)
    staged(mu), restaged(mu)
    builds = xform.cache_info()["builds"]
    staged(mu)
    assert xform.cache_info()["builds"] == builds, "the staged draw must not restage"
    results = compare({
        "numpy f (value only)": lambda: estimate_staged(mu),
        "grad, draws staged": lambda: staged(mu),
        "grad, restaged per call": lambda: restaged(mu),
    }, samples=15)
    print(f"machine: {machine()}")
    for name, seconds in results.items():
        print(f"{name:>24}: {fmt(seconds)}")
    print(f"restaged / staged: "
          f"{results['grad, restaged per call'] / results['grad, draws staged']:.1f}x")


if __name__ == "__main__":
    main()
