"""The one rule table: `RULES[primitive] -> Rules`, and how rules get into it.

Each primitive is registered once with every rule kind it has, by keyword, in the order
impl, abstract_eval, jvp, transpose|vjp, batch. Library authors extend with `extend` or the
`Primitive.def_*` methods, which go through `define_rule`. A primitive with an impl but no
batch rule is batched by a Python loop (`loop_batch`), with a warning once per primitive.
"""
from __future__ import annotations

import warnings
from typing import Callable

import attrs

from xform.errors import MissingRuleError

RULE_KINDS = ("impl", "abstract_eval", "jvp", "transpose", "vjp", "batch",
              "fold", "dce", "inline", "decomposition")


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
    """Set one rule of `prim`: `define_rule(p, "jvp", rule)` (what `p.def_jvp` does)."""
    if kind not in RULE_KINDS:
        raise TypeError(f"unknown rule kind {kind!r}; known: {RULE_KINDS}")
    extend(prim, **{kind: fn})


def missing_rule(prim, kind: str, source=None) -> MissingRuleError:
    return MissingRuleError(prim, kind, source)


def rule_for(eqn, kind: str):
    """The `kind` rule of `eqn`'s primitive, or a MissingRuleError naming the user's line.

    A missing batch rule falls back to `loop_batch` when the primitive has an impl.
    """
    rules = RULES.get(eqn.primitive)
    rule = getattr(rules, kind) if rules is not None else None
    if rule is None:
        if kind == "batch" and rules is not None and rules.impl is not None:
            _warn_loop_batch(eqn)
            return loop_batch(eqn.primitive)
        raise missing_rule(eqn.primitive, kind, eqn.source)
    return rule


class LoopBatchWarning(UserWarning):
    """vmap runs a primitive without a batch rule once per example (see `loop_batch`)."""


_LOOP_WARNED: set = set()


def _warn_loop_batch(eqn) -> None:
    if eqn.primitive in _LOOP_WARNED:
        return
    _LOOP_WARNED.add(eqn.primitive)
    message = (f"primitive '{eqn.primitive}' has no batch rule: vmap runs it once per example "
               f"in a Python loop; define p.def_batch(...) to make it fast")
    if eqn.source is None:
        warnings.warn(message, LoopBatchWarning, stacklevel=2)
    else:
        warnings.warn_explicit(message, LoopBatchWarning, eqn.source.filename,
                               eqn.source.lineno)


def loop_batch(prim):
    """Batch rule of any primitive: bind it once per example and stack the results.

    Correct for every primitive with an impl and differentiable through its own rules, but
    the staged graph grows with the batch size: define a real batch rule where speed matters.
    >>> from xform.ir.rules import extend, loop_batch
    >>> p = xform.Primitive("my_sinc")
    >>> _ = p.def_impl(np.sinc); _ = p.def_abstract_eval(lambda x: x)
    >>> extend(p, batch=loop_batch(p))    # what vmap falls back to, without the warning
    >>> xform.vmap(p.bind)(np.zeros(2))    # p.bind once per example
    array([1., 1.])
    """
    import numpy as np

    from xform.ir.ad import NOT_MAPPED

    def rule(size, args, dims, **params):
        per_example = []
        for i in range(size):
            example = [x if d is NOT_MAPPED else np.take(x, i, axis=d)
                       for x, d in zip(args, dims)]
            outs = prim.bind(*example, **params)
            per_example.append(list(outs) if prim.multiple_results else [outs])
        stacked = [np.stack(list(outs)) for outs in zip(*per_example)]
        if prim.multiple_results:
            return stacked, [0] * len(stacked)
        return stacked[0], 0
    return rule
