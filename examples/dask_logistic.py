"""A data-parallel gradient over a dask array: logistic regression on rows that need not fit
in one process.

The rows live in a chunked `dask.array` (here generated lazily by `da.random`; in practice
`da.from_zarr` or `da.from_array`); the per-row loss is mapped over them with
`xform.threaded_map(..., axis=0)`, so each block becomes one dask task running xform's
compiled chunk function, and `xform.grad` of the mean returns the gradient as a numpy array,
summed over blocks by dask's tree reduction. It runs on dask's local scheduler, or on a
`dask.distributed.Client` when one is active (`pip install -e ".[dask]"`).
"""
import dask.array as da
import numpy as np

import xform


def make_data(rows, features, block_rows, seed=0):
    state = da.random.RandomState(seed)
    X = state.standard_normal((rows, features), chunks=(block_rows, features))
    true_w = np.linspace(-1.0, 1.0, features)
    y = da.sign(X @ true_w + 0.5 * state.standard_normal(rows, chunks=block_rows))
    return X, y


def loss(w, X, y):
    per_row = xform.threaded_map(lambda x, t: np.logaddexp(0.0, -t * (x @ w)), X, y, axis=0)
    return np.mean(per_row) + 1e-3 * np.sum(w**2)


def problem(small=True):
    """The loss and arguments whose gradient the gallery checks and benchmarks."""
    rows, features, block = (200, 3, 50) if small else (2_000_000, 32, 250_000)
    X, y = make_data(rows, features, block)
    return loss, (np.zeros(features), X, y)


def main(small=True):
    _, (w, X, y) = problem(small)
    grad = xform.value_and_grad(loss)
    start = float(loss(w, X, y))
    for _ in range(20 if small else 50):
        value, g = grad(w, X, y)
        w = w - 1.0 * g
    return {"loss_start": start, "loss_end": float(loss(w, X, y)), "w": w}


if __name__ == "__main__":
    print(main(small=False))
