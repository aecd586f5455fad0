"""First gradient calls, xform against autograd (which has no compile step): every row of
bench/suite.py and the grid relaxation of issue 17 (`relax(o, 800)`), each timed on fresh
functions (nothing cached for them), medians over the samples, taken round-robin between the
candidates so that drifts of the machine's load reach them alike. Wall time (perf_counter) and
CPU time (process_time, which other processes' load does not enter) are both reported.

xform runs once per tier (xform.config.tier): "compile" (the first call stages, transforms,
runs the passes, generates and compiles code: what every first call did before tiers) and
"auto" (the first call interprets the transformed graph; the second compiles). The second
call's time (the compile, paid once per signature under "auto") is reported too.

`python -m bench.first_call [--samples N] [--rows a,b] [--markdown PATH]
[--phases | --fresh | --examples]`
(set OMP_NUM_THREADS=1 and friends for one BLAS thread, as bench/suite.py's tables are).
`--fresh`: each first call in a fresh process instead, xform's and autograd's alternately, on
these rows, the gallery's examples and issue 30's programs (bench/fresh_call.py; `--samples`
pairs, `--rows` names any of them). `--examples`: the gallery's examples at their real sizes
after warm-up, xform's and autograd's first calls alternately (CPU time, medians).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import xform
from bench import suite
from bench.timing import fmt, machine, report


def relax(xp, occ, n=800):
    """Issue 17's grid relaxation: rolls and element-wise updates in a Python loop."""
    p, o = xp.ones_like(occ), 1 - occ
    for _ in range(n):
        num = xp.roll(p, 1, 0) * xp.roll(o, 1, 0) + xp.roll(p, -1, 1) * xp.roll(o, -1, 1)
        p = p * o + (1 - o) * num / 2.0
    return xp.sum(p ** 2)


def rows():
    """name -> (row function, arguments, argnums): bench/suite.py's rows, then relax."""
    table = {name: (row, args, nums)
             for name, (row, args, nums, _) in suite._rows(np.random.default_rng(0)).items()}
    table["relax_800"] = (relax, (np.full((8, 8), 0.1),), 0)
    return table


BUDGET = 20.0  # seconds per candidate and row: slower first calls get fewer samples (>= 3)
# Throwaway first calls per candidate before a row is measured, within WARM_UP_BUDGET
# seconds (at least one): CPython 3.11 specializes a function's bytecode only after several
# calls, and a first call runs much code once, so the first few first calls of a process run
# slower, xform's (more code) more than autograd's. Without them the suite's first row
# measured 2.26x where the same row measured later reads 2.09x.
WARM_UP = 10
WARM_UP_BUDGET = 0.5


def _xform_grad(tier):
    def make(row, nums):
        return xform.grad(lambda *a: row(np, *a), nums)
    make.tier = tier
    return make


def _autograd_grad():
    import autograd
    import autograd.numpy as anp

    def make(row, nums):
        return autograd.grad(lambda *a: row(anp, *a), nums)
    make.tier = None
    return make


def _timed(fn, args):
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn(*args)
    return time.perf_counter() - wall, time.process_time() - cpu, value


def measure(name, row, args, nums, candidates, samples, budget=None, at_least=3):
    """{candidate: (first wall, first cpu, second wall, second cpu)}: medians over `samples`
    fresh functions per candidate (fewer past `budget`, default BUDGET, but `at_least`),
    round-robin."""
    budget = BUDGET if budget is None else budget
    times = {c: [] for c in candidates}
    spent = dict.fromkeys(candidates, 0.0)
    failed = {}
    for sample in range(samples):
        for label, make in candidates.items():
            if label in failed or (sample >= at_least and spent[label] > budget):
                continue
            if make.tier is not None:
                xform.config.update("tier", make.tier)
            fn = make(row, nums)
            try:
                first_wall, first_cpu, value = _timed(fn, args)
                second_wall, second_cpu, again = _timed(fn, args)
            except Exception as err:  # a peer that cannot run a row is reported, not fatal
                if make.tier is not None:
                    raise
                failed[label] = f"error: {type(err).__name__}"
                spent[label] = float("inf")
                continue
            if not suite._agree(value, again):
                raise AssertionError(f"{name}: {label}'s first and second calls disagree")
            spent[label] += first_wall + second_wall
            times[label].append((first_wall, first_cpu, second_wall, second_cpu))
    xform.config.update("tier", "auto")
    return {label: failed.get(label) or tuple(statistics.median(s[k] for s in got)
                                              for k in range(4))
            for label, got in times.items()}


def run(samples=7, only=None):
    candidates = {"xform compile": _xform_grad("compile"), "xform auto": _xform_grad("auto"),
                  "autograd": _autograd_grad()}
    results = []
    for name, (row, args, nums) in rows().items():
        if only and name not in only:
            continue
        row(np, *args)  # numpy's own first-use costs (BLAS start-up) are not ours to count
        # nor are once-per-process costs (a first use imports scipy.linalg, ...) or the
        # interpreter's warm-up: throwaway first calls per candidate (WARM_UP)
        measure(name, row, args, nums, candidates, WARM_UP, budget=WARM_UP_BUDGET, at_least=1)
        result = measure(name, row, args, nums, candidates, samples)
        results.append((name, result))
        print(_line(name, result), flush=True)
    return results


def _ratio(a, b):
    return f"{a / b:.2f}x" if type(b) is float else "n/a"


def _time(t, k=0):
    return fmt(t[k]) if type(t) is tuple else t


def _line(name, result):
    ag = result["autograd"]
    cpu = ag[1] if type(ag) is tuple else ag
    return (f"{name:24s} " + "  ".join(
        f"{label} {fmt(t[0])} ({_ratio(t[0], ag[0] if type(ag) is tuple else ag)}, "
        f"cpu {fmt(t[1])}, {_ratio(t[1], cpu)})"
        for label, t in result.items() if label != "autograd")
        + f"  autograd {_time(ag)} (cpu {_time(ag, 1)})")


def markdown(results, samples) -> str:
    threads = os.environ.get("OMP_NUM_THREADS", "unset")
    try:
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    lines = [f"Machine: {machine()}; OMP_NUM_THREADS={threads}; load average at the end "
             f"{load}; medians of up to {samples} fresh functions per candidate, round-robin.",
             "", "| row | autograd first (cpu) | xform compile-first (cpu) | ratio wall / cpu "
             "| xform tiered first (cpu) | ratio wall / cpu | tiered second call (cpu) |",
             "|---|---|---|---|---|---|---|"]
    for name, result in results:
        ag, comp, auto = result["autograd"], result["xform compile"], result["xform auto"]
        ag_wall, ag_cpu = (ag[0], ag[1]) if type(ag) is tuple else (ag, ag)
        lines.append(
            f"| {name} | {_time(ag)} ({_time(ag, 1)}) | {fmt(comp[0])} ({fmt(comp[1])}) | "
            f"{_ratio(comp[0], ag_wall)} / {_ratio(comp[1], ag_cpu)} | {fmt(auto[0])} "
            f"({fmt(auto[1])}) | {_ratio(auto[0], ag_wall)} / {_ratio(auto[1], ag_cpu)} | "
            f"{fmt(auto[2])} ({fmt(auto[3])}) |")
    return "\n".join(lines) + "\n"


# The phases of a first gradient call: (label, module, function) wrapped to time them.
PHASES = (("stage", "xform.api.reverse", "stage_function"),
          ("fuse", "xform.api.reverse", "fuse_if_enabled"),
          ("vjp", "xform.api.reverse", "vjp_graph"),
          ("passes", "xform.api.reverse", "finish_graph"),
          ("codegen", "xform.codegen.emit", "graph_source"),
          ("compile()", "xform.codegen.emit", "_define"),
          ("interpret", "xform.runtime.tiers", "run_concrete"))


def phases(only, samples):
    """{row: {phase: median CPU seconds}} of first calls under tier "compile" then of first
    calls under "auto" (prefixed "auto "), by wrapping the functions of PHASES (nested calls
    of one phase, such as passes on sub-graphs, count once)."""
    import importlib
    spent, depth = {}, {}

    def wrapped(label, function):
        def timed(*args, **kwargs):
            depth[label] = depth.get(label, 0) + 1
            start = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                depth[label] -= 1
                if not depth[label]:
                    spent[label] = spent.get(label, 0.0) + time.process_time() - start
        return timed
    originals = []
    for label, module, name in PHASES:
        module = importlib.import_module(module)
        originals.append((module, name, getattr(module, name)))
        setattr(module, name, wrapped(label, getattr(module, name)))
    table = {}
    try:
        for name, (row, args, nums) in rows().items():
            if only and name not in only:
                continue
            row(np, *args)
            split = table[name] = {}
            for tier in ("compile", "auto"):
                xform.config.update("tier", tier)
                got = []
                for _ in range(samples + 1):   # the first, once-per-process costs, dropped
                    fn = xform.grad(lambda *a: row(np, *a), nums)
                    spent.clear()
                    start = time.process_time()
                    fn(*args)
                    spent["total"] = time.process_time() - start
                    got.append(dict(spent))
                for label in got[-1]:
                    split[("auto " if tier == "auto" else "") + label] = statistics.median(
                        g.get(label, 0.0) for g in got[1:])
            print(name, {k: fmt(v) for k, v in split.items()}, flush=True)
    finally:
        for module, name, original in originals:
            setattr(module, name, original)
        xform.config.update("tier", "auto")
    return table


def examples(samples, only=()):
    """{example: (xform's first call, autograd's)}: CPU medians over `samples` first calls
    of the gallery's examples at their real sizes (each xform call on a fresh function of the
    loss's code, so nothing is cached for it; autograd runs the same source through its own
    numpy), after WARM_UP throwaway calls each, alternating call by call. Each call starts
    after a collection (untimed): a previous call's garbage still alive would hold graphs
    that this call's, equal in structure, would find memoized (compiled regions)."""
    import gc
    import importlib
    import types

    import autograd

    from bench.examples import GALLERY, autograd_twin
    table = {}
    for name in GALLERY:
        if only and name not in only:
            continue
        loss, args = importlib.import_module(f"examples.{name}").problem(small=False)
        try:
            twin_loss, twin_args = autograd_twin(name).problem(small=False)
            autograd.grad(twin_loss)(*twin_args)
        except Exception as error:  # reported: autograd lacks something the example uses
            print(f"{name:16s} autograd: {type(error).__name__}", flush=True)
            continue
        times = {"xform": [], "autograd": []}
        for sample in range(WARM_UP + samples):
            fresh = types.FunctionType(loss.__code__, loss.__globals__, loss.__name__,
                                       loss.__defaults__, loss.__closure__)
            for label, call in (("xform", lambda: xform.grad(fresh)(*args)),
                                ("autograd", lambda: autograd.grad(twin_loss)(*twin_args))):
                gc.collect()
                start = time.process_time()
                call()
                if sample >= WARM_UP:
                    times[label].append(time.process_time() - start)
        mine, theirs = (statistics.median(times[k]) for k in ("xform", "autograd"))
        table[name] = mine, theirs
        print(f"{name:16s} xform {fmt(mine)}  autograd {fmt(theirs)}  "
              f"ratio {_ratio(mine, theirs)}", flush=True)
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--rows", default="")
    parser.add_argument("--markdown", default="")
    parser.add_argument("--phases", action="store_true",
                        help="the CPU time of each phase of a first call instead")
    parser.add_argument("--fresh", action="store_true",
                        help="each first call in a fresh process (bench/fresh_call.py)")
    parser.add_argument("--examples", action="store_true",
                        help="the gallery's examples instead, after warm-up (CPU time)")
    options = parser.parse_args()
    only = set(filter(None, options.rows.split(",")))
    if options.examples:
        examples(options.samples, only)
        return
    if options.fresh:
        from bench import fresh_call
        fresh_call.run(options.samples, names=only, markdown=options.markdown)
        return
    if options.phases:
        phases(only, options.samples)
        return
    results = run(options.samples, only)
    report(markdown(results, options.samples), options.markdown)


if __name__ == "__main__":
    main()
