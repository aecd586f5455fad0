"""A two-layer MLP classifier trained by minibatch SGD with momentum.

Plain numpy as a tutorial would write it: parameters in a dict, minibatches picked with
integer index arrays (`X[idx]`), a softmax cross-entropy written out by hand, and the gradient
from `xform.grad` of the whole loss. The dataset is two interleaved spirals.
"""
import numpy as np

import xform


def spirals(n_per_class, classes, rng):
    X, y = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, n_per_class)
        t = np.linspace(c * 4.0, (c + 1) * 4.0, n_per_class) + rng.normal(0, 0.2, n_per_class)
        X.append(np.column_stack([r * np.sin(t), r * np.cos(t)]))
        y.append(np.full(n_per_class, c))
    return np.concatenate(X), np.concatenate(y)


def init_params(sizes, rng):
    return {f"W{i}": rng.normal(0, 1 / np.sqrt(m), (m, n)) for i, (m, n) in enumerate(
        zip(sizes[:-1], sizes[1:]))} | {f"b{i}": np.zeros(n) for i, n in enumerate(sizes[1:])}


def loss(params, X, y):
    h = np.tanh(X @ params["W0"] + params["b0"])
    logits = h @ params["W1"] + params["b1"]
    logits = logits - logits.max(axis=1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return -np.mean(log_p[np.arange(len(y)), y])


def problem(small=True):
    """The loss and arguments whose gradient the gallery checks and benchmarks."""
    rng = np.random.default_rng(0)
    X, y = spirals(20 if small else 500, 3, rng)
    params = init_params([2, 16 if small else 128, 3], rng)
    return loss, (params, X, y)


def main(small=True):
    rng = np.random.default_rng(1)
    _, (params, X, y) = problem(small)
    grad = xform.grad(loss)
    velocity = {k: np.zeros_like(v) for k, v in params.items()}
    batch, steps = (16, 60) if small else (64, 2000)
    start = loss(params, X, y)
    for _ in range(steps):
        idx = rng.integers(0, len(y), batch)
        g = grad(params, X[idx], y[idx])
        for k in params:
            velocity[k] = 0.9 * velocity[k] - 0.2 * g[k]
            params[k] = params[k] + velocity[k]
    return {"loss_start": start, "loss_end": loss(params, X, y)}


if __name__ == "__main__":
    print(main(small=False))
