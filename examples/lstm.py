"""An LSTM that learns to predict the next value of noisy sine waves.

The cell is written out gate by gate, unrolled by a Python `for` loop over time steps as in
Karpathy's min-char-rnn, and trained by Adam on the mean squared one-step-ahead error. The
gradient is back-propagation through time, from `xform.grad` of the unrolled loss.
"""
import numpy as np

import xform


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_step(params, h, c, x):
    z = np.concatenate([h, x], axis=1) @ params["W"] + params["b"]
    i, f, o, g = np.split(z, 4, axis=1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    h = sigmoid(o) * np.tanh(c)
    return h, c


def loss(params, series):
    batch, steps = series.shape
    hidden = params["V"].shape[0]
    h, c = np.zeros((batch, hidden)), np.zeros((batch, hidden))
    error = 0.0
    for t in range(steps - 1):
        h, c = lstm_step(params, h, c, series[:, t:t + 1])
        prediction = h @ params["V"] + params["a"]
        error = error + np.mean((prediction[:, 0] - series[:, t + 1]) ** 2)
    return error / (steps - 1)


def sine_waves(batch, steps, rng):
    phase = rng.uniform(0, 2 * np.pi, (batch, 1))
    t = np.arange(steps) * 0.3
    return np.sin(t + phase) + 0.05 * rng.normal(size=(batch, steps))


def problem(small=True):
    """The loss and arguments whose gradient the gallery checks and benchmarks."""
    rng = np.random.default_rng(0)
    hidden = 4 if small else 32
    params = {"W": 0.3 * rng.normal(size=(hidden + 1, 4 * hidden)),
              "b": np.zeros(4 * hidden), "V": 0.3 * rng.normal(size=(hidden, 1)),
              "a": np.zeros(1)}
    return loss, (params, sine_waves(3 if small else 16, 8 if small else 50, rng))


def adam(grad, params, data, steps, lr=0.02, b1=0.9, b2=0.999):
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    for t in range(1, steps + 1):
        g = grad(params, data)
        for k in params:
            m[k] = b1 * m[k] + (1 - b1) * g[k]
            v[k] = b2 * v[k] + (1 - b2) * g[k] ** 2
            step = lr * (m[k] / (1 - b1**t)) / (np.sqrt(v[k] / (1 - b2**t)) + 1e-8)
            params = {**params, k: params[k] - step}
    return params


def main(small=True):
    _, (params, series) = problem(small)
    start = loss(params, series)
    params = adam(xform.grad(loss), params, series, 30 if small else 300)
    return {"loss_start": start, "loss_end": loss(params, series)}


if __name__ == "__main__":
    print(main(small=False))
