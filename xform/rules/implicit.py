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
from xform.ir.execute import runtime
from xform.ir.interpret import eval_graph
from xform.ir.registry import register
from xform.rules.subgraphs import batch_by_loop, stage_flat
from xform.transforms.derived import batch_of, derived_graph, jvp_of, vjp_of

solution_p = Primitive("scipy_solution")
nonsingular_p = Primitive("nonsingular")
hessian_solve_p = Primitive("hessian_solve")

# Above this many unknowns a minimum's theorem step solves with Hessian-vector products
# (MINRES), never forming the n x n Hessian.
DENSE_HESSIAN_MAX = 100

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
        run = runtime().compiled(_output_graph(func, index))

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
        if kind in ("root", "elementwise root"):
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


def _by_hessian_products(kind, bounds, n) -> bool:
    """Whether the theorem's linear system is solved by MINRES on Hessian-vector products."""
    return kind in ("minimum", "least_squares") and bounds is None and n > DENSE_HESSIAN_MAX


def _users_jacobian(kind, roles):
    """The role holding dF/dx as the user gave it to SciPy, or None."""
    given = {"root": "jacobian", "elementwise root": "jacobian", "minimum": "hessian"}.get(kind)
    return given if given in roles else None


def _jacobian(func, roles, kind, x, operands):
    """dF/dx at x as an (n, n) matrix: the user's jacobian (roots) or hessian (minima) when
    SciPy was given one, else the condition's jvp along each basis vector, batched."""
    n = int(np.prod(aval(x).shape, dtype=int))
    given = _users_jacobian(kind, roles)
    if given is not None:
        matrix = eval_graph(func, x, np.zeros(aval(x).shape), *operands)[roles.index(given)]
        return np.reshape(matrix, (n, n))
    condition = _condition(func, roles, kind)
    tangent = jvp_of(condition, (True,) + (False,) * len(operands))
    columns = batch_of(tangent, (NOT_MAPPED,) * (1 + len(operands)) + (0,), n)
    basis = np.reshape(np.eye(n), (n,) + aval(x).shape)
    return np.transpose(eval_graph(columns, x, *operands, basis)[1])


def _diagonal(func, roles, x, operands):
    """dF/dx of an element-wise F (newton on arrays: each element its own scalar equation) as
    the vector of its diagonal: the user's fprime, or one jvp along ones."""
    given = _users_jacobian("elementwise root", roles)
    if given is not None:
        return np.ravel(eval_graph(func, x, np.zeros(aval(x).shape), *operands)[
            roles.index(given)])
    condition = _condition(func, roles, "elementwise root")
    tangent = jvp_of(condition, (True,) + (False,) * len(operands))
    return eval_graph(tangent, x, *operands, np.ones(aval(x).shape))[1]


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
    if kind == "elementwise root":
        diagonal = nonsingular_p.bind(_diagonal(func, roles, x, operands),
                                      solver=params["solver"], diagonal=True)
        return x, np.reshape(-rhs / diagonal, aval(x).shape)
    if _by_hessian_products(kind, params["bounds"], np.size(rhs)):
        x_dot = -hessian_solve_p.bind(rhs, x, *operands, condition=condition,
                                      solver=params["solver"])
        return x, np.reshape(x_dot, aval(x).shape)
    matrix = _jacobian(func, roles, kind, x, operands)
    if params["bounds"] is not None:
        matrix, rhs = _fix_active_bounds(matrix, rhs, x, params["bounds"])
    matrix = nonsingular_p.bind(matrix, solver=params["solver"])
    x_dot = -np.linalg.solve(matrix, rhs)
    return x, np.reshape(x_dot, aval(x).shape)


def _active(x, bounds):
    """Which coordinates of x rest on one of their bounds (None: no bounds)."""
    if bounds is None:
        return None
    lower, upper, atol = bounds
    flat = np.ravel(x)
    return (flat <= np.asarray(lower) + atol) | (flat >= np.asarray(upper) - atol)


def _fix_active_bounds(matrix, rhs, x, bounds):
    """A coordinate on one of its bounds stays there for small moves of the parameters (strict
    complementarity): its row becomes the identity's and its right-hand side zero."""
    active = _active(x, bounds)
    pinned = active[:, None] | active[None, :]
    return np.where(pinned, np.eye(len(active)), matrix), np.where(active, 0.0, rhs)


def _solution_vjp(primals, x, ct, **params):
    """Reverse mode by vjps of the condition only (so a condition without forward mode, such
    as one through an ODE solve, still has a gradient): with J^T lam = ct, the operands'
    cotangents are -lam^T dF/dp."""
    func, roles, kind = params["func"], params["roles"], params["kind"]
    n_starts = params["n_starts"]
    operands = primals[n_starts:]
    differentiable = [is_differentiable(aval(p)) for p in operands]
    if type(ct) is Zero or not any(differentiable):
        return [None] * len(primals)
    condition = _condition(func, roles, kind)
    back = vjp_of(condition)
    flat_ct = np.ravel(ct)
    n = int(np.prod(aval(x).shape, dtype=int))
    if kind == "elementwise root":
        weights = flat_ct / nonsingular_p.bind(_diagonal(func, roles, x, operands),
                                               solver=params["solver"], diagonal=True)
    elif _by_hessian_products(kind, params["bounds"], n):
        weights = hessian_solve_p.bind(flat_ct, x, *operands, condition=condition,
                                       solver=params["solver"])
    else:
        if _users_jacobian(kind, roles) is not None:
            matrix = _jacobian(func, roles, kind, x, operands)
        else:
            rows = batch_of(back, (NOT_MAPPED,) * (1 + len(operands)) + (0,), n)
            matrix = np.reshape(eval_graph(rows, x, *operands, np.eye(n))[0], (n, n))
        active = _active(x, params["bounds"])
        if active is not None:
            matrix, _ = _fix_active_bounds(matrix, flat_ct, x, params["bounds"])
        matrix = nonsingular_p.bind(matrix, solver=params["solver"])
        weights = np.linalg.solve(np.transpose(matrix), flat_ct)
        if active is not None:
            weights = np.where(active, 0.0, weights)
    cts = iter(eval_graph(back, x, *operands, -weights)[1:])   # [0]: x's own
    return [None] * n_starts + [next(cts) if d else None for d in differentiable]


register(solution_p, impl=_solution_impl, abstract_eval=_solution_abstract_eval,
         jvp=_solution_jvp, vjp=_solution_vjp, batch=batch_by_loop(solution_p),
         symbolic_zeros=True)


def _hessian_product(condition, n_operands) -> Graph:
    """(x, *operands, v) -> H v, H the condition's Jacobian (symmetric at a minimum)."""
    tangent = jvp_of(condition, (True,) + (False,) * n_operands)
    return derived_graph(condition, ("hessian product",), lambda: Graph(
        tangent.inputs, tangent.consts, tangent.equations, tangent.outputs[1:]))


def _hessian_solve_impl(rhs, x, *operands, condition, solver):
    """H^-1 rhs by MINRES on Hessian-vector products (H symmetric: no transpose needed)."""
    import scipy.sparse.linalg
    product = runtime().compiled(_hessian_product(condition, len(operands)))
    n = rhs.size
    operator = scipy.sparse.linalg.LinearOperator(
        (n, n), matvec=lambda v: product(x, *operands, np.ravel(v))[0], dtype=np.float64)
    scale = max(float(np.max(np.abs(rhs))), np.finfo(np.float64).tiny)
    solution, info = scipy.sparse.linalg.minres(operator, rhs / scale, rtol=1e-13,
                                                maxiter=20 * n)
    residual = product(x, *operands, solution)[0] - rhs / scale
    if info != 0 or not np.all(np.isfinite(solution)) or \
            np.linalg.norm(residual) > 1e-8 * max(1.0, np.linalg.norm(rhs / scale)):
        raise SolverError(
            f"{solver.name}: the Hessian-vector solve of the implicit derivative failed "
            "(the Hessian is singular or badly conditioned at the minimum)", solver.source,
            "make the minimum strict (a positive definite Hessian)")
    return solution * scale


def _hessian_solve_jvp(primals, tangents, *, condition, solver):
    """d(H^-1 b) = H^-1 (db - dH H^-1 b), dH from H v's jvp in x and the operands."""
    rhs, x, *operands = primals
    solution = hessian_solve_p.bind(rhs, x, *operands, condition=condition, solver=solver)
    moved = [type(t) is not Zero and is_differentiable(aval(p))
             for p, t in zip(primals[1:], tangents[1:])]
    change = tangents[0] if type(tangents[0]) is not Zero else np.zeros(aval(rhs).shape)
    if any(moved):
        product = _hessian_product(condition, len(operands))
        nonzeros = tuple(moved) + (False,)
        inputs = [t for t, m in zip(tangents[1:], moved) if m]
        change = change - eval_graph(jvp_of(product, nonzeros), x, *operands, solution,
                                     *inputs)[1]
    elif type(tangents[0]) is Zero:
        return solution, Zero(aval(solution))
    return solution, hessian_solve_p.bind(change, x, *operands, condition=condition,
                                          solver=solver)


def _hessian_solve_transpose(ct, rhs, x, *operands, condition, solver):
    if type(ct) is Zero:
        return (None,) * (2 + len(operands))
    return (hessian_solve_p.bind(ct, x, *operands, condition=condition, solver=solver),) + \
        (None,) * (1 + len(operands))


register(hessian_solve_p, impl=_hessian_solve_impl,
         abstract_eval=lambda rhs, *others, condition, solver: rhs,
         jvp=_hessian_solve_jvp, transpose=_hessian_solve_transpose,
         batch=batch_by_loop(hessian_solve_p), symbolic_zeros=True)


def _is_singular(matrix, diagonal) -> bool:
    """Numerically singular: a matrix (or stack of them) by its condition number, a
    diagonal (or stack of them) by a zero."""
    if not np.all(np.isfinite(matrix)):
        return True
    if diagonal:
        return bool(np.any(matrix == 0))
    n = matrix.shape[-1]
    return bool(np.any(np.linalg.cond(matrix) * n * np.finfo(np.float64).eps >= 1))


def _nonsingular_impl(matrix, *, solver, diagonal=False):
    """`matrix` itself (a copy), if it is numerically invertible; else a SolverError naming
    the solver at the user's line. With `diagonal`, `matrix` holds a diagonal matrix's
    diagonal (its last axis)."""
    if _is_singular(matrix, diagonal):
        raise SolverError(
            f"{solver.name}: the Jacobian of the solved equations is singular at the "
            "solution, so the solution has no derivative there (implicit function theorem)",
            solver.source, "make the root or minimum isolated (a nonzero derivative of the "
            "residual, a positive definite Hessian), or fix the degenerate parameters")
    return np.array(matrix)


def _nonsingular_batch(size, args, dims, **params):
    return nonsingular_p.bind(move_to_front(args[0], dims[0], size), **params), 0


register(nonsingular_p, impl=_nonsingular_impl,
         abstract_eval=lambda matrix, **params: matrix,
         jvp=lambda primals, tangents, **params: (nonsingular_p.bind(primals[0], **params),
                                                  tangents[0]),
         batch=_nonsingular_batch)


__all__ = ["DENSE_HESSIAN_MAX", "Solver", "hessian_solve_p", "nonsingular_p", "solution_p",
           "solving"]
