"""Public test helpers for users and library authors: `check_grads`, `check_primitive`, and
hypothesis strategies for arrays (`xform.testing.strategies`)."""
from xform.testing.checks import CheckFailure, check_grads, check_primitive, numerical_jvp

__all__ = ["CheckFailure", "check_grads", "check_primitive", "numerical_jvp"]
