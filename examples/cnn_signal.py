"""A small convolutional network on synthetic 12x12 images, convolutions by `scipy.signal`.

One convolution layer (`scipy.signal.correlate` in 'valid' mode per filter and image), a ReLU,
average pooling by reshaping, and a logistic output: the classic from-scratch CNN, written
with loops over images and filters as a course assignment would. The images are bars, either
horizontal or vertical, with noise; the network learns which.
"""
import numpy as np
from scipy import signal

import xform


def make_images(n, rng, size=12):
    labels = rng.integers(0, 2, n)
    images = 0.3 * rng.normal(size=(n, size, size))
    for i, label in enumerate(labels):
        k = rng.integers(2, size - 2)
        if label:
            images[i, :, k] += 1.0
        else:
            images[i, k, :] += 1.0
    return images, labels


def forward(params, images):
    logits = []
    for image in images:
        features = []
        for f in range(params["filters"].shape[0]):
            fmap = signal.correlate(image, params["filters"][f], mode="valid")
            fmap = np.maximum(fmap + params["bias"][f], 0.0)
            pooled = fmap.reshape(5, 2, 5, 2).mean(axis=(1, 3))
            features.append(pooled.ravel())
        logits.append(np.concatenate(features) @ params["w"] + params["c"])
    return np.stack(logits)


def loss(params, images, labels):
    z = forward(params, images)
    return np.mean(np.logaddexp(0.0, z) - labels * z)


def problem(small=True):
    """The loss and arguments whose gradient the gallery checks and benchmarks."""
    rng = np.random.default_rng(0)
    images, labels = make_images(4 if small else 32, rng)
    n_filters = 2 if small else 4
    params = {"filters": 0.3 * rng.normal(size=(n_filters, 3, 3)),
              "bias": np.full(n_filters, 0.1),
              "w": 0.1 * rng.normal(size=n_filters * 25), "c": np.array(0.0)}
    return loss, (params, images, labels)


def main(small=True):
    _, (params, images, labels) = problem(small)
    grad = xform.value_and_grad(loss)
    history = []
    for _ in range(10 if small else 150):
        value, g = grad(params, images, labels)
        history.append(value)
        params = {k: params[k] - 0.5 * g[k] for k in params}
    return {"loss_start": history[0], "loss_end": loss(params, images, labels)}


if __name__ == "__main__":
    print(main(small=False))
