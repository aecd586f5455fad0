"""Poisson regression fitted by Newton's method with exact Hessians.

Counts (say, events per region) modelled with a log link, `y ~ Poisson(exp(X @ w))`, and a
small ridge penalty. The negative log-likelihood is written once in plain numpy and SciPy
(`scipy.special.gammaln` for the log-factorial); `xform.grad` and `xform.hessian` give its
gradient and Hessian, and each Newton step solves `H step = g` with `np.linalg.solve`. The
objective is convex, so Newton's method converges quadratically: the printed gradient norm
roughly squares from one iteration to the next.
"""
import numpy as np
import scipy.special

import xform


def make_data(rng, n, d):
    """A design with an intercept column, counts drawn from the model, the true weights."""
    X = np.column_stack([np.ones(n), rng.standard_normal((n, d - 1)) * 0.5])
    true_w = np.concatenate([[1.0], rng.standard_normal(d - 1) * 0.5])
    y = rng.poisson(np.exp(X @ true_w)).astype(float)
    return X, y, true_w


def negative_log_likelihood(w, X, y, l2=1e-2):
    """Mean Poisson negative log-likelihood with log link, plus `l2 * |w|^2`."""
    eta = X @ w
    log_pmf = y * eta - np.exp(eta) - scipy.special.gammaln(y + 1.0)
    return -np.mean(log_pmf) + l2 * np.sum(w * w)


def newton(objective, w, args, tol=1e-10, max_iter=50):
    """Minimize `objective(w, *args)` by Newton's method; the gradient norms per iteration."""
    gradient, hessian = xform.grad(objective), xform.hessian(objective)
    norms = []
    for _ in range(max_iter):
        g = gradient(w, *args)
        norms.append(float(np.linalg.norm(g)))
        if norms[-1] < tol:
            break
        w = w - np.linalg.solve(hessian(w, *args), g)
    return w, norms


def main(small=False):
    """Fit; return what tests/test_examples.py checks: the objective with a point to check
    its gradient at, the fitted weights and the gradient norms of the iterations."""
    rng = np.random.default_rng(1)
    n, d = (100, 3) if small else (20_000, 20)
    X, y, true_w = make_data(rng, n, d)
    # the usual GLM start: the intercept at the log of the mean count, the slopes at zero
    start = np.concatenate([[np.log(np.mean(y))], np.zeros(d - 1)])
    w, norms = newton(negative_log_likelihood, start, (X, y))
    for i, norm in enumerate(norms):
        print(f"iteration {i}: |gradient| = {norm:.3e}")
    print("fitted", np.round(w[:5], 3), "true", np.round(true_w[:5], 3))
    return {"objective": negative_log_likelihood, "args": (0.3 * true_w, X, y), "argnums": 0,
            "w": w, "norms": norms, "true_w": true_w}


if __name__ == "__main__":
    main()
