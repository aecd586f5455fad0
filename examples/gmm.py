"""A Gaussian mixture fitted by gradient ascent on the log likelihood, with `logsumexp`.

Unconstrained parameters (mixture logits, means, log standard deviations per dimension),
the per-point log likelihood via `scipy.special.logsumexp` over components, and plain
gradient ascent with a step size schedule: the "mixture model by autodiff" exercise.
"""
import numpy as np
from scipy.special import logsumexp

import xform


def log_likelihood(params, X):
    log_weights = params["logits"] - logsumexp(params["logits"])
    means, log_std = params["means"], params["log_std"]
    diff = (X[:, None, :] - means[None, :, :]) / np.exp(log_std)[None]
    log_normal = -0.5 * np.sum(diff**2, axis=2) - np.sum(log_std, axis=1) \
        - 0.5 * X.shape[1] * np.log(2 * np.pi)
    return np.mean(logsumexp(log_weights + log_normal, axis=1))


def sample(n, rng):
    centres = np.array([[-2.0, 0.0], [2.0, 1.0], [0.0, -2.5]])
    labels = rng.integers(0, 3, n)
    return centres[labels] + 0.5 * rng.normal(size=(n, 2))


def problem(small=True):
    """The loss and arguments whose gradient the gallery checks and benchmarks."""
    rng = np.random.default_rng(0)
    X = sample(40 if small else 5000, rng)
    params = {"logits": np.zeros(3), "means": rng.normal(size=(3, 2)),
              "log_std": np.zeros((3, 2))}
    return log_likelihood, (params, X)


def main(small=True):
    _, (params, X) = problem(small)
    grad = xform.grad(log_likelihood)
    start = log_likelihood(params, X)
    for step in range(100 if small else 500):
        g = grad(params, X)
        rate = 0.5 / (1 + step / 100)
        params = {k: params[k] + rate * g[k] for k in params}
    return {"start": start, "end": log_likelihood(params, X), "means": params["means"]}


if __name__ == "__main__":
    print(main(small=False))
