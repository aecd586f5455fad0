"""scipy.integrate on tracers: odeint and solve_ivp (with fixed t_eval). The right-hand side
is staged once by xform (closed-over traced values become operands); the solve runs SciPy's
solver on concrete values, and gradients come from a reverse-time adjoint solve
(xform/rules/ode.py). Forward mode (jvp) is not supported and says so.

Integrals: quad, quad_vec and dblquad (nested quads) stage the integrand and integrate it
with SciPy (xform/rules/quadrature.py: derivatives under the integral and at the limits);
cumulative_trapezoid and fixed_quad (with traced limits) are written with numpy; trapezoid and
simpson need nothing (SciPy's own code runs on tracers).
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
from xform.rules.quadrature import integral_p
from xform.scipy import SCIPY_GROUP
from xform.scipy.staging import F64, as_float, stage_with_args
from xform.source_info import user_frame_info
from xform.tree import tree_flatten, tree_unflatten


def _solve(rhs, y0, t, args, method, options):
    """odeint_p of `rhs(y, t, *args)`, staged on y0's and t's types."""
    y0, t = as_float(y0), as_float(t)
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
        return as_float(rhs(y, s, *tree_unflatten(args_tree, list(flat_args))))
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
    y0 = as_float(y0)
    if aval(y0).ndim > 1:
        raise shape_error("Initial condition y0 must be one-dimensional.")
    # SciPy's state is a vector: a scalar y0 is one of length 1 (func sees shape (1,)), and
    # the result has a column per state
    return _solve(rhs, np.reshape(y0, (-1,)), t, args, "odeint", options)


def solve_ivp(fun, t_span, y0, method="RK45", t_eval=None, dense_output=False, events=None,
              vectorized=False, args=None, **options):
    """scipy.integrate.solve_ivp, every method named by a string: a result differentiable in
    y0, t_span, t_eval, args and what `fun` closes over. With t_eval, `t` and `y` are the
    states there; without it, the solver's own times are not known while staging, so `y` and
    `t` give their ends only (`sol.y[:, -1]`, `sol.t[-1]`, index 0 too); with
    dense_output=True, `sol.sol(t)` at times inside t_span. events= is refused."""
    import scipy.integrate
    if events is not None:
        raise unsupported_error("scipy.integrate.solve_ivp(..., events=...) (event times "
                                "are not differentiated)")
    if not isinstance(method, str):
        raise unsupported_error("scipy.integrate.solve_ivp with a solver class as method")
    args = () if args is None else (args if isinstance(args, tuple) else (args,))

    def states(times, first, last):
        """The states at `times`, solved over t_span as SciPy does (the same steps): its ends
        join the times unless they are the first and last already."""
        ends = [as_float(t_span[0]).reshape(1)] if first else []
        tail = [as_float(t_span[1]).reshape(1)] if last else []
        ys = _solve(lambda y, s, *a: fun(s, y, *a), y0, np.concatenate(ends + [times] + tail),
                    args, method, options)
        ys = ys[int(first):aval(ys).shape[0] - int(last)]
        return np.swapaxes(ys, 0, -1) if aval(ys).ndim == 2 else ys.T

    dense = _DenseSolution(states) if dense_output else None
    if t_eval is None:
        t, y = _Ends(as_float(t_span[0]), as_float(t_span[1]), states)
    else:
        t = as_float(t_eval)
        y = states(t, _differs(t_span[0], t_eval, 0), _differs(t_span[1], t_eval, -1))
    return scipy.integrate._ivp.ivp.OdeResult(
        t=t, y=y, sol=dense, t_events=None, y_events=None, nfev=0, njev=0, nlu=0, status=0,
        message="The solver successfully reached the end of the integration interval.",
        success=True)


_ENDS_ONLY = ("scipy.integrate.solve_ivp without t_eval: while staging only the ends of "
              "t_span are known of the solver's own times (sol.t[0], sol.t[-1], sol.y[:, 0], "
              "sol.y[:, -1])")


class _EndsOf:
    """`sol.t` or `sol.y` of a solve without t_eval: indexable at the first and last time."""

    def __init__(self, first, last):
        self._ends = (first, last)

    def __getitem__(self, key):
        rest, time = (key[:-1], key[-1]) if isinstance(key, tuple) else ((), key)
        if isinstance(time, (int, np.integer)) and time in (0, -1):
            end = self._ends[time]
            return end[rest[1:]] if rest and rest[0] in (slice(None), Ellipsis) else \
                (end[rest] if rest else end)
        raise unsupported_error(_ENDS_ONLY + f", not [{key!r}]: pass t_eval=..., or "
                                "dense_output=True and call sol.sol(t)")

    def _refuse(self, *args, **kwargs):
        raise unsupported_error(_ENDS_ONLY + ": pass t_eval=... for the states at given times")

    __array__ = __len__ = __iter__ = _refuse

    @property
    def shape(self):
        self._refuse()


def _Ends(start, end, states):
    """(t, y) of a solve without t_eval: its ends only."""
    ys = states(np.stack([start, end]), False, False)
    return _EndsOf(start, end), _EndsOf(ys[..., 0], ys[..., 1])


class _DenseSolution:
    """`sol.sol` of dense_output=True: `sol.sol(t)` solves over t_span with t as output times
    (the same steps, interpolated as SciPy's dense output is)."""

    def __init__(self, states):
        self._states = states

    def __call__(self, t):
        t = as_float(t)
        if aval(t).ndim == 0:
            return self._states(np.reshape(t, (1,)), True, True)[..., 0]
        return self._states(t, True, True)


def _differs(end, t_eval, index) -> bool:
    """Whether `end` of t_span may differ from t_eval[index] (traced values may)."""
    if type(end) is Tracer or type(t_eval) is Tracer:
        return True
    return float(end) != float(np.asarray(t_eval)[index])


# -- integrals ------------------------------------------------------------------------------

class _Integrand:
    """An integrand func(t, *args) staged once; `traced` says whether the integral depends
    on a traced value (else SciPy's own call runs, whole result included)."""

    def __init__(self, func, a, b, args):
        args = args if isinstance(args, tuple) else (args,)
        self.graph, self.operands = stage_with_args(lambda t, a: (func(t, *a),),
                                                    [ShapedArray((), F64)], args)
        self.limits = (as_float(a), as_float(b))
        self.traced = any(type(v) is Tracer for v in list(self.limits) + self.operands)

    def integral(self, options, name):
        """[value, error estimate] by integral_p."""
        options = {k: v for k, v in options.items() if v is not None}
        return integral_p.bind(*self.limits, *self.operands, func=self.graph,
                               options=tuple(sorted(options.items())), name=name,
                               source=user_frame_info())


_QUAD_DEFAULTS = {"weight": None, "wvar": None, "wopts": None, "complex_func": False}


def quad(func, a, b, args=(), full_output=0, epsabs=1.49e-08, epsrel=1.49e-08, limit=50,
         points=None, weight=None, wvar=None, wopts=None, maxp1=50, limlst=50,
         complex_func=False):
    """scipy.integrate.quad: (value, error estimate), the value differentiable in the
    integrand's parameters (args and closed-over values) and in the limits, infinite ones
    included. weight=, complex_func= and full_output= are not supported."""
    import scipy.integrate
    integrand = _Integrand(func, a, b, args)
    if not integrand.traced:
        return scipy.integrate.quad(func, a, b, args, full_output, epsabs, epsrel, limit,
                                    points, weight, wvar, wopts, maxp1, limlst, complex_func)
    given = dict(weight=weight, wvar=wvar, wopts=wopts, complex_func=complex_func)
    changed = [k for k, v in given.items() if v is not _QUAD_DEFAULTS[k]
               and v != _QUAD_DEFAULTS[k]]
    if changed or full_output:
        raise unsupported_error(f"scipy.integrate.quad(..., "
                                f"{(changed or ['full_output'])[0]}=...)")
    points = None if points is None else tuple(float(p) for p in points)
    value, error = integrand.integral(dict(epsabs=epsabs, epsrel=epsrel, limit=limit,
                                           points=points), "scipy.integrate.quad")
    return value, error


def quad_vec(f, a, b, epsabs=1e-200, epsrel=1e-08, norm="2", cache_size=100000000.0,
             limit=10000, workers=1, points=None, quadrature=None, full_output=False, *,
             args=()):
    """scipy.integrate.quad_vec: (value, error estimate) of a vector-valued integrand,
    differentiable as quad's. workers= and full_output= are not supported."""
    import scipy.integrate
    integrand = _Integrand(f, a, b, args)
    if not integrand.traced:
        return scipy.integrate.quad_vec(f, a, b, epsabs, epsrel, norm, cache_size, limit,
                                        workers, points, quadrature, full_output, args=args)
    if workers != 1 or full_output:
        raise unsupported_error("scipy.integrate.quad_vec(..., workers/full_output=...)")
    options = dict(epsabs=epsabs, epsrel=epsrel, norm=norm, cache_size=cache_size,
                   limit=limit, quadrature=quadrature,
                   points=None if points is None else tuple(float(p) for p in points))
    value, error = integrand.integral(options, "scipy.integrate.quad_vec")
    return value, error


def dblquad(func, a, b, gfun, hfun, args=(), epsabs=1.49e-08, epsrel=1.49e-08):
    """scipy.integrate.dblquad as SciPy computes it, an outer quad over x of inner quads over
    y from gfun(x) to hfun(x): differentiable in args, closed-over values and every limit."""
    def inner(x, *args):
        low = gfun(x) if callable(gfun) else gfun
        high = hfun(x) if callable(hfun) else hfun
        return quad(func, low, high, args=(x,) + args, epsabs=epsabs, epsrel=epsrel)[0]
    return quad(inner, a, b, args=args, epsabs=epsabs, epsrel=epsrel)


def fixed_quad(func, a, b, args=(), n=5):
    """scipy.integrate.fixed_quad with traced limits (SciPy's own code asks whether they are
    infinite): Gauss-Legendre nodes mapped to [a, b], as SciPy computes it."""
    import scipy.special
    nodes, weights = scipy.special.roots_legendre(n)
    a, b = as_float(a), as_float(b)
    points = (b - a) * (np.real(nodes) + 1) / 2.0 + a
    return (b - a) / 2.0 * np.sum(weights * func(points, *args), axis=-1), None


def cumulative_trapezoid(y, x=None, dx=1.0, axis=-1, initial=None):
    """scipy.integrate.cumulative_trapezoid with numpy operations."""
    y = np.moveaxis(as_float(y), axis, -1)
    if x is None:
        steps = dx
    else:
        x = as_float(x)
        steps = np.diff(np.moveaxis(x, axis, -1) if aval(x).ndim > 1 else x)
    parts = np.cumsum(steps * (y[..., 1:] + y[..., :-1]) / 2.0, axis=-1)
    if initial is not None:
        if not (np.isscalar(initial) and initial == 0):
            raise unsupported_error("scipy.integrate.cumulative_trapezoid(..., initial=<not 0>)")
        parts = np.concatenate([np.zeros(aval(parts).shape[:-1] + (1,)), parts], axis=-1)
    return np.moveaxis(parts, -1, axis)


STAND_INS = ("odeint", "solve_ivp", "quad", "quad_vec", "dblquad")   # take functions


def _staging(args, kwargs) -> bool:
    # the right-hand side may close over traced values that no argument shows
    return current_builder() is not None


def _install():
    import scipy.integrate
    for name in STAND_INS:
        stand_in(getattr(scipy.integrate, name), globals()[name], when=_staging)
    stand_in(scipy.integrate.cumulative_trapezoid, cumulative_trapezoid)
    stand_in(scipy.integrate.fixed_quad, fixed_quad)      # only with traced limits


stand_in_when_imported("scipy.integrate", _install, SCIPY_GROUP)
