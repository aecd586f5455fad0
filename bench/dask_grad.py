"""Gradients of a logistic-regression and a small-MLP loss written with
`xform.threaded_map(..., axis=0)` over dask arrays, on a local dask.distributed cluster.

large: float64 rows generated lazily (da.random, fixed seed, chunked by rows), bigger than
each worker's memory_limit; time per gradient (median) and each worker's peak RSS.
fits: a dataset that fits in memory: the 2-worker cluster (data persisted on the workers) vs
the single-process numpy path (the vectorized loss) vs threaded_map with 2 threads; medians.

`python -m bench.dask_grad [--part large|fits|all] [--rows N] [--features D] ...`
Results and the conditions they were taken under: bench/DASK.md.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster

import xform
from bench.timing import compare, fmt, machine

HIDDEN = 16
SEED = 0


def logistic_loss(X, y, num_threads=None):
    def loss(w):
        per_row = xform.threaded_map(lambda x, t: np.logaddexp(0.0, -t * (x @ w)), X, y,
                                     axis=0, num_threads=num_threads)
        return np.mean(per_row)
    return loss


def mlp_loss(X, y, num_threads=None):
    def loss(params):
        W1, w2 = params
        per_row = xform.threaded_map(
            lambda x, t: np.logaddexp(0.0, -t * (np.tanh(x @ W1) @ w2)), X, y, axis=0,
            num_threads=num_threads)
        return np.mean(per_row)
    return loss


def vectorized_logistic(X, y):
    return lambda w: np.mean(np.logaddexp(0.0, -y * (X @ w)))


def vectorized_mlp(X, y):
    return lambda params: np.mean(np.logaddexp(0.0, -y * (np.tanh(X @ params[0]) @ params[1])))


def lazy_data(rows, features, chunk_rows):
    rng = da.random.default_rng(SEED)
    X = rng.standard_normal((rows, features), chunks=(chunk_rows, features))
    y = np.sign(da.random.default_rng(SEED + 1).standard_normal(rows, chunks=chunk_rows))
    return X, y


def parameters(features):
    rng = np.random.default_rng(SEED)
    w = rng.normal(size=features) * 0.1
    return w, (rng.normal(size=(features, HIDDEN)) * 0.1, rng.normal(size=HIDDEN) * 0.1)


def _peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB


def _leaves(gradient):
    return list(gradient) if isinstance(gradient, tuple) else [gradient]


def _timed(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def large(args):
    nbytes = args.rows * args.features * 8
    print(f"## large: {args.rows:,} x {args.features} float64 = {nbytes / 2**30:.2f} GiB, "
          f"row blocks of {args.chunk_rows:,} ({args.chunk_rows * args.features * 8 / 2**20:.0f}"
          f" MiB), 2 workers x 1 thread, memory_limit {args.memory_limit} each")
    print(f"load before: {os.getloadavg()}")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, memory_limit=args.memory_limit) as cluster, \
            Client(cluster):
        X, y = lazy_data(args.rows, args.features, args.chunk_rows)
        w, mlp_params = parameters(args.features)
        for name, loss, params in (("logistic", logistic_loss(X, y), w),
                                   ("mlp", mlp_loss(X, y), mlp_params)):
            grad = xform.grad(loss)
            median, times = _timed(lambda: grad(params), args.repeats)
            print(f"{name}: time per gradient median {fmt(median)} "
                  f"(samples {', '.join(fmt(t) for t in times)})")
        peaks = Client.current().run(_peak_rss_mb)
        print("peak RSS per worker: " + ", ".join(f"{p:.0f} MiB" for p in peaks.values()))
    print(f"load after: {os.getloadavg()}")


def fits(args):
    rows = args.fit_rows
    print(f"## fits: {rows:,} x {args.features} float64 = "
          f"{rows * args.features * 8 / 2**20:.0f} MiB, row blocks of {args.fit_chunk_rows:,}")
    print(f"load before: {os.getloadavg()}")
    rng = np.random.default_rng(SEED)
    X_np = rng.standard_normal((rows, args.features))
    y_np = np.sign(rng.standard_normal(rows))
    w, mlp_params = parameters(args.features)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        X = client.persist(da.from_array(X_np, chunks=(args.fit_chunk_rows, args.features)))
        y = client.persist(da.from_array(y_np, chunks=args.fit_chunk_rows))
        for name, make, reference, params in (
                ("logistic", logistic_loss, vectorized_logistic, w),
                ("mlp", mlp_loss, vectorized_mlp, mlp_params)):
            table = {"numpy path (vectorized, 1 process)": xform.grad(reference(X_np, y_np)),
                     "threaded_map 2 threads": xform.grad(make(X_np, y_np, num_threads=2)),
                     "dask cluster 2 workers": xform.grad(make(X, y))}
            values = [_leaves(fn(params)) for fn in table.values()]
            for value in values[1:]:
                for got, expected in zip(value, values[0]):
                    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
            times = compare({k: (lambda fn=fn: fn(params)) for k, fn in table.items()},
                            samples=args.samples, target=0.2)
            base = times["numpy path (vectorized, 1 process)"]
            for key, seconds in times.items():
                print(f"{name}: {key}: {fmt(seconds)} (x{base / seconds:.2f} of numpy's speed)")
    print(f"load after: {os.getloadavg()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--part", choices=("large", "fits", "all"), default="all")
    parser.add_argument("--rows", type=int, default=8_000_000)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--chunk-rows", type=int, default=250_000)
    parser.add_argument("--memory-limit", default="1.5GiB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fit-rows", type=int, default=400_000)
    parser.add_argument("--fit-chunk-rows", type=int, default=50_000)
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    print(machine())
    if args.part in ("fits", "all"):
        fits(args)
    if args.part in ("large", "all"):
        large(args)


if __name__ == "__main__":
    main()
