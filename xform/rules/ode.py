"""ODE solves by SciPy's solvers (odeint's LSODA, solve_ivp's methods) on a staged right-hand
side: `odeint` runs the forward solve on concrete values, and its vjp, `odeint_adjoint`, a
reverse-time solve of the adjoint system (memory independent of the solver's step count).
"""
from __future__ import annotations

import numpy as np

from xform.errors import UnsupportedError
from xform.ir.ad import NOT_MAPPED, Zero, aval, move_to_front
from xform.ir.avals import ShapedArray, is_differentiable
from xform.ir.core import Primitive
from xform.ir.execute import compiled
from xform.ir.rules import register
from xform.source_info import user_frame_info
from xform.transforms.derived import vjp_of

odeint_p = Primitive("odeint")
odeint_adjoint_p = Primitive("odeint_adjoint", multiple_results=True)


def _solve(rhs, y0, times, method, options):
    """States at `times` (rows) of y' = rhs(y, t) from y0 at times[0], with SciPy."""
    import scipy.integrate
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
    run = compiled(func)
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


# Only reverse mode goes through an ODE solve, once: first derivatives are the fix; a Hessian
# (forward over reverse, or reverse over reverse) has no exact form here.
SECOND_ORDER_HINT = (
    "first derivatives run in reverse mode (the adjoint method): xform.grad, xform.vjp, or "
    "xform.jacrev for a Jacobian; second derivatives (hessian, jvp or jacfwd of a gradient, "
    "grad of grad) do not: take central differences of the gradient, "
    "g = xform.grad(f); H[:, i] = (g(x + h * e_i) - g(x - h * e_i)) / (2 * h)")


def _no_forward_mode(what):
    def jvp(primals, tangents, **params):
        raise UnsupportedError(
            f"forward-mode differentiation (jvp, jacfwd, hessian) through {what}",
            user_frame_info(), SECOND_ORDER_HINT)
    return jvp


def _odeint_vjp(primals, ys, ct, *, func, method, options):
    y0, t, *params = primals
    if type(ct) is Zero:
        return (None,) * len(primals)
    cts = odeint_adjoint_p.bind(ys, t, ct, *params, func=func, method=method, options=options)
    return tuple(c if is_differentiable(aval(p)) else None for c, p in zip(cts, primals))


def _loop_batch(prim):
    """vmap as a loop of solves: each lane is its own adaptive solve."""
    def batch(size, args, dims, **params):
        lanes = [move_to_front(x, d, size) if d is not NOT_MAPPED else None
                 for x, d in zip(args, dims)]
        outs = [prim.bind(*[x if lane is None else lane[i] for x, lane in zip(args, lanes)],
                          **params) for i in range(size)]
        if prim.multiple_results:
            return [np.stack(parts) for parts in zip(*outs)], [0] * len(outs[0])
        return np.stack(outs), 0
    return batch


register(odeint_p, impl=_odeint_impl, abstract_eval=_odeint_abstract_eval,
         jvp=_no_forward_mode("scipy.integrate.odeint / solve_ivp"), vjp=_odeint_vjp,
         batch=_loop_batch(odeint_p), symbolic_zeros=True)


def _adjoint_impl(ys, t, ct, *params, func, method, options):
    """Cotangents of (y0, t, *params), as autograd's odeint computes them: between each pair
    of output times, integrate the state backwards with its adjoint a (a' = -a df/dy) and the
    accumulated parameter and start-time cotangents."""
    run, back = compiled(func), compiled(vjp_of(func))
    differentiable = [is_differentiable(v.aval) for v in func.inputs]
    shape = ys.shape[1:]
    size = int(np.prod(shape, dtype=int))
    param_shapes = [np.shape(p) for p, d in zip(params, differentiable[2:]) if d]
    param_sizes = [int(np.prod(s, dtype=int)) for s in param_shapes]
    n_params = sum(param_sizes)

    def cotangents(y, s, a):
        """(f(y, s), a df/dy, a df/dt, a df/dparams flattened)."""
        value = np.ravel(run(np.reshape(y, shape), np.float64(s), *params)[0])
        outs = iter(back(np.reshape(y, shape), np.float64(s), *params, np.reshape(a, shape)))
        grads = [np.ravel(next(outs)) if d else None for d in differentiable]
        ct_y = grads[0] if grads[0] is not None else np.zeros(size)
        ct_s = float(np.sum(grads[1])) if grads[1] is not None else 0.0
        flat = [g for g in grads[2:] if g is not None]
        return value, ct_y, ct_s, np.concatenate(flat) if flat else np.zeros(0)

    def augmented(state, s):
        y, a = state[:size], state[size:2 * size]
        value, ct_y, ct_s, ct_p = cotangents(y, s, -a)
        return np.concatenate([value, ct_y, [ct_s], ct_p])

    ys = np.reshape(np.asarray(ys, np.float64), (len(t), size))
    ct = np.reshape(np.asarray(ct, np.float64), (len(t), size))
    t = np.asarray(t, np.float64)
    ct_y, ct_t0, ct_p = ct[-1].copy(), 0.0, np.zeros(n_params)
    ct_t = np.zeros(len(t))
    for i in range(len(t) - 1, 0, -1):
        ct_t[i] = float(np.dot(cotangents(ys[i], t[i], np.zeros(size))[0], ct[i]))
        ct_t0 -= ct_t[i]
        start = np.concatenate([ys[i], ct_y, [ct_t0], ct_p])
        end = start if t[i] == t[i - 1] else \
            _solve(augmented, start, np.array([t[i], t[i - 1]]), method, options)[-1]
        ct_y = end[size:2 * size] + ct[i - 1]
        ct_t0, ct_p = end[2 * size], end[2 * size + 1:]
    ct_t[0] = ct_t0
    pieces = np.split(ct_p, np.cumsum(param_sizes)[:-1]) if param_sizes else []
    param_cts = iter(np.reshape(piece, s) for piece, s in zip(pieces, param_shapes))
    out_params = [next(param_cts) if d else np.zeros(np.shape(p))
                  for p, d in zip(params, differentiable[2:])]
    return [np.reshape(ct_y, shape), ct_t] + out_params


def _adjoint_abstract_eval(ys, t, ct, *params, func, method, options):
    f64 = np.dtype(np.float64)
    return [ShapedArray(ys.shape[1:], f64), ShapedArray(t.shape, f64)] + \
        [ShapedArray(p.shape, f64) for p in params]


def _adjoint_vjp(primals, outs, cts, **params):
    raise UnsupportedError("second derivatives through scipy.integrate.odeint / solve_ivp",
                           user_frame_info(), SECOND_ORDER_HINT)


register(odeint_adjoint_p, impl=_adjoint_impl, abstract_eval=_adjoint_abstract_eval,
         jvp=_no_forward_mode("the gradient of scipy.integrate.odeint / solve_ivp"),
         vjp=_adjoint_vjp, batch=_loop_batch(odeint_adjoint_p), symbolic_zeros=True)


__all__ = ["odeint_adjoint_p", "odeint_p"]
