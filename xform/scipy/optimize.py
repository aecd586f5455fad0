"""scipy.optimize's solvers on tracers, unmodified: brentq, brenth, ridder, bisect, newton,
root_scalar, fsolve, root, minimize_scalar, minimize, least_squares and curve_fit. The user's
functions (objective and the derivatives given to SciPy) are staged together once; the solve
is one `solution` equation (xform/rules/implicit.py) that runs SciPy's own solver, with the
user's options, on concrete values, and is differentiated by the implicit function theorem with
respect to everything the functions close over or receive through `args`.

What the result objects hold: the solution (traced), the function values at it (`fun`, `cost`,
traced), `success=True` (a solve that fails raises SolverError at the user's line); SciPy's
counters (nit, nfev, ...) are not known while staging and are absent. A solve that nothing
traced reaches is SciPy's own call, whole result included.
"""
from __future__ import annotations

import inspect
import warnings

import numpy as np

from xform.errors import SolverError, shape_error, unsupported_error
from xform.ir.ad import aval
from xform.ir.avals import ShapedArray
from xform.ir.builder import current_builder
from xform.ir.interpret import eval_graph
from xform.ir.tracer import Tracer
from xform.numpy.construct import staged_array
from xform.numpy.protocol import with_constants_read
from xform.numpy.stand_ins import stand_in, stand_in_when_imported
from xform.rules.implicit import Solver, solution_p, solving
from xform.scipy import SCIPY_GROUP
from xform.scipy.staging import F64, arguments, as_float, stage_with_args
from xform.source_info import user_frame_info
from xform.transforms.derived import jvp_of


class NothingTraced(Exception):
    """Nothing the solve depends on is traced: SciPy's call runs as it is (its full result,
    counters included)."""


class StagedSolve:
    """The user's functions of one solver call staged together as one graph of
    (x, direction, *operands): one output per role (xform/rules/implicit.py names them)."""

    def __init__(self, together, roles, shape, args):
        x_aval = ShapedArray(tuple(shape), F64)
        self.graph, self.operands = stage_with_args(together, [x_aval, x_aval], args)
        self.roles, self.shape = tuple(roles), tuple(shape)

    def solve(self, kind, solver, starts, bounds=None):
        starts = [as_float(with_constants_read(s)) for s in starts]
        if not any(type(with_constants_read(v)) is Tracer for v in starts + self.operands):
            raise NothingTraced()
        return solution_p.bind(*starts, *self.operands, func=self.graph, roles=self.roles,
                               kind=kind, shape=self.shape, n_starts=len(starts),
                               solver=solver, bounds=bounds)

    def value(self, role, x):
        """The staged output `role` at x (the result's `fun`, for example)."""
        outs = eval_graph(self.graph, x, np.zeros(self.shape), *self.operands)
        return outs[self.roles.index(role)]

    def jacobian(self, role, x):
        """d output `role` / dx at a 1-D x, one forward-mode column per unknown (a fit's few
        parameters), differentiable in x and the operands in turn."""
        tangents = jvp_of(self.graph, (True,) + (False,) * (1 + len(self.operands)))
        at = len(self.roles) + self.roles.index(role)
        columns = [eval_graph(tangents, x, np.zeros(self.shape), *self.operands, direction)[at]
                   for direction in np.eye(self.shape[0])]
        return np.stack(columns, axis=-1)




def _solver(name, run) -> Solver:
    return Solver(f"scipy.optimize.{name}", run, user_frame_info())


def _not_converged(solver, why) -> SolverError:
    return SolverError(f"{solver.name} did not converge: {why}", solver.source,
                       "check the bracket or starting point, or loosen the tolerances or "
                       "raise maxiter (the same call fails the same way without xform)")


def _tupled(value):
    return value if isinstance(value, tuple) else (value,)


def _shape_of(x0):
    return aval(staged_array(x0)).shape


def _flat_shape_of(x0, one_dimensional=None):
    """(size,): fsolve, root, minimize and least_squares flatten x0 (at least 1-D) and call
    the functions with, and return, a 1-D x. minimize and least_squares (named by
    `one_dimensional`) refuse an x0 of more dimensions, as SciPy does."""
    shape = _shape_of(x0)
    if one_dimensional and len(shape) > 1:
        raise shape_error(f"scipy.optimize.{one_dimensional}: x0 must have one dimension, "
                          f"got shape {shape}")
    return (int(np.prod(shape, dtype=int)),)


def _optimize():
    import scipy.optimize
    return scipy.optimize


# -- scalar roots ---------------------------------------------------------------------------

def _bracketing(name):
    """brentq, brenth, ridder, bisect: f(a) and f(b) of opposite signs."""
    def bracketing(*args, **kwargs):
        call = arguments(getattr(_optimize(), name), args, kwargs)
        f, user_args = call.pop("f"), _tupled(call.pop("args"))
        full_output = call.pop("full_output")
        staged = StagedSolve(lambda x, d, a: (f(x, *a),), ("residual",), (), user_args)
        a, b = call.pop("a"), call.pop("b")

        def run(functions, a, b):
            residual = functions["residual"]
            options = {k: v for k, v in call.items() if k != "disp"}
            root, info = getattr(_optimize(), name)(lambda x: float(residual(x)), float(a),
                                                    float(b), **options, full_output=True,
                                                    disp=False)
            if not info.converged:
                raise _not_converged(solver, info.flag)
            return root
        solver = _solver(name, run)
        root = staged.solve("root", solver, (a, b))
        return (root, _root_results(root, name)) if full_output else root
    bracketing.__name__ = name
    return bracketing


def _root_results(root, method):
    """A RootResults for a traced root: converged (a failure raises); counters unknown."""
    results = _optimize().RootResults(root=None, iterations=-1, function_calls=-1, flag=0,
                                      method=method)
    results.root = root
    return results


def newton(*args, **kwargs):
    """scipy.optimize.newton (Newton, secant or Halley; scalar or array x0)."""
    call = arguments(_optimize().newton, args, kwargs)
    func, fprime, fprime2 = call.pop("func"), call.pop("fprime"), call.pop("fprime2")
    user_args, full_output = _tupled(call.pop("args")), call.pop("full_output")
    x0, x1 = call.pop("x0"), call.pop("x1")
    roles = ("residual",) + (("jacobian",) if fprime is not None else ()) + \
        (("curvature",) if fprime2 is not None else ())

    def together(x, d, a):
        return (func(x, *a),) + ((fprime(x, *a),) if fprime is not None else ()) + \
            ((fprime2(x, *a),) if fprime2 is not None else ())
    staged = StagedSolve(together, roles, _shape_of(x0), user_args)
    scalar = staged.shape == ()

    def run(functions, x0, *x1):
        given = {"fprime": functions.get("jacobian"), "fprime2": functions.get("curvature")}
        options = {k: v for k, v in call.items() if k != "disp"}
        result = _optimize().newton(
            functions["residual"], float(x0) if scalar else x0, x1=(x1[0] if x1 else None),
            **{k: v for k, v in given.items() if v is not None}, **options,
            full_output=True, disp=False)
        if scalar:
            root, info = result
            if not info.converged:
                raise _not_converged(solver, info.flag)
            return root
        if not np.all(result.converged):
            raise _not_converged(solver, f"{int(np.sum(~result.converged))} of "
                                         f"{result.converged.size} elements did not converge")
        return result.root
    solver = _solver("newton", run)
    # on arrays each element is its own scalar equation (SciPy's contract): a diagonal
    root = staged.solve("root" if scalar else "elementwise root", solver,
                        (x0,) + ((x1,) if x1 is not None else ()))
    if not full_output:
        return root
    return (root, _root_results(root, "newton")) if scalar else \
        (root, np.ones(staged.shape, bool), np.zeros(staged.shape, bool))


def root_scalar(*args, **kwargs):
    """scipy.optimize.root_scalar, every method; fprime/fprime2 may be True (f returns
    the derivatives too)."""
    call = arguments(_optimize().root_scalar, args, kwargs)
    f, user_args = call.pop("f"), _tupled(call.pop("args"))
    fprime, fprime2 = call.pop("fprime"), call.pop("fprime2")
    starts = {k: call.pop(k) for k in ("bracket", "x0", "x1") if call.get(k) is not None}
    call = {k: v for k, v in call.items() if k not in ("bracket", "x0", "x1")}
    roles = ("residual", "jacobian", "curvature")[:1 + (fprime is not None) +
                                                  (fprime2 is not None)]
    # fprime2=True: f returns (f, f', f''); fprime=True: (f, f')
    returned = 3 if fprime2 is True else (2 if fprime is True else 1)

    def together(x, d, a):
        outs = list(f(x, *a))[:returned] if returned > 1 else [f(x, *a)]
        outs += [fprime(x, *a)] if callable(fprime) and returned < 2 else []
        outs += [fprime2(x, *a)] if callable(fprime2) else []
        return tuple(outs)
    staged = StagedSolve(together, roles, (), user_args)
    names = [k for k in ("bracket", "x0", "x1") for _ in range(2 if k == "bracket" else 1)
             if k in starts]
    flat = [v for k in ("bracket", "x0", "x1") if k in starts
            for v in (starts[k] if k == "bracket" else (starts[k],))]

    def run(functions, *values):
        given = {}
        for name, value in zip(names, values):
            given.setdefault(name, []).append(float(value))
        given = {k: (v if k == "bracket" else v[0]) for k, v in given.items()}

        def fun(x):
            return tuple(functions[role](x) for role in roles[:returned])
        for name, role, user in (("fprime", "jacobian", fprime),
                                 ("fprime2", "curvature", fprime2)):
            if user is not None:
                given[name] = True if user is True else functions[role]
        result = _optimize().root_scalar(fun if returned > 1 else functions["residual"],
                                         **given, **call)
        if not result.converged:
            raise _not_converged(solver, result.flag)
        return result.root
    solver = _solver("root_scalar", run)
    root = staged.solve("root", solver, flat)
    return _root_results(root, call.get("method") or "root_scalar")


# -- roots of systems -----------------------------------------------------------------------

def fsolve(*args, **kwargs):
    """scipy.optimize.fsolve (MINPACK's hybrd/hybrj)."""
    call = arguments(_optimize().fsolve, args, kwargs)
    func, fprime = call.pop("func"), call.pop("fprime")
    user_args, full_output, x0 = _tupled(call.pop("args")), call.pop("full_output"), \
        call.pop("x0")
    if fprime is not None and call["col_deriv"]:
        raise unsupported_error("scipy.optimize.fsolve(..., fprime=..., col_deriv=True)")
    roles = ("residual",) + (("jacobian",) if fprime is not None else ())

    def together(x, d, a):
        return (func(x, *a),) + ((fprime(x, *a),) if fprime is not None else ())
    staged = StagedSolve(together, roles, _flat_shape_of(x0), user_args)

    def run(functions, x0):
        x, info, ier, message = _optimize().fsolve(
            functions["residual"], x0, fprime=functions.get("jacobian"), **call,
            full_output=True)
        if ier != 1:
            raise _not_converged(solver, message)
        return x
    solver = _solver("fsolve", run)
    x = staged.solve("root", solver, (x0,))
    if full_output:
        return x, {"fvec": staged.value("residual", x)}, 1, "The solution converged."
    return x


def root(*args, **kwargs):
    """scipy.optimize.root, every method; jac may be True (fun returns (F, J))."""
    call = arguments(_optimize().root, args, kwargs)
    fun, jac, x0 = call.pop("fun"), call.pop("jac"), call.pop("x0")
    user_args = _tupled(call.pop("args"))
    roles = ("residual",) + (("jacobian",) if jac is True or callable(jac) else ())

    def together(x, d, a):
        if jac is True:
            return tuple(fun(x, *a))[:2]
        return (fun(x, *a),) + ((jac(x, *a),) if callable(jac) else ())
    staged = StagedSolve(together, roles, _flat_shape_of(x0), user_args)

    def run(functions, x0):
        if jac is True:
            def both(x):
                return functions["residual"](x), functions["jacobian"](x)
            result = _optimize().root(both, x0, jac=True, **call)
        else:
            result = _optimize().root(functions["residual"], x0,
                                      jac=functions.get("jacobian", jac), **call)
        if not result.success:
            raise _not_converged(solver, result.message)
        return result.x
    solver = _solver("root", run)
    x = staged.solve("root", solver, (x0,))
    return _result(x=x, fun=staged.value("residual", x))


def _result(**fields):
    return _optimize().OptimizeResult(success=True, status=0,
                                      message="converged (a failure raises SolverError)",
                                      **fields)


# -- minima ---------------------------------------------------------------------------------

def _concrete_bounds(lower, upper, n, what):
    """Bounds as (lower, upper) tuples of n floats (inf where open)."""
    try:
        lower = np.broadcast_to(np.asarray(lower, np.float64), (n,))
        upper = np.broadcast_to(np.asarray(upper, np.float64), (n,))
    except TypeError:
        raise unsupported_error(f"{what} with traced bounds") from None
    return tuple(float(v) for v in lower), tuple(float(v) for v in upper)


def minimize_scalar(*args, **kwargs):
    """scipy.optimize.minimize_scalar: brent, golden, bounded."""
    call = arguments(_optimize().minimize_scalar, args, kwargs)
    fun, user_args = call.pop("fun"), _tupled(call.pop("args"))
    bracket, bounds = call.pop("bracket"), call.pop("bounds")
    if callable(call.get("method")):
        raise unsupported_error("scipy.optimize.minimize_scalar with a custom method")
    staged = StagedSolve(lambda x, d, a: (fun(x, *a),), ("objective",), (), user_args)
    n_bracket = len(bracket) if bracket is not None else 0
    starts = tuple(bracket or ()) + tuple(bounds or ())

    def run(functions, *values):
        given = {}
        if bracket is not None:
            given["bracket"] = tuple(float(v) for v in values[:n_bracket])
        if bounds is not None:
            given["bounds"] = tuple(float(v) for v in values[n_bracket:])
        result = _optimize().minimize_scalar(functions["objective"], **given, **call)
        if not result.success:
            raise _not_converged(solver, result.message)
        return result.x
    solver = _solver("minimize_scalar", run)
    pinned = None
    if bounds is not None:
        lower, upper = _concrete_bounds(bounds[0], bounds[1], 1, "minimize_scalar")
        # the bounded method stops within its xatol of a bound it converges to
        xatol = (call.get("options") or {}).get("xatol", 1e-5)
        pinned = (lower, upper, 3.0 * xatol)
    x = staged.solve("minimum", solver, starts, pinned)
    return _result(x=x, fun=staged.value("objective", x))


def minimize(*args, **kwargs):
    """scipy.optimize.minimize, every method without constraints (bounds allowed); jac,
    hess and hessp may be the user's functions, jac may be True or a difference scheme."""
    call = arguments(_optimize().minimize, args, kwargs)
    fun, x0, user_args = call.pop("fun"), call.pop("x0"), _tupled(call.pop("args"))
    jac, hess, hessp = call.pop("jac"), call.pop("hess"), call.pop("hessp")
    if call.get("constraints"):
        raise unsupported_error("scipy.optimize.minimize with constraints= (a constrained "
                                "minimum's derivative needs its KKT conditions)")
    if callable(call.get("method")):
        raise unsupported_error("scipy.optimize.minimize with a custom method")
    roles = ["objective"]
    roles += ["gradient"] if jac is True or callable(jac) else []
    roles += ["hessian"] if callable(hess) else []
    roles += ["hessp"] if callable(hessp) else []

    def together(x, d, a):
        if jac is True:
            outs = list(fun(x, *a))
        else:
            outs = [fun(x, *a)] + ([jac(x, *a)] if callable(jac) else [])
        outs += [hess(x, *a)] if callable(hess) else []
        outs += [hessp(x, d, *a)] if callable(hessp) else []
        return tuple(outs)
    staged = StagedSolve(together, roles, _flat_shape_of(x0, "minimize"), user_args)
    n = int(np.prod(staged.shape, dtype=int))

    def run(functions, x0):
        given = {"jac": jac, "hess": hess, "hessp": hessp}
        objective = functions["objective"]
        if jac is True:
            def objective(x):
                return functions["objective"](x), functions["gradient"](x)
        elif callable(jac):
            given["jac"] = functions["gradient"]
        if callable(hess):
            given["hess"] = functions["hessian"]
        if callable(hessp):
            given["hessp"] = functions["hessp"]
        result = _optimize().minimize(objective, x0, **given, **call)
        if not result.success:
            raise _not_converged(solver, result.message)
        return result.x
    solver = _solver("minimize", run)
    pinned = None
    if call.get("bounds") is not None:
        pinned = _minimize_bounds(call["bounds"], n) + (0.0,)
    x = staged.solve("minimum", solver, (x0,), pinned)
    return _result(x=x, fun=staged.value("objective", x))


def _minimize_bounds(bounds, n):
    if isinstance(bounds, _optimize().Bounds):
        return _concrete_bounds(bounds.lb, bounds.ub, n, "minimize")
    pairs = [(-np.inf if lo is None else lo, np.inf if hi is None else hi) for lo, hi in bounds]
    return _concrete_bounds([p[0] for p in pairs], [p[1] for p in pairs], n, "minimize")


# SciPy's robust losses rho(z) of z = (r / f_scale)^2, in numpy (they may meet tracers)
_LOSSES = {"soft_l1": lambda z: 2 * (np.sqrt(1 + z) - 1),
           "huber": lambda z: np.where(z <= 1, z, 2 * np.sqrt(np.maximum(z, 1)) - 1),
           "cauchy": np.log1p, "arctan": np.arctan}


def _robust_cost(residual, loss, f_scale):
    """least_squares' cost 0.5 f_scale^2 sum(rho((r / f_scale)^2)) for a non-linear loss."""
    z = (residual / f_scale) ** 2
    rho = _LOSSES[loss](z) if isinstance(loss, str) else loss(z)[0]
    return 0.5 * f_scale ** 2 * np.sum(rho)


def least_squares(*args, **kwargs):
    """scipy.optimize.least_squares, every loss (a non-linear one: the minimum of its cost);
    bounds allowed."""
    call = arguments(_optimize().least_squares, args, kwargs)
    fun, x0, jac = call.pop("fun"), call.pop("x0"), call.pop("jac")
    user_args, user_kwargs = _tupled(call.pop("args")), call.pop("kwargs") or {}
    loss, f_scale = call["loss"], call["f_scale"]
    if isinstance(loss, str) and loss != "linear" and loss not in _LOSSES:
        raise unsupported_error(f"scipy.optimize.least_squares(..., loss={loss!r})")
    robust = loss != "linear"
    roles = ("residual",) + (("residual jacobian",) if callable(jac) else ()) + \
        (("objective",) if robust else ())

    def together(x, d, a):
        a, kw = a
        residual = fun(x, *a, **kw)
        outs = (residual,) + ((jac(x, *a, **kw),) if callable(jac) else ())
        return outs + ((_robust_cost(residual, loss, f_scale),) if robust else ())
    staged = StagedSolve(together, roles, _flat_shape_of(x0, "least_squares"),
                     (user_args, user_kwargs))
    n = int(np.prod(staged.shape, dtype=int))

    def run(functions, x0):
        given = functions["residual jacobian"] if callable(jac) else jac
        result = _optimize().least_squares(functions["residual"], x0, jac=given, **call)
        if not result.success:
            raise _not_converged(solver, result.message)
        return result.x
    solver = _solver("least_squares", run)
    lower, upper = call["bounds"] if not isinstance(call["bounds"], _optimize().Bounds) \
        else (call["bounds"].lb, call["bounds"].ub)
    lower, upper = _concrete_bounds(lower, upper, n, "least_squares")
    pinned = None if np.all(np.isinf(lower + upper)) else (lower, upper, 1e-10)
    x = staged.solve("minimum" if robust else "least_squares", solver, (x0,), pinned)
    residual = staged.value("residual", x)
    cost = staged.value("objective", x) if robust else 0.5 * np.sum(residual ** 2)
    return _result(x=x, fun=residual, cost=cost)


def _parameter_count(f, p0) -> int:
    """SciPy's count of fit parameters: p0's size, else f's positional arguments after x."""
    if p0 is not None:
        return int(np.size(p0))
    positional = [p for p in inspect.signature(f).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 2:
        raise ValueError("Unable to determine number of fit parameters.")
    return len(positional) - 1


def _fit_covariance(staged, popt, n, absolute_sigma, bounded):
    """curve_fit's pcov at popt, differentiable: the pseudo-inverse of J^T J (J the weighted
    residuals' exact Jacobian, where SciPy's is MINPACK's or a difference scheme's, so the
    two agree to those schemes' accuracy), scaled by the residual variance unless
    `absolute_sigma`; infinite where SciPy's is (a singular fit by 'lm', no more data than
    parameters)."""
    jacobian = staged.jacobian("residual", popt)
    _, singular, vt = np.linalg.svd(jacobian, full_matrices=False)
    threshold = np.finfo(float).eps * max(np.shape(jacobian)) * singular[0]
    kept = singular > threshold
    inverse_squares = np.where(kept, 1 / np.where(kept, singular, 1.0) ** 2, 0.0)
    pcov = (np.swapaxes(vt, 0, 1) * inverse_squares) @ vt
    size = np.shape(jacobian)[0]
    if (not bounded and not np.all(kept)) or (not absolute_sigma and size <= n):
        warnings.warn("Covariance of the parameters could not be estimated",
                      category=_optimize().OptimizeWarning, stacklevel=3)
        return np.full((n, n), np.inf)
    if absolute_sigma:
        return pcov
    return pcov * (np.sum(staged.value("residual", popt) ** 2) / (size - n))


def curve_fit(*args, **kwargs):
    """scipy.optimize.curve_fit with traced data, sigma or a model closing over traced values:
    SciPy's own fit (leastsq for 'lm', least_squares otherwise) of the staged weighted
    residuals, popt differentiated as a least-squares solution; pcov from the residuals'
    exact Jacobian at popt (`_fit_covariance`)."""
    call = arguments(_optimize().curve_fit, args, kwargs)
    f, xdata, ydata, sigma = call.pop("f"), call.pop("xdata"), call.pop("ydata"), \
        call.pop("sigma")
    p0, bounds, jac = call.pop("p0"), call.pop("bounds"), call.pop("jac")
    absolute_sigma, full_output = call.pop("absolute_sigma"), call.pop("full_output")
    options = call.pop("kwargs")
    if call.get("nan_policy") is not None:
        raise unsupported_error("scipy.optimize.curve_fit(..., nan_policy=...) of traced data "
                                "(omitting NaNs changes the data's size)")
    if "args" in options:
        raise ValueError("'args' is not a supported keyword argument.")
    n = _parameter_count(f, p0)
    lower, upper = (bounds.lb, bounds.ub) if isinstance(bounds, _optimize().Bounds) else bounds
    lower, upper = _concrete_bounds(lower, upper, n, "curve_fit")
    bounded = not np.all(np.isinf(lower + upper))
    if p0 is None:      # SciPy's start: a feasible point of the bounds (ones, unbounded)
        p0 = _optimize()._minpack_py._initialize_feasible(np.array(lower), np.array(upper))
    ydata = as_float(ydata)
    if isinstance(xdata, (list, tuple, np.ndarray, Tracer)):
        xdata = as_float(xdata)
    if call.get("check_finite") is not False and not np.all(np.isfinite(ydata)):
        raise ValueError("array must not contain infs or NaNs")
    import scipy.linalg
    transform = None        # SciPy's weights: 1 / sigma, or sigma's Cholesky factor
    if sigma is not None:
        sigma = as_float(sigma)
        if aval(sigma).size == 1 or aval(sigma).shape == (aval(ydata).size,):
            transform = 1.0 / sigma
        elif aval(sigma).shape == (aval(ydata).size,) * 2:
            transform = scipy.linalg.cholesky(sigma, lower=True)
        else:
            raise ValueError("`sigma` has incorrect shape.")

    def weighted(values):
        if transform is None:
            return values
        if np.ndim(transform) == 2:
            return scipy.linalg.solve_triangular(transform, values, lower=True)
        return transform[:, None] * values if np.ndim(values) == 2 else transform * values

    def together(p, d, data):
        x, y = data
        outs = (weighted(f(x, *p) - y),)
        return outs + ((weighted(np.asarray(jac(x, *p))),) if callable(jac) else ())
    roles = ("residual",) + (("residual jacobian",) if callable(jac) else ())
    staged = StagedSolve(together, roles, (n,), (xdata, ydata))

    def run(functions, start):
        def model(_, *p):
            return functions["residual"](np.asarray(p))
        def user_jacobian(_, *p):
            return functions["residual jacobian"](np.asarray(p))
        given = user_jacobian if callable(jac) else jac
        size = np.size(functions["residual"](start))
        try:
            popt, *_ = _optimize().curve_fit(model, np.zeros(size), np.zeros(size), p0=start,
                                             bounds=bounds, jac=given, **call, **options)
        except RuntimeError as error:
            raise _not_converged(solver, str(error)) from None
        return popt
    solver = _solver("curve_fit", run)
    pinned = (lower, upper, 1e-10) if bounded else None
    popt = staged.solve("least_squares", solver, (p0,), pinned)
    pcov = _fit_covariance(staged, popt, n, absolute_sigma, bounded)
    if not full_output:
        return popt, pcov
    return popt, pcov, {"fvec": staged.value("residual", popt)}, "converged", 1


STAND_INS = {"brentq": _bracketing("brentq"), "brenth": _bracketing("brenth"),
             "ridder": _bracketing("ridder"), "bisect": _bracketing("bisect"),
             "newton": newton, "root_scalar": root_scalar, "fsolve": fsolve, "root": root,
             "minimize_scalar": minimize_scalar, "minimize": minimize,
             "least_squares": least_squares, "curve_fit": curve_fit}


def _eager_when_untraced(name, replacement):
    def stand_in(*args, **kwargs):
        try:
            return replacement(*args, **kwargs)
        except NothingTraced:
            # (arrays the staged function made from constants, np.zeros(2), as their values)
            return getattr(_optimize(), name)(*_values_of_constants(args),
                                             **_values_of_constants(kwargs))
    return stand_in


def _values_of_constants(obj):
    kind = type(obj)
    if kind is tuple or kind is list:
        return kind(_values_of_constants(item) for item in obj)
    if kind is dict:
        return {k: _values_of_constants(v) for k, v in obj.items()}
    return with_constants_read(obj)


def _staging(args, kwargs) -> bool:
    # the functions may close over traced values that no argument shows; SciPy's solvers
    # calling each other inside a solve run as they are
    return current_builder() is not None and not solving()


def _install():
    import scipy.optimize
    for name, replacement in STAND_INS.items():
        stand_in(getattr(scipy.optimize, name), _eager_when_untraced(name, replacement),
                 when=_staging)


stand_in_when_imported("scipy.optimize", _install, SCIPY_GROUP)
