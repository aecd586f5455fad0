"""Black-box variational inference for Bayesian logistic regression.

A mean-field Gaussian posterior over the weights, fitted by stochastic gradient ascent on a
Monte-Carlo ELBO: `S` reparameterised samples per step from `numpy.random.RandomState`, the
log prior and likelihood from `scipy.stats.norm` and a hand-written log-sigmoid. As in
autograd's `black_box_svi` example, but without changing `import numpy as np`.
"""
import numpy as np
from scipy import stats

import xform

rs = np.random.RandomState(0)


def log_joint(w, X, y):
    log_prior = np.sum(stats.norm.logpdf(w, 0.0, 1.0), axis=1)
    z = X @ w.T
    log_lik = np.sum(y[:, None] * z - np.logaddexp(0.0, z), axis=0)
    return log_prior + log_lik


def neg_elbo(variational, X, y, samples=16):
    mean, log_std = variational[0], variational[1]
    eps = rs.randn(samples, mean.shape[0])
    w = mean + np.exp(log_std) * eps
    entropy = np.sum(log_std)
    return -(np.mean(log_joint(w, X, y)) + entropy)


def problem(small=True):
    """The loss and arguments whose gradient the gallery checks and benchmarks."""
    data = np.random.default_rng(2)
    n, d = (30, 3) if small else (2000, 20)
    X = data.normal(size=(n, d))
    y = (X @ data.normal(size=d) + 0.3 * data.normal(size=n) > 0).astype(float)
    return neg_elbo, (np.zeros((2, d)), X, y)


def main(small=True):
    _, (variational, X, y) = problem(small)
    grad = xform.value_and_grad(neg_elbo)
    values = []
    for _ in range(60 if small else 800):
        value, g = grad(variational, X, y)
        values.append(value)
        variational = variational - 0.02 * g
    return {"neg_elbo_start": np.mean(values[:5]), "neg_elbo_end": np.mean(values[-5:]),
            "posterior_mean": variational[0]}


if __name__ == "__main__":
    print(main(small=False))
