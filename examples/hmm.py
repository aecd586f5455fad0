"""A hidden Markov model with Gaussian emissions, fitted by gradient ascent on the forward
algorithm's log likelihood.

The forward recursion runs in log space with `scipy.special.logsumexp` in a Python loop
over time; transition and initial probabilities are softmaxes of unconstrained logits, so
plain gradient steps stay valid (the direct-marginal-likelihood alternative to Baum-Welch).
"""
import numpy as np
from scipy.special import logsumexp, log_softmax

import xform


def log_likelihood(params, observations):
    log_start = log_softmax(params["start"])
    log_trans = log_softmax(params["trans"], axis=1)
    scale = np.exp(params["log_scale"])
    log_emit = (-0.5 * ((observations[:, None] - params["means"]) / scale) ** 2
                - np.log(scale) - 0.5 * np.log(2 * np.pi))
    alpha = log_start + log_emit[0]
    for t in range(1, len(observations)):
        alpha = logsumexp(alpha[:, None] + log_trans, axis=0) + log_emit[t]
    return logsumexp(alpha) / len(observations)


def simulate(steps, rng):
    trans = np.array([[0.9, 0.1], [0.2, 0.8]])
    states = [0]
    for _ in range(steps - 1):
        states.append(rng.choice(2, p=trans[states[-1]]))
    return np.array([-1.0, 1.5])[states] + 0.5 * rng.normal(size=steps)


def problem(small=True):
    """The loss and arguments whose gradient the gallery checks and benchmarks."""
    rng = np.random.default_rng(0)
    params = {"start": np.zeros(2), "trans": np.zeros((2, 2)),
              "means": np.array([-0.5, 0.5]), "log_scale": np.zeros(2)}
    return log_likelihood, (params, simulate(15 if small else 400, rng))


def main(small=True):
    _, (params, observations) = problem(small)
    grad = xform.grad(log_likelihood)
    start = log_likelihood(params, observations)
    for _ in range(60 if small else 300):
        g = grad(params, observations)
        params = {k: params[k] + 0.5 * g[k] for k in params}
    return {"start": start, "end": log_likelihood(params, observations),
            "means": np.sort(params["means"])}


if __name__ == "__main__":
    print(main(small=False))
