"""`python -m bench.corpus`: see bench/corpus/__init__.py."""
import copy
import gc
import importlib
import statistics
import sys
import time
import types
import warnings

from bench.corpus import harness

PROGRAM_MODULES = [f"bench.corpus.programs_{letter}" for letter in "abcdefghij"]


def first_calls(samples):
    """Each program's first gradient call against autograd's (CPU medians, alternating)."""
    import autograd
    import xform

    def fresh(f):
        return types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__,
                                  f.__closure__)

    def timed(make, args):
        gc.collect()
        start = time.process_time()
        make()(*args)
        return time.process_time() - start

    warnings.simplefilter("ignore")
    ratios = []
    for p in harness.PROGRAMS:
        f = p["f"]
        if not p["grad"] or p["jac"] or p["fresh"] is not None:
            continue
        args = harness._args(p, p["points"][0])
        try:    # (warm-up: the first first-call of a process runs much code cold)
            xform.grad(fresh(f))(*copy.deepcopy(args))
            autograd.grad(harness.ag_version(f))(*copy.deepcopy(args))
        except Exception:
            continue
        mine, theirs = [], []
        for _ in range(samples):
            mine.append(timed(lambda: xform.grad(fresh(f)), copy.deepcopy(args)))
            theirs.append(timed(lambda: autograd.grad(harness.ag_version(f)),
                                copy.deepcopy(args)))
        x, a = statistics.median(mine), statistics.median(theirs)
        ratios.append(x / a)
        print(f"{f.__name__:28s} xform {x * 1e3:8.3f} ms  autograd {a * 1e3:8.3f} ms  "
              f"ratio {x / a:5.2f}", flush=True)
    print(f"{len(ratios)} programs autograd runs: median ratio {statistics.median(ratios):.2f}, "
          f"geometric mean {statistics.geometric_mean(ratios):.2f}, "
          f"at or under autograd: {sum(r <= 1 for r in ratios)}")


def main(argv):
    for name in PROGRAM_MODULES:
        importlib.import_module(name)
    if "--first-calls" in argv:
        samples = next((int(a.split("=", 1)[1]) for a in argv if a.startswith("--samples=")), 5)
        first_calls(samples)
    else:
        harness.main(None)


if __name__ == "__main__":
    main(sys.argv[1:])
