"""The XLA backend's placement on the suite's rows, per call: xform's numpy backend, the XLA
backend and JAX's jit, round-robin in one process, with `xform.config.xla_placement` set for
the whole run ("auto": the cost model places the work; "always": XLA runs all it can), since
changing it clears the cache of compiled code (bench/XLA.md).
`python -m bench.xla_placement [--placement auto|always] [--samples N] [--rows a,b]`"""
import argparse

import numpy as np

import xform
from bench import suite
from bench.timing import compare, fmt

WARM_CALLS = 3      # the numpy backend's first call is interpreted; the second compiles


def run(placement, samples, only):
    xform.config.update("xla_placement", placement)
    make_jitted = suite._systems()["jax jit"][1]
    lines = [f"| row | xform numpy | xform xla ({placement}) | jax jit | xla / jax | "
             "xla / numpy |", "|---|---|---|---|---|---|"]
    for name, (row, args, nums, _) in suite._rows(np.random.default_rng(0)).items():
        if only and name not in only:
            continue
        functions = {backend: xform.grad(lambda *a, row=row: row(np, *a), nums,
                                         backend=backend) for backend in ("numpy", "xla")}
        functions["jax"] = make_jitted(row, nums)
        for fn in functions.values():
            for _ in range(WARM_CALLS):
                fn(*args)
        times = compare({label: (lambda f=fn: f(*args)) for label, fn in functions.items()},
                        samples=samples)
        lines.append(f"| {name} | {fmt(times['numpy'])} | {fmt(times['xla'])} | "
                     f"{fmt(times['jax'])} | {times['xla'] / times['jax']:.2f} | "
                     f"{times['xla'] / times['numpy']:.2f} |")
        print(lines[-1], flush=True)
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--placement", default="auto", choices=("auto", "always"))
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--rows", default="")
    options = parser.parse_args()
    print(run(options.placement, options.samples,
              [r for r in options.rows.split(",") if r]))


if __name__ == "__main__":
    main()
