"""Gaussian-process regression with hyperparameters fitted by maximising the marginal likelihood.

A squared-exponential kernel with log length-scale, log signal and log noise parameters; the
log marginal likelihood through `scipy.linalg.cholesky` and `cho_solve`, the prior on the
hyperparameters from `scipy.stats`; `scipy.optimize.minimize` with `jac=True` and
`xform.value_and_grad` as the objective, as in Rasmussen & Williams' algorithm 2.1.
"""
import numpy as np
from scipy import linalg, optimize, stats

import xform


def kernel(log_params, A, B):
    length, signal = np.exp(log_params[0]), np.exp(log_params[1])
    sq = np.sum(A**2, 1)[:, None] + np.sum(B**2, 1)[None, :] - 2 * A @ B.T
    return signal**2 * np.exp(-0.5 * sq / length**2)


def neg_log_marginal(log_params, X, y):
    noise = np.exp(log_params[2])
    K = kernel(log_params, X, X) + (noise**2 + 1e-6) * np.eye(len(y))
    L = linalg.cholesky(K, lower=True)
    alpha = linalg.cho_solve((L, True), y)
    log_marginal = -0.5 * y @ alpha - np.sum(np.log(np.diag(L))) - 0.5 * len(y) * np.log(2 * np.pi)
    log_prior = np.sum(stats.norm.logpdf(log_params, 0.0, 2.0))
    return -(log_marginal + log_prior)


def predict(log_params, X, y, X_new):
    noise = np.exp(log_params[2])
    K = kernel(log_params, X, X) + (noise**2 + 1e-6) * np.eye(len(y))
    return kernel(log_params, X_new, X) @ linalg.solve(K, y, assume_a="pos")


def problem(small=True):
    """The loss and arguments whose gradient the gallery checks and benchmarks."""
    rng = np.random.default_rng(0)
    n = 12 if small else 400
    X = rng.uniform(-3, 3, (n, 1))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=n)
    return neg_log_marginal, (np.array([0.3, 0.1, -1.0]), X, y)


def main(small=True):
    _, (log_params, X, y) = problem(small)
    result = optimize.minimize(xform.value_and_grad(neg_log_marginal), log_params, args=(X, y),
                               jac=True, method="L-BFGS-B")
    X_test = np.linspace(-2.5, 2.5, 7)[:, None]
    error = predict(result.x, X, y, X_test) - np.sin(2 * X_test[:, 0])
    return {"start": neg_log_marginal(log_params, X, y), "end": result.fun,
            "converged": result.success, "rms_error": np.sqrt(np.mean(error**2))}


if __name__ == "__main__":
    print(main(small=False))
