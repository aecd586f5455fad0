"""Hints that fix the program: for catalogue rows of docs/ERRORS.md (tests/test_bad_inputs.py),
the fix the hint states is applied literally to the failing program (its source text edited
as the hint says), and the fixed program then runs and matches finite differences."""
import inspect
import re
import textwrap

import numpy as np
import pytest

import xform
from tests import test_bad_inputs as bad


def _hint(call) -> str:
    with pytest.raises(xform.XformError) as info:
        call()
    return info.value.hint


def _fixed(function, old: str, new: str, extra: dict | None = None):
    """`function` recompiled from its source with `old` replaced by `new` (once, exactly)."""
    source = textwrap.dedent(inspect.getsource(function))
    assert source.count(old) == 1, (old, source)
    namespace = {**vars(bad), **(extra or {})}
    exec(compile(source.replace(old, new), bad.__file__, "exec"), namespace)
    return namespace[function.__name__], namespace


def _central(f, x, h=1e-5):
    return (f(x + h) - f(x - h)) / (2 * h)


def test_numpy_scalar_type_hint():
    hint = _hint(lambda: xform.grad(bad.numpy_scalar_of_a_traced_value)(1.0))
    replacement = re.search(r"np\.asarray\(x, dtype=np\.float64\)", hint).group(0)
    fixed, _ = _fixed(bad.numpy_scalar_of_a_traced_value, "np.float64(x)", replacement)
    assert np.isclose(xform.grad(fixed)(1.3), _central(fixed, 1.3), rtol=1e-8)
    assert fixed(1.3) == 2.6            # eagerly, on a plain float, too


# The programs of three rows this file once fixed by their hints now run as written: a plain
# object is a pytree (values while staging), solve_ivp picks its own output times and a Hessian
# goes through odeint (SciPy's solvers).

def test_a_plain_object_holding_parameters_now_runs():
    g = bad.plain_object_argument()
    assert isinstance(g, bad.Params)
    assert np.isclose(g.w, _central(lambda w: bad.loss_of_params(bad.Params(w), bad.X), 1.5),
                      rtol=1e-8)


def test_solve_ivp_without_t_eval_now_runs():
    g = xform.grad(bad.solve_ivp_without_t_eval)(0.5)
    assert np.isclose(g, _central(bad.solve_ivp_without_t_eval, 0.5), rtol=1e-5)


def test_a_hessian_through_odeint_now_runs():
    assert np.isclose(bad.hessian_through_odeint(), np.exp(-0.5), rtol=1e-5)  # d2/dk2 exp(-k)
