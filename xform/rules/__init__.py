"""Primitive families; importing this package registers every rule in `registry.RULES`."""
from xform.rules import binary, compare, reduce, shape, unary  # noqa: F401
from xform.rules.registry import RULES, Rules, extend, register, rule_for

__all__ = ["RULES", "Rules", "extend", "register", "rule_for"]
