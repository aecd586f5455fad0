"""First gradient calls in fresh processes (issue 30, part 5): for each program, a new Python
process imports the library (and the program), runs the program once with plain numpy (numpy's
own first-use costs are not the library's), then times the library's first gradient call, and
nothing else. Processes for xform and autograd alternate, pair by pair; the table gives the
medians over the pairs and their ratios.

Programs: every row of bench/suite.py, the gallery's examples at their real sizes
(bench/examples.py; autograd runs the same source through its own numpy), and issue 30's three
programs (bench/values.py: branchy, newton_sqrt, march; autograd's march is the same program
written with a list and np.stack, since it cannot write into an array). Children run with one
BLAS thread (OMP_NUM_THREADS and friends: 1 unless set).

    python -m bench.fresh_call [--pairs 5] [--sets suite,examples,values] [--names a,b]
                               [--before PATH] [--markdown PATH] [--profile]

`--before PATH` adds a third candidate: xform imported from PATH (a checkout of other code),
run in the same rounds, so a before/after comparison is measured in one run.

`--profile` (with `--names`) says where xform's once-per-process costs are instead: in one
fresh process per program, the modules its first call imports, and the functions whose time
(cProfile's, which inflates Python-heavy code 3-4x) in that call exceeds theirs in a second
first call of the same program after `clear_cache()` (a new gradient, staged again), and the
garbage collections the first call ran (their time is in no function's own). This module
imports no xform itself: an autograd process never imports it (the program modules' `import
xform` finds a placeholder there).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
import types

ROOT = pathlib.Path(__file__).resolve().parent.parent
SETS = ("suite", "examples", "values")
VALUES_PROGRAMS = ("branchy", "newton_sqrt", "march")


def _program(lib, kind, name):
    """(gradient of the program made by `lib`, its arguments, the plain-numpy primal) with
    every import and argument built."""
    import numpy as np
    if lib == "autograd":
        import autograd
        import autograd.numpy as anp
        make_grad = autograd.grad
    else:
        path = os.environ.get("FRESH_CALL_XFORM", "")
        if path:    # that checkout's xform, the programs from this one
            sys.path.insert(0, path)
        import xform
        if path:
            sys.path.remove(path)
        make_grad = xform.grad
    if kind == "suite":
        from bench import suite
        row, args, nums, _ = suite._rows(np.random.default_rng(0))[name]
        xp = anp if lib == "autograd" else np
        return make_grad(lambda *a: row(xp, *a), nums), args, lambda: row(np, *args)
    if kind == "values":
        from bench import values
        fn, arg = {"branchy": (values.branchy, 1.5), "newton_sqrt": (values.newton_sqrt, 2.0),
                   "march": (values.march, np.linspace(0.2, 1.0, 8))}[name]
        differentiated = values.march_stacked if lib == "autograd" and name == "march" else fn
        return make_grad(differentiated), (arg,), lambda: fn(arg)
    import importlib
    example = importlib.import_module(f"examples.{name}")
    loss, args = example.problem(small=False)
    if lib == "autograd":
        from bench.examples import autograd_twin
        twin_loss, twin_args = autograd_twin(name).problem(small=False)
        return make_grad(twin_loss), twin_args, lambda: loss(*args)
    return make_grad(loss), args, lambda: loss(*args)


def child(lib, kind, name):
    """Run in the fresh process: print the first gradient call's wall and CPU seconds."""
    if lib == "autograd" and "xform" not in sys.modules:
        sys.modules["xform"] = types.ModuleType("xform")   # the programs' modules import it
    try:
        grad, args, primal = _program(lib, kind, name)
        primal()
    except Exception as err:    # autograd's twin of an example may not build: reported
        if lib != "autograd":
            raise
        print(json.dumps({"error": f"{type(err).__name__}"}))
        return
    wall, cpu = time.perf_counter(), time.thread_time()
    try:
        grad(*args)
    except Exception as err:    # a peer that cannot run a program is reported, not fatal
        print(json.dumps({"error": f"{type(err).__name__}"}))
        return
    print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.thread_time() - cpu}))


def profile_child(kind, name, rows=25):
    """Run in the fresh process: print what the first gradient call of the program imports,
    and the functions it spends more time in than a second first call does."""
    import cProfile
    import pstats

    import xform

    def profiled_first_call(fresh_process):
        grad, args, primal = _program("xform", kind, name)
        if fresh_process:
            primal()
        before = set(sys.modules)
        profile = cProfile.Profile(time.thread_time)
        with _collections() as collections:
            profile.runcall(grad, *args)
        return pstats.Stats(profile).stats, sorted(set(sys.modules) - before), collections
    first, imported, collections = profiled_first_call(True)
    print(f"{kind} {name}: modules imported by the first call:", ", ".join(imported) or "none")
    print("its garbage collections (generation: time):",
          ", ".join(f"{generation}: {_fmt(seconds)}" for generation, seconds in collections)
          or "none")
    xform.clear_cache()
    second, _, _ = profiled_first_call(False)

    def seconds(stats, column):
        return sum(entry[column] for entry in stats.values())
    print(f"first call {_fmt(seconds(first, 2))}, a second first call {_fmt(seconds(second, 2))}"
          " (profiled); the functions the difference is spent in:")
    print(f"{'own time':>10} {'with callees':>13} {'calls':>13}  function")
    none = (0, 0, 0.0, 0.0)
    excess = sorted(first, key=lambda f: second.get(f, none)[2] - first[f][2])
    for function in excess[:rows]:
        (_, calls, own, total), (_, calls_then, own_then, total_then) = (
            first[function][:4], second.get(function, none)[:4])
        path = function[0].replace(f"{ROOT}/", "").replace(f"{os.path.dirname(os.__file__)}/",
                                                             "").rpartition("site-packages/")[2]
        place = f"{path}:{function[1]}({function[2]})" if function[1] else function[2]
        print(f"{_fmt(own - own_then):>10} {_fmt(total - total_then):>13} "
              f"{f'{calls} / {calls_then}':>13}  {place}")


class _collections:
    """The garbage collections inside the block, as (generation, seconds): a process's first
    call often pays for one over the objects its imports left (a generation 1 collection
    ~1 ms after SciPy's), which no function's own time shows."""

    def __enter__(self):
        import gc
        self.found, self._started = [], None

        def note(phase, info):
            if phase == "start":
                self._started = time.perf_counter()
            elif self._started is not None:
                self.found.append((info["generation"], time.perf_counter() - self._started))
        self._note = note
        gc.callbacks.append(note)
        return self.found

    def __exit__(self, *exc_info):
        import gc
        gc.callbacks.remove(self._note)


# One BLAS thread in every child unless the caller sets its own: on a loaded machine
# OpenBLAS's idle threads spin, and a child's first call then read 0.15 s where the same call
# reads 3 ms (autograd's gp_lml_chol, one run in five).
BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _run_child(lib, kind, name, path, options=()):
    # Bytecode cached, as a user's imports are: a module a first call imports (xform.scipy's,
    # when the staged code calls SciPy) is then not compiled from source on every run.
    env = {key: value for key, value in os.environ.items()
           if key != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(ROOT), FRESH_CALL_XFORM=path)
    for variable in BLAS_THREADS:
        env.setdefault(variable, "1")
    done = subprocess.run([sys.executable, "-m", "bench.fresh_call", "--child", lib, kind, name,
                           *options], capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"{lib} {kind} {name}: {done.stderr[-2000:]}")
    if options:
        return done.stdout
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(kind, name, candidates, pairs):
    """{candidate: (median wall, median cpu) or an error}, candidates alternating per pair."""
    got = {label: [] for label in candidates}
    errors = {}
    for _ in range(pairs):
        for label, (lib, path) in candidates.items():
            if label in errors:
                continue
            result = _run_child(lib, kind, name, path)
            if "error" in result:
                errors[label] = result["error"]
            else:
                got[label].append((result["wall"], result["cpu"]))
    return {label: errors.get(label) or (statistics.median(w for w, _ in times),
                                         statistics.median(c for _, c in times))
            for label, times in got.items()}


def _fmt(seconds):
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def _ratio(a, b):
    return f"{a / b:.2f}x" if type(a) is float and type(b) is float else "n/a"


def run(pairs=5, sets=SETS, names=(), before="", markdown=""):
    """Measure the programs of `sets` (those in `names`, when given) and print the table."""
    candidates = {"xform": ("xform", ""), "autograd": ("autograd", "")}
    if before:
        candidates = {"xform before": ("xform", before), **candidates}
    head = ("| program | " + " | ".join(f"{label} wall (cpu)" for label in candidates)
            + " | xform / autograd wall (cpu)"
            + (" | before / autograd wall (cpu)" if before else "") + " |")
    lines = [f"Fresh processes, first gradient call; medians of {pairs} alternating runs per "
             f"candidate; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1')}",
             "", head, "|" + "---|" * (head.count("|") - 1)]
    print("\n".join(lines), flush=True)
    for tree in filter(None, (str(ROOT), before)):     # the bytecode caches, written once
        subprocess.run([sys.executable, "-m", "compileall", "-q", "xform", "bench", "examples"],
                       cwd=tree, check=False, capture_output=True)
    for kind in sets:
        for name in program_names(kind):
            if names and name not in names:
                continue
            result = measure(kind, name, candidates, pairs)
            ag = result["autograd"]
            cells = [f"{_fmt(r[0])} ({_fmt(r[1])})" if type(r) is tuple else r
                     for r in result.values()]
            ratios = [result["xform"]] + ([result["xform before"]] if before else [])
            line = (f"| {name} | " + " | ".join(cells) + " | " + " | ".join(
                f"{_ratio(r[0], ag[0])} ({_ratio(r[1], ag[1])})"
                if type(r) is tuple and type(ag) is tuple else "n/a" for r in ratios) + " |")
            lines.append(line)
            print(line, flush=True)
    if markdown:
        pathlib.Path(markdown).write_text("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=3, metavar=("LIB", "SET", "NAME"))
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--names", default="")
    parser.add_argument("--before", default="", help="a checkout of xform to compare with")
    parser.add_argument("--markdown", default="")
    parser.add_argument("--profile", action="store_true",
                        help="where the first calls' once-per-process time goes")
    options = parser.parse_args()
    if options.child:
        if options.profile:
            profile_child(*options.child[1:])
        else:
            child(*options.child)
        return
    if options.profile:
        names = set(filter(None, options.names.split(",")))
        for kind in options.sets.split(","):
            for name in sorted(names.intersection(program_names(kind))):
                print(_run_child("xform", kind, name, "", ("--profile",)), flush=True)
        return
    run(options.pairs, options.sets.split(","), set(filter(None, options.names.split(","))),
        options.before, options.markdown)


def program_names(kind):
    if kind == "values":
        return VALUES_PROGRAMS
    if kind == "examples":
        from bench.examples import GALLERY
        return GALLERY
    from bench.suite import _rows
    import numpy as np
    return tuple(_rows(np.random.default_rng(0)))


if __name__ == "__main__":
    main()
