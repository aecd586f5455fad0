"""A variational autoencoder on binarised synthetic "digits" (random 4x4 bar patterns).

Encoder and decoder are one-hidden-layer MLPs; the ELBO uses the reparameterisation trick
`z = mu + sigma * eps` with `eps` drawn by a module-level `numpy.random.Generator` inside the
loss, so every gradient call draws fresh noise, exactly as running the loss eagerly would
(xform stages the draw as an effect; it is not frozen into the cached gradient).
"""
import numpy as np

import xform

rng = np.random.default_rng(0)


def mlp(params, prefix, x):
    h = np.tanh(x @ params[prefix + "W1"] + params[prefix + "b1"])
    return h @ params[prefix + "W2"] + params[prefix + "b2"]


def neg_elbo(params, x):
    stats = mlp(params, "enc_", x)
    latent = stats.shape[1] // 2
    mu, log_sigma = stats[:, :latent], stats[:, latent:]
    eps = rng.standard_normal(mu.shape)
    z = mu + np.exp(log_sigma) * eps
    logits = mlp(params, "dec_", z)
    log_likelihood = np.sum(x * logits - np.logaddexp(0.0, logits), axis=1)
    kl = 0.5 * np.sum(mu**2 + np.exp(2 * log_sigma) - 1 - 2 * log_sigma, axis=1)
    return -np.mean(log_likelihood - kl)


def bar_images(n, data_rng):
    images = np.zeros((n, 4, 4))
    for i in range(n):
        images[i, data_rng.integers(0, 4), :] = 1.0
        images[i, :, data_rng.integers(0, 4)] = 1.0
    return images.reshape(n, 16)


def init(data_rng, sizes):
    params = {}
    for prefix, (m, h, n) in sizes.items():
        params |= {prefix + "W1": 0.2 * data_rng.normal(size=(m, h)), prefix + "b1": np.zeros(h),
                   prefix + "W2": 0.2 * data_rng.normal(size=(h, n)), prefix + "b2": np.zeros(n)}
    return params


def problem(small=True):
    """The loss and arguments whose gradient the gallery checks and benchmarks."""
    data_rng = np.random.default_rng(1)
    hidden, latent = (8, 2) if small else (64, 4)
    params = init(data_rng, {"enc_": (16, hidden, 2 * latent), "dec_": (latent, hidden, 16)})
    return neg_elbo, (params, bar_images(8 if small else 256, data_rng))


def main(small=True):
    _, (params, x) = problem(small)
    grad = xform.value_and_grad(neg_elbo)
    values = []
    for _ in range(40 if small else 600):
        value, g = grad(params, x)
        values.append(value)
        params = {k: params[k] - 0.05 * g[k] for k in params}
    return {"neg_elbo_start": np.mean(values[:5]), "neg_elbo_end": np.mean(values[-5:])}


if __name__ == "__main__":
    print(main(small=False))
