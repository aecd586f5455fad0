"""Adaptive integrals by SciPy (quad, quad_vec) of a staged integrand: `integral(lower,
upper, *operands)` integrates func(t, *operands) over [lower, upper] on concrete values.
Derivatives differentiate under the integral sign (one more integral, of the integrand's
jvp or vjp) and at the limits (Leibniz's rule: the integrand's value there; an infinite
limit contributes nothing). Each rule emits integrals again, so every order works.
"""
from __future__ import annotations

import warnings

import numpy as np

from xform.ir.ad import Zero, aval
from xform.ir.avals import ShapedArray, is_differentiable
from xform.ir.core import Graph, Primitive
from xform.ir.execute import runtime
from xform.ir.interpret import eval_graph
from xform.ir.registry import register
from xform.rules.subgraphs import batch_by_loop, stage_flat, transpose_from_vjp
from xform.transforms.derived import derived_graph, jvp_of, vjp_of

integral_p = Primitive("integral", multiple_results=True)


def _integral_impl(lower, upper, *operands, func, options, name, source):
    """[value, SciPy's error estimate]; SciPy's warnings (IntegrationWarning) as eagerly."""
    import scipy.integrate
    run = runtime().compiled(func)
    shape = func.outputs[0].aval.shape
    lower, upper = float(lower), float(upper)
    if shape == () and name.endswith(".quad"):
        value, error, *info = scipy.integrate.quad(
            lambda t: float(run(np.float64(t), *operands)[0]), lower, upper,
            full_output=1, **dict(options))
        if len(info) > 1:
            warnings.warn(info[1], scipy.integrate.IntegrationWarning, stacklevel=2)
        return [np.float64(value), np.float64(error)]
    # (a scalar quad's derivatives integrate several values at once: quad_vec, with quad's
    # tolerances, subinterval limit and break points)
    quad_vec_options = {k: v for k, v in options if k not in ("limit", "points") or v}
    value, error = scipy.integrate.quad_vec(lambda t: run(np.float64(t), *operands)[0],
                                            lower, upper, **quad_vec_options)
    return [np.asarray(value, np.float64).reshape(shape), np.float64(error)]


def _integral_abstract_eval(lower, upper, *operands, func, options, name, source):
    return [ShapedArray(func.outputs[0].aval.shape, np.dtype(np.float64)),
            ShapedArray((), np.dtype(np.float64))]


def _at_limit(func, limit, operands):
    """func(limit, *operands), and 0 where the limit is infinite (that limit's term of
    Leibniz's rule vanishes: the integrand must decay there for the integral to exist)."""
    infinite = np.isinf(limit)
    value = eval_graph(func, np.where(infinite, 0.0, limit), *operands)[0]
    return np.where(infinite, 0.0, value)


def _moved(primals, tangents):
    return tuple(type(t) is not Zero and is_differentiable(aval(p))
                 for p, t in zip(primals, tangents))


def _tangent_integrand(func, nonzeros) -> Graph:
    """(t, *operands, *tangents of the moved operands) -> the integrand's tangent."""
    tangent = jvp_of(func, (False,) + nonzeros)
    return derived_graph(func, ("integrand tangent", nonzeros), lambda: Graph(
        tangent.inputs, tangent.consts, tangent.equations, tangent.outputs[1:]))


def _integral_jvp(primals, tangents, **params):
    lower, upper, *operands = primals
    func = params["func"]
    value, error = integral_p.bind(*primals, **params)
    nonzeros = _moved(operands, tangents[2:])
    value_dot = Zero(aval(value))
    if any(nonzeros):
        moved = [t for t, nz in zip(tangents[2:], nonzeros) if nz]
        value_dot = integral_p.bind(lower, upper, *operands, *moved,
                                    **{**params, "func": _tangent_integrand(func, nonzeros)})[0]
    for limit, limit_dot, sign in ((upper, tangents[1], 1.0), (lower, tangents[0], -1.0)):
        if type(limit_dot) is not Zero:
            term = sign * _at_limit(func, limit, operands) * limit_dot
            value_dot = term if type(value_dot) is Zero else value_dot + term
    return [value, error], [value_dot, Zero(aval(error))]


def _cotangent_integrand(func) -> Graph:
    """(t, *operands, ct) -> the cotangents of the differentiable operands, raveled and
    joined in one vector (one integral for all of them)."""
    def cotangents(t, *args):
        *operands, ct = args
        cts = eval_graph(vjp_of(func), t, *operands, ct)[1:]   # [0]: t's
        return np.concatenate([np.ravel(c) for c in cts]) if cts else np.zeros(0)

    def make():
        avals = [v.aval for v in func.inputs] + [func.outputs[0].aval]
        return stage_flat(cotangents, avals)
    return derived_graph(func, ("integrand cotangents",), make)


def _integral_vjp(primals, outs, cts, **params):
    lower, upper, *operands = primals
    func, ct = params["func"], cts[0]
    if ct is None or type(ct) is Zero:
        return [None] * len(primals)
    differentiable = [is_differentiable(aval(p)) for p in operands]
    operand_cts = [None] * len(operands)
    if any(differentiable):
        joined = integral_p.bind(lower, upper, *operands, ct,
                                 **{**params, "func": _cotangent_integrand(func)})[0]
        sizes = [int(np.prod(aval(p).shape, dtype=int)) for p, d in zip(operands, differentiable)
                 if d]
        pieces = iter(np.split(joined, np.cumsum(sizes)[:-1]))
        operand_cts = [np.reshape(next(pieces), aval(p).shape) if d else None
                       for p, d in zip(operands, differentiable)]
    limit_cts = [sign * np.sum(ct * _at_limit(func, limit, operands))
                 if is_differentiable(aval(limit)) else None
                 for limit, sign in ((lower, -1.0), (upper, 1.0))]
    return limit_cts + operand_cts


register(integral_p, impl=_integral_impl, abstract_eval=_integral_abstract_eval,
         jvp=_integral_jvp, vjp=_integral_vjp,
         transpose=transpose_from_vjp(_integral_vjp, _integral_abstract_eval),
         batch=batch_by_loop(integral_p), symbolic_zeros=True)


__all__ = ["integral_p"]
