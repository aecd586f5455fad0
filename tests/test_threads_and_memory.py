"""Threads and long sessions: cached gradients called from many threads while other threads
redefine what they read and clear the cache; thousands of distinct closures staged in a loop
with the cache, the memory and the tracked objects bounded, and dead functions released.

Bounded by sizes, never by timings: a deadlock fails the join timeout instead of hanging.
`XFORM_HYPOTHESIS=long` runs the bigger variants.
"""
import gc
import os
import resource
import threading
import weakref

import numpy as np
import pytest

import xform

LONG = os.environ.get("XFORM_HYPOTHESIS") == "long"
N_THREADS = 16
CALLS_PER_THREAD = 200 if not LONG else 1000
N_REDEFINITIONS = 60 if not LONG else 400
N_CLEARS = 20 if not LONG else 100
N_CLOSURES = 1000 if not LONG else 10_000
JOIN_TIMEOUT = 300.0       # seconds: only reached by a deadlock, never by a slow machine
VERSIONS = (1.0, 2.0, 3.0, 5.0)


# -- what the gradients read: redefined while they run ---------------------------------------

def make_helper(version):
    def helper(x):
        return x * version
    return helper


helper = make_helper(VERSIONS[0])
SCALE = VERSIONS[0]


def through_helper(x):
    return helper(x) * x                  # d/dx = 2 v x


def through_helper_and_sin(x):
    return np.sin(helper(x))              # d/dx = v cos(v x)


def through_global(x):
    return np.sum(x * x) * SCALE          # d/dx = 2 v x


POINT = np.array([0.25, 0.5])
GRADIENTS = {                             # name -> (transformed function, argument)
    "helper": (xform.grad(through_helper), 0.75),
    "helper-sin": (xform.jit(xform.grad(through_helper_and_sin)), 0.75),
    "global": (xform.grad(through_global), POINT),
}


def define(version):
    globals()["helper"] = make_helper(version)
    globals()["SCALE"] = version


def single_threaded_results():
    """name -> {version: result}, each computed alone with that version in force."""
    results = {name: {} for name in GRADIENTS}
    for version in VERSIONS:
        define(version)
        for name, (fun, arg) in GRADIENTS.items():
            results[name][version] = fun(arg)
    return results


def run_threads(targets):
    threads = [threading.Thread(target=target, daemon=True) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)
    stuck = [thread for thread in threads if thread.is_alive()]
    assert not stuck, f"{len(stuck)} threads did not finish: a deadlock"


def test_cached_gradients_under_redefinition_and_clearing_from_many_threads():
    expected = single_threaded_results()
    # The definitions announced so far, in order; a call may see the one in force when it
    # started (possibly still being assigned: the one before it) up to the last announced
    # when it returned.
    announced = [VERSIONS[-1]]
    errors, mismatches = [], []
    start = threading.Barrier(N_THREADS + 2)

    def caller(index):
        def run():
            try:
                start.wait()
                names = list(GRADIENTS)
                for call in range(CALLS_PER_THREAD):
                    name = names[(index + call) % len(names)]
                    fun, arg = GRADIENTS[name]
                    first = len(announced) - 2
                    result = fun(arg)
                    in_force = set(announced[max(first, 0):])
                    if not any(np.allclose(result, expected[name][v], rtol=1e-13, atol=0)
                               for v in in_force):
                        mismatches.append((name, result, sorted(in_force)))
            except BaseException as err:      # noqa: BLE001  (reported by the test)
                errors.append(err)
        return run

    def redefiner():
        try:
            start.wait()
            for i in range(N_REDEFINITIONS):
                version = VERSIONS[i % len(VERSIONS)]
                announced.append(version)
                define(version)
                GRADIENTS["helper"][0](0.75)    # this thread calls too, between changes
        except BaseException as err:          # noqa: BLE001
            errors.append(err)

    def clearer():
        try:
            start.wait()
            for i in range(N_CLEARS):
                xform.clear_cache()
                GRADIENTS["global"][0](POINT)
        except BaseException as err:          # noqa: BLE001
            errors.append(err)

    try:
        run_threads([caller(i) for i in range(N_THREADS)] + [redefiner, clearer])
    finally:
        define(VERSIONS[0])
    assert not errors, errors[:3]
    assert not mismatches, mismatches[:5]
    assert xform.cache_info()["invalidations"] > 0       # the redefinitions were noticed
    # and afterwards every gradient is the single-threaded one again
    for name, (fun, arg) in GRADIENTS.items():
        np.testing.assert_allclose(fun(arg), expected[name][VERSIONS[0]], rtol=1e-13)


def test_many_threads_stage_one_new_function_once_and_agree():
    """The first call of a new function from 16 threads at once: one build, one answer."""
    start = threading.Barrier(N_THREADS)
    results, errors = [None] * N_THREADS, []

    def new_gradient(x):
        return np.sum(np.tanh(x) * x)

    fun = xform.grad(new_gradient)
    builds = xform.cache_info()["builds"]

    def run(index):
        def call():
            try:
                start.wait()
                results[index] = fun(POINT)
            except BaseException as err:      # noqa: BLE001
                errors.append(err)
        return call
    run_threads([run(i) for i in range(N_THREADS)])
    assert not errors, errors[:3]
    expected = np.tanh(POINT) + POINT / np.cosh(POINT) ** 2
    for result in results:
        np.testing.assert_allclose(result, expected, rtol=1e-13)
    assert xform.cache_info()["builds"] - builds == 1


# -- long sessions: many closures --------------------------------------------------------------

def resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except OSError:       # no /proc: the peak instead, which only grows (still a bound)
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def tracked_objects() -> int:
    gc.collect()
    return len(gc.get_objects())


def make_closure(k):
    offset = float(k)
    return lambda x: np.sin(x) * offset + 1.0


@pytest.fixture
def small_cache():
    old = xform.cache_info()["max_entries"]
    xform.set_cache_size(64)
    try:
        yield 64
    finally:
        xform.set_cache_size(old)


def test_distinct_closures_in_a_loop_stay_bounded_and_are_released(small_cache):
    warm_up = N_CLOSURES // 5
    sampled = []          # weak references to some closures not kept, and their jits
    kept = []             # a few closures stay alive: their entries may stay in the cache
    for k in range(N_CLOSURES):
        closure = make_closure(k)
        jitted = xform.jit(closure)
        assert jitted(0.0) == 1.0 and jitted(np.pi / 2) == k + 1.0
        if k % 50 == 25:
            sampled.append((weakref.ref(closure), weakref.ref(jitted)))
        if k % 100 == 0:
            kept.append(closure)
            xform.grad(closure)(0.0)
        assert xform.cache_info()["entries"] <= small_cache
        if k == warm_up:
            objects_after_warm_up, bytes_after_warm_up = tracked_objects(), resident_bytes()
        del closure, jitted
    gc.collect()
    # Generous margins: what is bounded is the growth, which is linear without a bound.
    growth = tracked_objects() - objects_after_warm_up
    assert growth < 0.2 * objects_after_warm_up + 20 * len(kept) * 100, growth
    assert resident_bytes() < 1.5 * bytes_after_warm_up + 64 * 2 ** 20
    assert [pair for pair in sampled if pair[0]() is not None or pair[1]() is not None] == []
    kept.clear()
    gc.collect()
    assert xform.cache_info()["entries"] <= small_cache


def test_a_dead_functions_entries_leave_the_cache():
    def make():
        scale = np.float64(3.0)

        def fun(x):
            return np.sum(x * scale)
        return fun
    fun = make()
    ref = weakref.ref(fun)
    entries = xform.cache_info()["entries"]
    xform.jit(fun)(POINT)
    xform.grad(fun)(POINT)
    assert xform.cache_info()["entries"] >= entries + 2
    del fun
    gc.collect()
    assert ref() is None
    assert xform.cache_info()["entries"] <= entries
