"""Primitive families; importing this package registers every rule in `registry.RULES`."""
from xform.rules import (binary, compare, contract, index, linalg, reduce,  # noqa: F401
                         shape, unary)
from xform.rules.registry import RULES, Rules, extend, register, rule_for

__all__ = ["RULES", "Rules", "extend", "register", "rule_for"]
