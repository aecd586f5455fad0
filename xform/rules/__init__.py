"""Primitive families; importing this package registers every rule in `registry.RULES`."""
from xform.rules import (accumulate, binary, call, checkpoint, collectives,  # noqa: F401
                         compare, contract, control_flow, custom, elementwise, fft, implicit,
                         index, interpolate, linalg, linalg_scipy, ode, quadrature, random,
                         reduce, search, shape, signal, sized, special, threaded_map, unary)
from xform.ir.registry import RULES, Rules, extend, register, rule_for

__all__ = ["RULES", "Rules", "extend", "register", "rule_for"]
