"""Primitive families; importing this package registers every rule in `registry.RULES`."""
from xform.rules import (accumulate, binary, call, compare, contract,  # noqa: F401
                         control_flow, custom, elementwise, index, linalg, linalg_scipy,
                         ode, reduce, shape, signal, special, threaded_map, unary)
from xform.ir.rules import RULES, Rules, extend, register, rule_for

__all__ = ["RULES", "Rules", "extend", "register", "rule_for"]
