"""Recovering a heat source from a final temperature field, differentiating through the
simulation's time loop.

An explicit finite-difference solver for the 2-D heat equation on a periodic grid
(`np.roll` stencils), run for a fixed number of steps in a Python loop; the unknown is the
source term. The misfit between the simulated and the observed final field plus a
smoothness penalty is minimised with `scipy.optimize.minimize(jac=xform.grad(...))`, the
adjoint method done by reverse mode.
"""
import numpy as np
from scipy import optimize

import xform


def simulate(source, u0, steps, kappa=0.2):
    u = u0
    for _ in range(steps):
        laplacian = (np.roll(u, 1, 0) + np.roll(u, -1, 0) + np.roll(u, 1, 1)
                     + np.roll(u, -1, 1) - 4 * u)
        u = u + kappa * laplacian + 0.05 * source
    return u


def misfit(source_flat, u0, observed, steps):
    source = source_flat.reshape(u0.shape)
    u = simulate(source, u0, steps)
    smoothness = np.sum((np.roll(source, 1, 0) - source) ** 2 + (np.roll(source, 1, 1) - source) ** 2)
    return 0.5 * np.sum((u - observed) ** 2) + 1e-3 * smoothness


def problem(small=True):
    """The loss and arguments whose gradient the gallery checks and benchmarks."""
    n, steps = (8, 10) if small else (32, 100)
    x = np.linspace(-1, 1, n)
    true_source = np.exp(-20 * ((x[:, None] - 0.3) ** 2 + (x[None, :] + 0.2) ** 2))
    u0 = np.zeros((n, n))
    observed = simulate(true_source, u0, steps)
    return misfit, (np.zeros(n * n), u0, observed, steps)


def main(small=True):
    _, (guess, u0, observed, steps) = problem(small)
    result = optimize.minimize(misfit, guess, args=(u0, observed, steps),
                               jac=xform.grad(misfit), method="L-BFGS-B",
                               options={"maxiter": 50 if small else 200})
    return {"start": misfit(guess, u0, observed, steps), "end": result.fun}


if __name__ == "__main__":
    print(main(small=False))
