"""Solutions SciPy's solvers find (roots, minima, least-squares fits) as one primitive,
`solution`: its impl runs the user's solver call on concrete values, on the staged functions
compiled; its jvp is the implicit function theorem. At a solution x* of F(x, p) = 0,
dx* = -F_x^-1 F_p dp, where F is the residual (roots), the objective's gradient (minima) or
J^T r (least squares). The rule emits xform operations only (the condition's derived graphs
and a linear solve), so reverse mode (the jvp linearized and transposed), vmap (one solve per
lane) and second order follow from it.
"""
from __future__ import annotations

import contextvars
from typing import Any, Callable

import attrs
import numpy as np

from xform.errors import SolverError
from xform.ir.ad import NOT_MAPPED, Zero, aval, move_to_front
from xform.ir.avals import ShapedArray, is_differentiable
from xform.ir.core import Graph, Primitive
from xform.ir.execute import compiled
from xform.ir.interpret import eval_graph
from xform.ir.rules import register
from xform.rules.subgraphs import batch_by_loop, stage_flat
from xform.transforms.derived import batch_of, derived_graph, jvp_of, vjp_of

solution_p = Primitive("scipy_solution")
nonsingular_p = Primitive("nonsingular")

# The roles of a staged solver function's outputs (`func`'s outputs, in `roles` order):
# residual F (roots, least squares), objective f (minima), and the user's derivatives that
# SciPy is given: jacobian (dF/dx for roots, the residuals' Jacobian for least squares),
# gradient and hessian (minima), hessp (minima; the one role that reads the direction input).


@attrs.frozen(eq=False)
class Solver:
    """One SciPy solver call as the user wrote it: `run(functions, *starts)` calls SciPy's own
    solver with the user's options on `functions` (role -> Python callable of x, the staged
    functions compiled, operands bound) and returns the solution, or raises SolverError.
    `name` ("scipy.optimize.brentq") and `source` (the user's line) are for errors."""

    name: str
    run: Callable
    source: Any = None

    def __repr__(self) -> str:
        return self.name


_solving = contextvars.ContextVar("xform_solving", default=False)


def solving() -> bool:
    """Whether a solver's impl is running here: SciPy's solvers calling each other
    (root_scalar calls brentq) then run as they are, never staged again."""
    return _solving.get()


def _output_graph(func: Graph, index: int) -> Graph:
    """`func` with its one output `index`, optimized (the rest dropped), memoized."""
    return derived_graph(func, ("solver output", index),
                         lambda: Graph(func.inputs, func.consts, func.equations,
                                       (func.outputs[index],)))


def _callables(func, roles, shape, operands) -> dict:
    """role -> the compiled output as a Python function of x (and, for hessp, a direction)."""
    zero = np.zeros(shape)

    def make(index):
        run = compiled(_output_graph(func, index))

        def call(x, direction=zero):
            x = np.reshape(np.asarray(x, np.float64), shape)
            return run(x, np.reshape(np.asarray(direction, np.float64), shape), *operands)[0]
        return call
    return {role: make(i) for i, role in enumerate(roles)}


def _solution_impl(*args, func, roles, kind, shape, n_starts, solver, bounds):
    functions = _callables(func, roles, shape, args[n_starts:])
    token = _solving.set(True)
    try:
        x = solver.run(functions, *args[:n_starts])
    finally:
        _solving.reset(token)
    return np.array(np.reshape(np.asarray(x, np.float64), shape))


def _solution_abstract_eval(*avals, func, roles, kind, shape, n_starts, solver, bounds):
    return ShapedArray(shape, np.dtype(np.float64))


def _condition(func, roles, kind) -> Graph:
    """F(x, *operands) as a flat vector: zero at the solution (memoized per func)."""
    x_aval = func.inputs[0].aval

    def condition(x, *operands):
        direction = np.zeros(x_aval.shape)
        outs = eval_graph(func, x, direction, *operands)
        if kind == "root":
            value = outs[roles.index("residual")]
        elif kind == "minimum" and "gradient" in roles:
            value = outs[roles.index("gradient")]
        else:
            # the gradient of f, or of 0.5 |r|^2 (least squares): r's vjp with r itself
            source = "objective" if kind == "minimum" else "residual"
            index = roles.index(source)
            live = tuple(i == index for i in range(len(roles)))
            seed = np.ones(x_aval.shape[:0]) if kind == "minimum" else outs[index]
            value = eval_graph(vjp_of(func, live), x, direction, *operands, seed)[0]
        return np.ravel(value)

    def make():
        return stage_flat(condition, [x_aval] + [v.aval for v in func.inputs[2:]])
    return derived_graph(func, ("implicit condition", kind, roles), make)


def _jacobian(func, roles, kind, x, operands):
    """dF/dx at x as an (n, n) matrix: the user's jacobian (roots) or hessian (minima) when
    SciPy was given one, else the condition's jvp along each basis vector, batched."""
    n = int(np.prod(aval(x).shape, dtype=int))
    given = {"root": "jacobian", "minimum": "hessian"}.get(kind)
    if given in roles:
        matrix = eval_graph(func, x, np.zeros(aval(x).shape), *operands)[roles.index(given)]
        if aval(matrix).shape == aval(x).shape and n > 1:
            return np.diag(np.ravel(matrix))   # newton's fprime on arrays: element-wise
        return np.reshape(matrix, (n, n))
    condition = _condition(func, roles, kind)
    tangent = jvp_of(condition, (True,) + (False,) * len(operands))
    columns = batch_of(tangent, (NOT_MAPPED,) * (1 + len(operands)) + (0,), n)
    basis = np.reshape(np.eye(n), (n,) + aval(x).shape)
    return np.transpose(eval_graph(columns, x, *operands, basis)[1])


def _solution_jvp(primals, tangents, **params):
    x = solution_p.bind(*primals, **params)
    func, roles, kind = params["func"], params["roles"], params["kind"]
    operands = primals[params["n_starts"]:]
    nonzeros = tuple(type(t) is not Zero and is_differentiable(aval(p))
                     for p, t in zip(operands, tangents[params["n_starts"]:]))
    if not any(nonzeros):
        return x, Zero(aval(x))
    condition = _condition(func, roles, kind)
    moved = [t for t, nz in zip(tangents[params["n_starts"]:], nonzeros) if nz]
    rhs = eval_graph(jvp_of(condition, (False,) + nonzeros), x, *operands, *moved)[1]
    matrix = _jacobian(func, roles, kind, x, operands)
    if params["bounds"] is not None:
        matrix, rhs = _fix_active_bounds(matrix, rhs, x, params["bounds"])
    matrix = nonsingular_p.bind(matrix, solver=params["solver"])
    x_dot = -np.linalg.solve(matrix, rhs)
    return x, np.reshape(x_dot, aval(x).shape)


def _fix_active_bounds(matrix, rhs, x, bounds):
    """A coordinate on one of its bounds stays there for small moves of the parameters (strict
    complementarity): its row becomes the identity's and its right-hand side zero."""
    lower, upper, atol = bounds
    flat = np.ravel(x)
    active = (flat <= np.asarray(lower) + atol) | (flat >= np.asarray(upper) - atol)
    n = len(lower)
    pinned = active[:, None] | active[None, :]
    return np.where(pinned, np.eye(n), matrix), np.where(active, 0.0, rhs)


register(solution_p, impl=_solution_impl, abstract_eval=_solution_abstract_eval,
         jvp=_solution_jvp, batch=batch_by_loop(solution_p), symbolic_zeros=True)


def _nonsingular_impl(matrix, *, solver):
    """`matrix` itself (a copy), if it is numerically invertible; else a SolverError naming
    the solver at the user's line."""
    n = matrix.shape[-1]
    finite = np.all(np.isfinite(matrix))
    if not finite or np.any(np.linalg.cond(matrix) * n * np.finfo(np.float64).eps >= 1):
        raise SolverError(
            f"{solver.name}: the Jacobian of the solved equations is singular at the "
            "solution, so the solution has no derivative there (implicit function theorem)",
            solver.source, "make the root or minimum isolated (a nonzero derivative of the "
            "residual, a positive definite Hessian), or fix the degenerate parameters")
    return np.array(matrix)


def _nonsingular_batch(size, args, dims, *, solver):
    return nonsingular_p.bind(move_to_front(args[0], dims[0], size), solver=solver), 0


register(nonsingular_p, impl=_nonsingular_impl, abstract_eval=lambda matrix, solver: matrix,
         jvp=lambda primals, tangents, solver: (nonsingular_p.bind(primals[0], solver=solver),
                                                tangents[0]),
         batch=_nonsingular_batch)


__all__ = ["Solver", "nonsingular_p", "solution_p", "solving"]
