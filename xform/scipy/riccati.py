"""scipy.linalg's algebraic Riccati solvers on tracers (solve_discrete_are,
solve_continuous_are: an LQR gain's P): SciPy's own solver runs on the call's values, and its
solution is differentiated by the implicit function theorem in the Riccati equation, as
scipy.optimize's roots are (xform/rules/implicit.py), in every matrix and to any order.
"""
from __future__ import annotations

import numpy as np

from xform.errors import unsupported_error
from xform.ir.ad import aval
from xform.numpy.construct import staged_array
from xform.numpy.stand_ins import stand_in, stand_in_when_imported
from xform.rules.implicit import Solver
from xform.scipy import SCIPY_GROUP
from xform.scipy.optimize import NothingTraced, StagedSolve
from xform.source_info import user_frame_info


def _discrete_residual(p, a, b, q, r):
    """A'PA - P - A'PB (R + B'PB)^-1 B'PA + Q."""
    gain = np.linalg.solve(r + b.T @ p @ b, b.T @ p @ a)
    return a.T @ p @ a - p - (a.T @ p @ b) @ gain + q


def _continuous_residual(p, a, b, q, r):
    """A'P + PA - PB R^-1 B'P + Q."""
    return a.T @ p + p @ a - p @ b @ np.linalg.solve(r, b.T @ p) + q


def _riccati(name, residual):
    def solve(a, b, q, r, e=None, s=None, balanced=True):
        import scipy.linalg
        if e is not None or s is not None:
            raise unsupported_error(f"scipy.linalg.{name}(..., e=..., s=...)")
        matrices = tuple(np.atleast_2d(staged_array(m)) for m in (a, b, q, r))
        n = aval(matrices[0]).shape[0]

        def together(x, direction, operands):
            return (residual(x.reshape(n, n), *operands).ravel(),)

        def run(functions, *values):
            return getattr(scipy.linalg, name)(*values, balanced=balanced).ravel()
        try:
            staged = StagedSolve(together, ("residual",), (n * n,), matrices)
            # the matrices' values are SciPy's starting point: the solution's derivative
            # comes from the residual's operands, the same matrices
            solution = staged.solve("root", Solver(f"scipy.linalg.{name}", run,
                                                   user_frame_info()), matrices)
        except NothingTraced:
            return getattr(scipy.linalg, name)(a, b, q, r, balanced=balanced)
        return solution.reshape(n, n)
    solve.__name__ = name
    solve.__doc__ = (f"scipy.linalg.{name}: SciPy's solution, differentiated through the "
                     f"Riccati equation ({residual.__doc__})")
    return solve


solve_discrete_are = _riccati("solve_discrete_are", _discrete_residual)
solve_continuous_are = _riccati("solve_continuous_are", _continuous_residual)


def _install():
    import scipy.linalg
    for function in (solve_discrete_are, solve_continuous_are):
        stand_in(getattr(scipy.linalg, function.__name__), function)


stand_in_when_imported("scipy.linalg", _install, SCIPY_GROUP)
