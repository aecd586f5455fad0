"""scipy.integrate on tracers: odeint and solve_ivp (with fixed t_eval). The right-hand side
is staged once by xform (closed-over traced values become operands); the solve runs SciPy's
solver on concrete values, and gradients come from a reverse-time adjoint solve
(xform/rules/ode.py). Forward mode (jvp) is not supported and says so.
"""
from __future__ import annotations

import numpy as np

from xform.errors import shape_error, unsupported_error
from xform.ir.ad import aval
from xform.ir.avals import ShapedArray
from xform.ir.builder import current_builder, stage_function
from xform.ir.tracer import Tracer
from xform.numpy.construct import staged_array
from xform.numpy.stand_ins import stand_in, stand_in_when_imported
from xform.rules.ode import odeint_p
from xform.tree import tree_flatten, tree_unflatten


def _as_float(x):
    x = staged_array(x)
    return x if aval(x).dtype == np.float64 else x.astype(np.float64)


def _solve(rhs, y0, t, args, method, options):
    """odeint_p of `rhs(y, t, *args)`, staged on y0's and t's types."""
    y0, t = _as_float(y0), _as_float(t)
    if aval(t).ndim != 1:
        raise shape_error(f"the time points must be one-dimensional, got shape {aval(t).shape}")
    # args as SciPy passes them: pytrees too (a list of arrays of different shapes: a neural
    # ODE's parameters), each leaf an input
    leaves, args_tree = tree_flatten(tuple(args))
    args = tuple(staged_array(a) for a in leaves)
    avals = [ShapedArray(aval(y0).shape, np.dtype(np.float64)), ShapedArray((), np.float64)] + \
        [ShapedArray(aval(a).shape, aval(a).dtype) for a in args]
    in_tree = tree_flatten(tuple(range(len(avals))))[1]

    def flat_rhs(y, s, *flat_args):
        return _as_float(rhs(y, s, *tree_unflatten(args_tree, list(flat_args))))
    graph, captured, _ = stage_function(flat_rhs, in_tree, avals)
    if graph.outputs[0].aval.shape != aval(y0).shape:
        raise shape_error(f"the right-hand side returned shape {graph.outputs[0].aval.shape}"
                          f" for a state of shape {aval(y0).shape}")
    return odeint_p.bind(y0, t, *args, *captured, func=graph, method=method,
                         options=tuple(sorted(options.items())))


_ODEINT_DEFAULTS = {"Dfun": None, "col_deriv": 0, "full_output": 0, "ml": None, "mu": None,
                    "tcrit": None, "ixpr": 0, "printmessg": 0}
_ODEINT_NUMBERS = ("rtol", "atol", "h0", "hmax", "hmin", "mxstep", "mxhnil", "mxordn",
                   "mxords")


def odeint(func, y0, t, args=(), Dfun=None, col_deriv=0, full_output=0, ml=None, mu=None,
           rtol=None, atol=None, tcrit=None, h0=0.0, hmax=0.0, hmin=0.0, ixpr=0, mxstep=0,
           mxhnil=0, mxordn=12, mxords=5, printmessg=0, tfirst=False):
    """scipy.integrate.odeint: the states at `t` (rows), differentiable in y0, t, args and
    what `func` closes over."""
    given = dict(Dfun=Dfun, col_deriv=col_deriv, full_output=full_output, ml=ml, mu=mu,
                 tcrit=tcrit, ixpr=ixpr, printmessg=printmessg)
    changed = [k for k, v in given.items() if v is not _ODEINT_DEFAULTS[k]
               and v != _ODEINT_DEFAULTS[k]]
    if changed:
        raise unsupported_error(f"scipy.integrate.odeint(..., {changed[0]}=...)")
    numbers = dict(rtol=rtol, atol=atol, h0=h0, hmax=hmax, hmin=hmin, mxstep=mxstep,
                   mxhnil=mxhnil, mxordn=mxordn, mxords=mxords)
    options = {k: v for k, v in numbers.items() if v is not None}
    args = args if isinstance(args, tuple) else (args,)
    rhs = (lambda y, s, *a: func(s, y, *a)) if tfirst else func
    return _solve(rhs, y0, t, args, "odeint", options)


def solve_ivp(fun, t_span, y0, method="RK45", t_eval=None, dense_output=False, events=None,
              vectorized=False, args=None, **options):
    """scipy.integrate.solve_ivp with `t_eval` given: a result whose `t` is t_eval and `y`
    (states in columns) is differentiable in y0, t_eval, args and what `fun` closes over.
    `t_span` must start at t_eval[0] (the solve starts there; gradients reach the start
    through t_eval[0])."""
    import scipy.integrate
    if t_eval is None:
        raise unsupported_error(
            "scipy.integrate.solve_ivp without t_eval (output times chosen by the solver)",
            "pass t_eval, the times you need the solution at (starting at t_span[0]): "
            "solve_ivp(fun, t_span, y0, t_eval=np.linspace(t_span[0], t_span[1], 50), ...); "
            "the state at the end is then sol.y[:, -1]")
    if dense_output or events is not None or vectorized:
        raise unsupported_error("scipy.integrate.solve_ivp(..., dense_output/events/"
                                "vectorized=...)")
    if not isinstance(method, str):
        raise unsupported_error("scipy.integrate.solve_ivp with a solver class as method")
    args = () if args is None else (args if isinstance(args, tuple) else (args,))
    t = _as_float(t_eval)
    # The solve covers t_span, as SciPy's does (the same steps): its ends join the output
    # times when they are not already t_eval's first and last.
    first, last = _differs(t_span[0], t_eval, 0), _differs(t_span[1], t_eval, -1)
    times = np.concatenate(([_as_float(t_span[0]).reshape(1)] if first else []) + [t] +
                           ([_as_float(t_span[1]).reshape(1)] if last else []))
    ys = _solve(lambda y, s, *a: fun(s, y, *a), y0, times, args, method, options)
    ys = ys[int(first):aval(ys).shape[0] - int(last)]
    return scipy.integrate._ivp.ivp.OdeResult(
        t=t, y=np.swapaxes(ys, 0, -1) if aval(ys).ndim == 2 else ys.T, sol=None,
        t_events=None, y_events=None, nfev=0, njev=0, nlu=0, status=0,
        message="The solver successfully reached the end of the integration interval.",
        success=True)


def _differs(end, t_eval, index) -> bool:
    """Whether `end` of t_span may differ from t_eval[index] (traced values may)."""
    if type(end) is Tracer or type(t_eval) is Tracer:
        return True
    return float(end) != float(np.asarray(t_eval)[index])


STAND_INS = ("odeint", "solve_ivp")


def _staging(args, kwargs) -> bool:
    # the right-hand side may close over traced values that no argument shows
    return current_builder() is not None


def _install():
    import scipy.integrate
    for name in STAND_INS:
        stand_in(getattr(scipy.integrate, name), globals()[name], when=_staging)


stand_in_when_imported("scipy.integrate", _install)
