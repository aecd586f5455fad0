"""Public test helpers for users and library authors: `check_grads`, `check_primitive`,
hypothesis strategies for arrays (`xform.testing.strategies`) and random whole programs
(`programs`)."""
from xform.testing.checks import CheckFailure, check_grads, check_primitive, numerical_jvp

__all__ = ["CheckFailure", "check_grads", "check_primitive", "numerical_jvp"]
try:  # hypothesis is a test dependency: without it the checks above still import
    from xform.testing.programs import Program, programs
    __all__ += ["Program", "programs"]
except ImportError:
    pass
