"""Hints that fix the program: for catalogue rows of docs/ERRORS.md (tests/test_bad_inputs.py),
the fix the hint states is applied literally to the failing program (its source text edited
as the hint says), and the fixed program then runs and matches finite differences."""
import inspect
import re
import textwrap

import numpy as np
import pytest
import scipy.integrate

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


def test_plain_object_hint():
    hint = _hint(bad.plain_object_argument)
    assert "@dataclasses.dataclass above `class Params:`" in hint
    fields = re.search(r"in place of __init__ \(([^)]*)\)", hint).group(1)
    assert fields == "w: float"
    # the class as the hint says: the decorator, its attributes declared as fields
    namespace = {}
    exec(f"import dataclasses\n@dataclasses.dataclass\nclass Params:\n    {fields}\n", namespace)
    Params = namespace["Params"]
    g = xform.grad(bad.loss_of_params)(Params(1.5), bad.X)
    assert isinstance(g, Params)
    assert np.isclose(g.w, _central(lambda w: bad.loss_of_params(Params(w), bad.X), 1.5),
                      rtol=1e-8)


def test_solve_ivp_without_t_eval_hint():
    hint = _hint(lambda: xform.grad(bad.solve_ivp_without_t_eval)(0.5))
    t_eval = re.search(r"t_eval=np\.linspace\(t_span\[0\], t_span\[1\], 50\)", hint).group(0)
    assert "sol.y[:, -1]" in hint
    # the call as the hint writes it, with the program's own t_span
    fixed, _ = _fixed(bad.solve_ivp_without_t_eval, "args=(k,)",
                      f"{t_eval}, args=(k,)".replace("t_span", "(0, 1)"))
    g = xform.grad(fixed)(0.5)
    assert np.isclose(g, _central(fixed, 0.5), rtol=1e-5)
    assert np.isclose(g, -np.exp(-0.5), rtol=1e-6)        # y(1) = exp(-k)


def test_hessian_through_odeint_hint():
    hint = _hint(bad.hessian_through_odeint)
    assert "jacrev" not in hint.partition("second derivatives")[2]   # never suggested for them
    recipe = re.search(r"g = xform\.grad\(f\); H\[:, i\] = (\(g\(x \+ h \* e_i\) - "
                       r"g\(x - h \* e_i\)\) / \(2 \* h\))", hint)
    g, h, x = xform.grad(bad.odeint_end), 1e-4, np.array([0.5])
    e_0 = np.eye(1)[0]
    column = eval(recipe.group(1), {"g": lambda v: np.atleast_1d(g(v[0])), "x": x, "h": h,
                                    "e_i": e_0})
    f = bad.odeint_end
    second_difference = (f(0.5 + h) - 2 * f(0.5) + f(0.5 - h)) / h ** 2
    assert np.isclose(column[0], second_difference, rtol=1e-4)
    assert np.isclose(column[0], np.exp(-0.5), rtol=1e-6)  # d2/dk2 exp(-k)


def test_forward_mode_through_odeint_hint_jacrev_works():
    """The same error from jacfwd: the hint's first-derivative fix, jacrev, runs."""
    def trajectory(k):
        return scipy.integrate.odeint(bad.decay, np.ones(1), np.array([0.0, 0.5, 1.0]),
                                      args=(k,), **bad.TIGHT)[:, 0]
    hint = _hint(lambda: xform.jacfwd(trajectory)(0.5))
    assert "xform.jacrev for a Jacobian" in hint
    jacobian = xform.jacrev(trajectory)(0.5)
    assert np.allclose(jacobian, _central(trajectory, 0.5), rtol=1e-5)
