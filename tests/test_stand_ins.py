"""Stand-ins (xform/numpy/stand_ins.py): in place only while something is staged, invisible to
calls without tracers (from any thread), restored after errors and nested stagings, and
reaching names imported before xform."""
import ast
import subprocess
import sys
import threading
import types

import numpy as np
import pytest
from numpy import full as full_imported_early

import xform
from xform.numpy import stand_ins

ORIGINAL_FULL_CODE = np.full.__code__
ORIGINAL_ARRAY = np.array


def seen_while_staging():
    seen = {}

    def f(x):
        seen["array"], seen["full_code"] = np.array, np.full.__code__
        return x * 2
    xform.jit(f)(1.0)
    return seen


def test_in_place_only_while_staging():
    seen = seen_while_staging()
    assert seen["array"] is not ORIGINAL_ARRAY and seen["full_code"] is not ORIGINAL_FULL_CODE
    assert np.array is ORIGINAL_ARRAY and np.full.__code__ is ORIGINAL_FULL_CODE


def test_restored_after_an_error_and_after_nested_stagings():
    def fails(x):
        raise ValueError("user error")
    with pytest.raises(ValueError):
        xform.jit(fails)(1.0)
    assert np.array is ORIGINAL_ARRAY and np.full.__code__ is ORIGINAL_FULL_CODE

    inner = xform.function(lambda x: np.array([x, x]))

    def outer(x):
        y = np.sum(inner(x))
        assert np.array is not ORIGINAL_ARRAY       # the inner staging ended; ours has not
        return np.sum(np.array([y, x]))
    assert xform.grad(outer)(1.0) == 3.0
    assert np.array is ORIGINAL_ARRAY


def test_a_name_imported_before_xform_stages():
    got = xform.jit(lambda x: full_imported_early(3, x))(2.5)
    np.testing.assert_array_equal(got, np.full(3, 2.5))


def test_other_threads_get_numpy_while_a_staging_is_open():
    inside, done = threading.Event(), threading.Event()
    results = {}

    def staged(x):
        inside.set()
        assert done.wait(10)
        return x + 1

    def other_thread():
        assert inside.wait(10)
        results["array"] = np.array([[1, 2], [3, 4]], dtype=np.float32)
        results["full"] = np.full((2,), 7)
        done.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    xform.jit(staged)(1.0)
    thread.join()
    assert type(results["array"]) is np.ndarray and results["array"].dtype == np.float32
    np.testing.assert_array_equal(results["full"], [7, 7])


def test_a_stand_in_is_only_called_with_tracers():
    calls = []

    def double(x):
        return x * 2

    stand_ins.stand_in(double, lambda x: calls.append(x) or x * 3)
    try:
        assert xform.jit(lambda x: double(x) + double(2.0))(1.0) == 7.0   # 3 + 4
        assert len(calls) == 1 and double(1.0) == 2.0
    finally:
        stand_ins.remove_stand_in(double)


def test_an_installer_waits_for_its_module():
    installed = []
    stand_ins.stand_in_when_imported("xform_test_fake_module", lambda: installed.append(True))
    xform.jit(lambda x: x + 1)(1.0)
    assert not installed
    sys.modules["xform_test_fake_module"] = types.ModuleType("xform_test_fake_module")
    try:
        xform.jit(lambda x: x + 2)(1.0)
        assert installed == [True]
    finally:
        del sys.modules["xform_test_fake_module"]


def test_a_closure_function_keeps_its_cells():
    scale = 4.0

    def scaled(x):
        return x * scale

    stand_ins.stand_in(scaled, lambda x: x * scale + 1)
    try:
        assert xform.jit(scaled)(1.0) == 5.0 and scaled(1.0) == 4.0
    finally:
        stand_ins.remove_stand_in(scaled)


def _halve(x):
    return x / 2


def test_a_function_calling_a_stand_in_stays_cached():
    # Staging records the code of every function the staged one names; it must record the
    # code the function has between stagings, not the trampoline swapped in during staging.
    stand_ins.stand_in(_halve, lambda x: x * 0.5)
    try:
        grad = xform.grad(lambda x: _halve(x) * x)
        before = xform.cache_info()
        assert [float(grad(3.0)) for _ in range(3)] == [3.0, 3.0, 3.0]
        after = xform.cache_info()
        assert after["invalidations"] == before["invalidations"]
        assert after["hits"] - before["hits"] >= 2
    finally:
        stand_ins.remove_stand_in(_halve)


def test_odeint_gradients_are_cached():
    from scipy.integrate import odeint

    def final_state(rate):
        return odeint(lambda y, t, k: -k * y, np.array([1.0]), np.array([0.0, 1.0]),
                      args=(rate,))[-1, 0]

    grad = xform.grad(final_state)
    before = xform.cache_info()
    values = [float(grad(0.5)) for _ in range(3)]
    after = xform.cache_info()
    np.testing.assert_allclose(values, -np.exp(-0.5), rtol=1e-6)
    assert after["invalidations"] == before["invalidations"]


# Each body imports its SciPy module on its first line, so in a fresh interpreter the module
# arrives while the function is being staged: its stand-ins are not in place for that run,
# which must start over once they are.
IMPORTED_WHILE_STAGING = {
    "special": "from scipy.special import logsumexp\n    return logsumexp(x)",
    "stats": "import scipy.stats\n    return scipy.stats.norm.logpdf(x, 0.5, 2.0).sum()",
    "linalg": "import scipy.linalg\n    return np.sum(scipy.linalg.solve_triangular("
              "np.tril(np.outer(x, x)) + np.eye(3), x, lower=True))",
    "integrate": "from scipy.integrate import odeint\n"
                 "    return odeint(lambda y, t: -y * y, x, np.array([0.0, 0.5]))[-1].sum()",
}


@pytest.mark.parametrize("module", sorted(IMPORTED_WHILE_STAGING))
def test_a_scipy_module_imported_inside_the_staged_function(module):
    source = f"def f(x):\n    {IMPORTED_WHILE_STAGING[module]}\n"
    run = subprocess.run(
        [sys.executable, "-c", "import sys, numpy as np, xform\n" + source +
         "assert not any(m.startswith('scipy.' + sys.argv[1]) for m in sys.modules)\n"
         "print(repr(xform.grad(f)(np.array([0.3, 0.7, 1.1])).tolist()))\n", module],
        capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    namespace = {"np": np}
    exec(source, namespace)           # here the module is imported before staging
    want = xform.grad(namespace["f"])(np.array([0.3, 0.7, 1.1]))
    np.testing.assert_allclose(ast.literal_eval(run.stdout), want, rtol=1e-12)
