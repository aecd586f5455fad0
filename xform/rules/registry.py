"""The one rule table: `RULES[primitive] -> Rules`, and how rules get into it.

Each primitive is registered once with every rule kind it has, by keyword, in the order
impl, abstract_eval, jvp, transpose|vjp, batch. Library authors extend with `extend` or the
`Primitive.def_*` methods, which go through `define_rule`.
"""
from __future__ import annotations

from typing import Callable

import attrs

from xform.errors import MissingRuleError

RULE_KINDS = ("impl", "abstract_eval", "jvp", "transpose", "vjp", "batch",
              "fold", "dce", "inline", "pprint", "decomposition")


@attrs.frozen
class Rules:
    """Every rule of one primitive. A None field means the rule is absent.

    `fold(eqn, known) -> replacement or None`, `dce(eqn, used_outputs)` and
    `inline(eqn) -> callee Graph or None` are pass hooks for higher-order primitives (see
    xform.passes); `decomposition` is the trace-through definition of a primitive
    that exists only for speed.
    """

    impl: Callable | None = None
    abstract_eval: Callable | None = None
    jvp: Callable | None = None
    transpose: Callable | None = None
    vjp: Callable | None = None
    batch: Callable | None = None
    fold: Callable | None = None
    dce: Callable | None = None
    inline: Callable | None = None
    pprint: Callable | None = None
    decomposition: Callable | None = None


RULES: dict = {}


def register(prim, *, replace: bool = False, **rules) -> None:
    """Register every rule of `prim` at once: `register(sin_p, impl=np.sin, jvp=...)`."""
    if prim in RULES and not replace:
        raise ValueError(f"primitive '{prim}' is already registered; pass replace=True")
    unknown = set(rules) - set(RULE_KINDS)
    if unknown:
        raise TypeError(f"unknown rule kinds {sorted(unknown)}; known: {RULE_KINDS}")
    RULES[prim] = Rules(**rules)


def extend(prim, **rules) -> None:
    """Add or replace some rules of an already registered primitive."""
    RULES[prim] = attrs.evolve(RULES.get(prim, Rules()), **rules)


def define_rule(prim, kind: str, fn) -> None:
    if kind not in RULE_KINDS:
        raise TypeError(f"unknown rule kind {kind!r}; known: {RULE_KINDS}")
    extend(prim, **{kind: fn})


def missing_rule(prim, kind: str, source=None) -> MissingRuleError:
    return MissingRuleError(prim, kind, source)


def rule_for(eqn, kind: str):
    """The `kind` rule of `eqn`'s primitive, or a MissingRuleError naming the user's line."""
    rules = RULES.get(eqn.primitive)
    rule = getattr(rules, kind) if rules is not None else None
    if rule is None:
        raise missing_rule(eqn.primitive, kind, eqn.source)
    return rule
