"""Logistic regression trained by minibatch gradient descent.

A binary classifier on synthetic data, written as plain numpy: the loss takes the whole
data set and an array of integer batch indices, and selects its minibatch with `X[batch]`.
The batch indices are an integer array, so they are traced: every minibatch of the same size
reuses one staged and compiled gradient (passing a Python int per step instead would stage
once per value). `xform.value_and_grad` gives the loss and its gradient with respect to the
parameters (a dict), and plain numpy updates them.
"""
import numpy as np

import xform


def make_data(rng, n, d):
    """Features, labels in {0, 1}, and the true weights of a noisy linear decision rule."""
    true_w = rng.standard_normal(d)
    X = rng.standard_normal((n, d))
    logits = X @ true_w + 0.5
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logits))).astype(float)
    return X, y, true_w


def loss(params, X, y, batch, l2=1e-3):
    """Mean negative log-likelihood of the minibatch `batch` (integer indices), plus an L2
    penalty. log(1 + exp(z)) is written with logaddexp, as a careful numpy user would."""
    Xb, yb = X[batch], y[batch]
    logits = Xb @ params["w"] + params["b"]
    nll = np.mean(np.logaddexp(0.0, logits) - yb * logits)
    return nll + l2 * np.sum(params["w"] ** 2)


def accuracy(params, X, y):
    return np.mean(((X @ params["w"] + params["b"]) > 0) == (y > 0.5))


def train(X, y, rng, epochs, batch_size, learning_rate):
    d = X.shape[1]
    params = {"w": np.zeros(d), "b": 0.0}
    loss_and_grad = xform.value_and_grad(loss)
    history = []
    for _ in range(epochs):
        order = rng.permutation(len(X))
        # equal-sized batches only: each new batch shape would be staged once more
        for start in range(0, len(X) - batch_size + 1, batch_size):
            batch = order[start:start + batch_size]
            value, grads = loss_and_grad(params, X, y, batch)
            params = {name: params[name] - learning_rate * grads[name] for name in params}
            history.append(float(value))
    return params, history


def main(small=False):
    """Train; return what tests/test_examples.py checks: the objective (`loss`) with a point
    to check its gradient at, and the trained model's accuracy and loss history."""
    rng = np.random.default_rng(0)
    n, d = (200, 3) if small else (20_000, 20)
    X, y, true_w = make_data(rng, n, d)
    params, history = train(X, y, rng, epochs=30 if small else 10, batch_size=20 if small else 128,
                            learning_rate=0.5)
    batch = np.arange(0, n, 7)
    print(f"loss {history[0]:.3f} -> {np.mean(history[-10:]):.3f}, "
          f"train accuracy {accuracy(params, X, y):.3f}")
    return {"objective": loss, "args": (params, X, y, batch), "argnums": 0,
            "accuracy": accuracy(params, X, y), "history": history,
            "params": params, "true_w": true_w}


if __name__ == "__main__":
    main()
