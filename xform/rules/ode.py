"""ODE solves by SciPy's solvers (odeint's LSODA, solve_ivp's methods) on a staged right-hand
side: `odeint` runs the solve on concrete values; its jvp solves the tangent with the state
(forward sensitivities), its vjp the adjoint system backwards in time (memory independent of
the solver's step count). Both rules emit `odeint` equations again, so every order works.
"""
from __future__ import annotations

import numpy as np

from xform.ir.ad import NOT_MAPPED, Zero, aval, instantiate
from xform.ir.avals import ShapedArray, is_differentiable, tangent_aval
from xform.ir.core import Graph, Primitive
from xform.ir.execute import runtime
from xform.ir.interpret import eval_graph
from xform.ir.registry import register
from xform.rules.subgraphs import batch_by_loop, stage_flat
from xform.transforms.derived import batch_of, derived_graph, jvp_of, vjp_of

odeint_p = Primitive("odeint")


def _solve(rhs, y0, times, method, options):
    """States at `times` (rows) of y' = rhs(y, t) from y0 at times[0], with SciPy."""
    import scipy.integrate
    if times[0] == times[-1]:        # a segment of no length (repeated output times)
        return np.repeat(y0[None], len(times), 0)
    if method == "odeint":
        return scipy.integrate.odeint(rhs, y0, times, **dict(options))
    # solve_ivp wants distinct output times: repeated ones share a row
    distinct = np.concatenate([[True], np.diff(times) != 0])
    result = scipy.integrate.solve_ivp(lambda s, y: rhs(y, s), (times[0], times[-1]), y0,
                                       method=method, t_eval=times[distinct],
                                       **dict(options))
    if not result.success:
        raise RuntimeError(f"scipy.integrate.solve_ivp failed: {result.message}")
    return result.y.T[np.cumsum(distinct) - 1]


def _odeint_impl(y0, t, *params, func, method, options):
    run = runtime().compiled(func)
    shape = np.shape(y0)

    def rhs(y, s):
        return np.ravel(run(np.reshape(y, shape), np.float64(s), *params)[0])
    ys = _solve(rhs, np.ravel(y0).astype(np.float64), np.asarray(t, np.float64), method,
                options)
    return np.reshape(ys, (len(t),) + shape)


def _odeint_abstract_eval(y0, t, *params, func, method, options):
    if t.ndim != 1:
        raise ValueError(f"odeint: t must be one-dimensional, got shape {t.shape}")
    return ShapedArray((t.shape[0],) + y0.shape, np.dtype(np.float64))


def _moved(primals, tangents):
    return tuple(type(t) is not Zero and is_differentiable(aval(p))
                 for p, t in zip(primals, tangents))


def _rhs_at(func, ys, t, params):
    """The right-hand side at every output time: func(ys[i], t[i], *params), batched."""
    size = aval(t).shape[0]
    batched = batch_of(func, (0, 0) + (NOT_MAPPED,) * len(params), size)
    return eval_graph(batched, ys, t, *params)[0]


def _tangent_system(func, nonzeros) -> Graph:
    """The state and its tangent together, z = (y, y_dot): z' = (f, f_y y_dot + f_p p_dot),
    a graph of (z, s, *params, *moved params' tangents) (memoized per func)."""
    def joint(z, s, *rest):
        params, dots = rest[:len(nonzeros)], rest[len(nonzeros):]
        outs = eval_graph(jvp_of(func, (True, False) + nonzeros), z[0], s, *params, z[1],
                          *dots)
        return np.stack([outs[0], outs[1]])

    def make():
        y, s, *params = [v.aval for v in func.inputs]
        moved = [tangent_aval(a) for a, nz in zip(params, nonzeros) if nz]
        return stage_flat(joint, [ShapedArray((2,) + y.shape, y.dtype), s] + params + moved)
    return derived_graph(func, ("ode tangent system", nonzeros), make)


def _odeint_jvp(primals, tangents, *, func, method, options):
    """Forward sensitivities: the tangent solved with the state (one solve of twice the
    size; its own error control, so tangents are as accurate as the tolerances); a moved
    output time adds f there, a moved start time removes f(y0) from the start."""
    y0, t, *params = primals
    y0_dot, t_dot, *param_dots = tangents
    ys = odeint_p.bind(y0, t, *params, func=func, method=method, options=options)
    nonzeros = _moved(params, param_dots)
    moved_t = type(t_dot) is not Zero
    if not (any(nonzeros) or type(y0_dot) is not Zero or moved_t):
        return ys, Zero(aval(ys))
    start = instantiate(y0_dot) if type(y0_dot) is not Zero else np.zeros(aval(y0).shape)
    if moved_t:
        start = start - eval_graph(func, y0, t[0], *params)[0] * t_dot[0]
    moved = [d for d, nz in zip(param_dots, nonzeros) if nz]
    both = odeint_p.bind(np.stack([y0 + np.zeros(aval(start).shape), start]), t, *params,
                         *moved, func=_tangent_system(func, nonzeros), method=method,
                         options=options)
    ys_dot = both[:, 1]
    if moved_t:
        rates = _rhs_at(func, ys, t, params)
        ys_dot = ys_dot + rates * np.reshape(t_dot, (-1,) + (1,) * (aval(ys).ndim - 1))
    return ys, ys_dot


def _adjoint_system(func) -> Graph:
    """The adjoint method's augmented state (y, a, a_t, a_p), solved backwards in time:
    (y, a, a_t, a_p)' = (f, -a f_y, -a f_t, -a f_p) (autograd's odeint's system), a graph of
    (state, s, *params) (memoized per func)."""
    y_aval, s_aval, *param_avals = [v.aval for v in func.inputs]
    shape, size = y_aval.shape, int(np.prod(y_aval.shape, dtype=int))

    def system(state, s, *params):
        y = np.reshape(state[:size], shape)
        a = np.reshape(state[size:2 * size], shape)
        value = eval_graph(func, y, s, *params)[0]
        cts = eval_graph(vjp_of(func), y, s, *params, -a)     # y's, s's, the params'
        return np.concatenate([np.ravel(value)] + [np.ravel(c) for c in cts])

    def make():
        n_params = sum(int(np.prod(a.shape, dtype=int)) for a in param_avals
                       if is_differentiable(a))
        state = ShapedArray((2 * size + 1 + n_params,), np.dtype(np.float64))
        return stage_flat(system, [state, s_aval] + param_avals)
    return derived_graph(func, ("ode adjoint system",), make)


def _odeint_vjp(primals, ys, ct, *, func, method, options):
    """The adjoint method: between consecutive output times, one backward solve (SciPy's
    solver, an odeint equation) of the state with its adjoint and the accumulated time and
    parameter cotangents; memory independent of the solver's steps. Made of odeint equations
    and numpy, so it has forward mode and reverse mode itself (second order)."""
    y0, t, *params = primals
    if type(ct) is Zero:
        return [None] * len(primals)
    differentiable = [is_differentiable(aval(p)) for p in params]
    shape = aval(y0).shape
    size = int(np.prod(shape, dtype=int))
    sizes = [int(np.prod(aval(p).shape, dtype=int)) for p, d in zip(params, differentiable)
             if d]
    system = _adjoint_system(func)
    n_times = aval(t).shape[0]
    ct_y, ct_t0, ct_p = ct[-1], np.zeros(()), np.zeros(sum(sizes))
    ct_t = [None] * n_times
    rates = _rhs_at(func, ys, t, params)
    for i in range(n_times - 1, 0, -1):
        ct_t[i] = np.sum(rates[i] * ct[i])
        ct_t0 = ct_t0 - ct_t[i]
        start = np.concatenate([np.ravel(ys[i]), np.ravel(ct_y), np.reshape(ct_t0, (1,)),
                                ct_p])
        end = odeint_p.bind(start, np.stack([t[i], t[i - 1]]), *params, func=system,
                            method=method, options=options)[-1]
        ct_y = np.reshape(end[size:2 * size], shape) + ct[i - 1]
        ct_t0, ct_p = end[2 * size], end[2 * size + 1:]
    ct_t[0] = ct_t0
    pieces = iter(np.split(ct_p, np.cumsum(sizes)[:-1]) if sizes else [])
    param_cts = [np.reshape(next(pieces), aval(p).shape) if d else None
                 for p, d in zip(params, differentiable)]
    return [ct_y, np.stack(ct_t)] + param_cts


register(odeint_p, impl=_odeint_impl, abstract_eval=_odeint_abstract_eval, jvp=_odeint_jvp,
         vjp=_odeint_vjp, batch=batch_by_loop(odeint_p), symbolic_zeros=True)


__all__ = ["odeint_p"]
