"""Staging with values: a transform called on concrete arguments computes each equation's
value as it stages it, so that Python may ask a traced value what eager numpy would answer
(`if x > 0:`, `while err > tol:`, `range(n)`, `int(k)`, `max(0.0, x)`). An answer about a
value that depends on the inputs is recorded as a `guard` equation, which checks at run time
that the call takes the same outcome, and raises GuardFailure when it does not: the cache then
runs, or stages, the path of the new outcome (xform.runtime.paths).

Notes: the values decide what is staged; the first run of the staged path takes them instead
of computing them again only where nothing would differ (`staged_values`: no numpy warning
was noted, no effect runs). A random draw's value is drawn from a copy of its generator (the
`speculative_impl` hook), so staging never advances a generator the user holds.
"""
from __future__ import annotations

import copy

import functools
import operator
import os
from contextvars import ContextVar

import numpy as np

from xform.errors import XformError
from xform.ir.ad import NOT_MAPPED, Zero
from xform.ir.core import Literal, Primitive, holds_subgraphs, subgraphs
from xform.ir.registry import graph_has_effects, has_effects, register, top_level_effects


class _NoValue:
    """The value of a Var a staging cannot compute (abstract inputs, an impl that raised)."""

    def __repr__(self):
        return "NO_VALUE"


NO_VALUE = _NoValue()


class GuardKey:
    """Which question a guard answers: the user's line that asked it (`site`), and how many
    times that line asked before in the staging (`nth`: a loop's condition asks once per
    trip). Printed `file.py:12` (`file.py:12#3` for the fourth asking).

    >>> from xform.source_info import SourceInfo
    >>> GuardKey(SourceInfo("/home/me/heat.py", 14, "solve"), 2)
    heat.py:14#2
    """

    __slots__ = ("site", "nth")

    def __init__(self, site, nth):
        self.site, self.nth = site, nth

    def __eq__(self, other):
        return type(other) is GuardKey and other.site == self.site and other.nth == self.nth

    def __hash__(self):
        return hash((self.site, self.nth))

    def __repr__(self):
        if self.site is None:
            return f"?#{self.nth}"
        where = f"{os.path.basename(self.site.filename)}:{self.site.lineno}"
        return where if self.nth == 0 else f"{where}#{self.nth}"


class GuardFailure(Exception):
    """A guard's outcome differs from the one its path was staged with. Internal: the path
    cache catches it (xform.runtime.paths); `outcome` is None when the lanes of a batched
    guard disagree."""

    def __init__(self, key, kind, expected, outcome):
        super().__init__(key, outcome)
        self.key = key
        self.kind = kind
        self.expected = expected
        self.outcome = outcome
        self.site = key.site


_OUTCOMES = {"bool": bool, "int": int, "index": operator.index, "float": float,
             "complex": complex, "hash": lambda value: hash(np.asarray(value).item())}


def _same(expected, outcome) -> bool:
    # nan is the same outcome as nan; 0.0 and -0.0 are not (they print and divide apart)
    if type(expected) is float or type(expected) is complex:
        return (np.array(expected).tobytes() == np.array(outcome).tobytes()
                or (expected != expected and outcome != outcome))
    return expected == outcome


def _lane_outcomes(kind, lanes):
    """The outcome of each lane (a leading axis) of a batched value, as an array."""
    flat = np.reshape(lanes, (np.shape(lanes)[0], -1))
    if flat.shape[1] != 1:
        return None     # the unbatched question was about a size-1 value: never here
    column = flat[:, 0]
    if kind == "bool":
        return column.astype(bool)
    if kind == "int" and column.dtype.kind in "fc":
        return np.trunc(column.real)
    if kind == "hash":
        return np.array([hash(value) for value in column.tolist()])
    return column


class StagingRecord:
    """What one staging of a call (with every staging nested in it) decided, in order:
    `decisions`, a list of (guard key, outcome); and `generators`, id(generator) ->
    (generator, the copy its draws were computed from): the staging never advances a
    generator the user holds."""

    __slots__ = ("decisions", "generators", "values", "dependent", "numpy_warned")

    def __init__(self):
        self.decisions = []
        self.generators = {}
        self.values = None      # the outermost staging's var -> value (`staged_values`)
        # (its vars whose values depend on the call's inputs, its equations)
        self.dependent = ((), ())
        self.numpy_warned = False   # some value raised a floating-point warning, unraised


_record: ContextVar = ContextVar("xform_staging_record", default=None)


class recording_decisions:
    """`with recording_decisions() as record:` collects the decisions (and speculative
    generators) of the stagings inside into `record`, a StagingRecord."""

    __slots__ = ("_token", "record")

    def __enter__(self) -> StagingRecord:
        self.record = StagingRecord()
        self._token = _record.set(self.record)
        return self.record

    def __exit__(self, *exc_info):
        _record.reset(self._token)
        # No staging draws from its copies any more (the record's originals are read on):
        # spares for the next copies
        for _, drawn in self.record.generators.values():
            spares = _SPARE_COPIES.setdefault(generator_kind(drawn), [])
            if len(spares) < 4:
                spares.append(drawn)


# generator_kind -> copies of generators whose stagings ended: a new copy is a spare given
# the state of the generator it copies, not a deep copy (RandomState's costs ~0.3 ms)
_SPARE_COPIES: dict = {}


def generator_kind(generator):
    """What a spare copy of `generator` must be: its type and its bit generator's."""
    bits = getattr(generator, "bit_generator", None) or getattr(generator, "_bit_generator",
                                                                None)
    return type(generator), type(bits)


def spare_copy(kind):
    """A copy of a generator of `kind` that no staging reads, to be given a state; None."""
    spares = _SPARE_COPIES.get(kind)
    try:
        return spares.pop() if spares else None
    except IndexError:      # another thread took the last one
        return None


def note_decision(key, outcome) -> None:
    record = _record.get()
    if record is not None:
        record.decisions.append((key, outcome))


def keep_values(values, equations, dependent) -> None:
    """Offer the values of the outermost staging of the call being recorded, and the
    equations that computed them, to its first run (`staged_values`); `dependent`, the vars
    whose values depend on the call's inputs (`staged_constants`)."""
    record = _record.get()
    if record is not None:
        record.values = (values, _Staged(equations))
        record.dependent = (dependent, equations)


def staged_constants(record: StagingRecord):
    """The values the outermost staging of `record` computed from no input, in the order it
    computed them, then the literals its equations read (None when it computed no values):
    what a function without hidden effects stages alike on every call taking the same path."""
    if record.values is None:
        return None
    dependent, equations = record.dependent
    constants = [value for var, value in record.values[0].items() if var not in dependent]
    constants += [atom.value for eqn in equations for atom in eqn.inputs
                  if type(atom) is Literal]
    return constants


def keep_fused_values(before, after) -> None:
    """Count the equations that fusion (xform.passes.fuse) made of `before`'s, in `after`, as
    computed by the staging being recorded when every equation it took into a region was:
    a region's element-wise equations give the same bits together as alone, so the first run
    takes their values (`staged_values`) instead of generating and compiling the region's code
    to compute them again. (A region holding an equation a pass rewrote is computed again.)"""
    record = _record.get()
    if record is None or record.values is None or after is before:
        return
    staged = record.values[1]
    kept = {id(eqn) for eqn in after.equations}
    if all(eqn in staged for eqn in before.equations if id(eqn) not in kept):
        # only what fusion made: an equation a pass before it rewrote stays computed again
        made = {id(eqn) for eqn in before.equations}
        staged.add(eqn for eqn in after.equations if id(eqn) not in made)


class _Staged:
    """The equations a staging computed, asked by identity (equations compare by value):
    `eqn in staged`, or `id(eqn) in staged.ids` on a hot path. `draws`: the ids of the
    draws among them, which a first run draws again (`staged_values`)."""

    __slots__ = ("ids", "draws", "_equations")

    def __init__(self, equations):
        self._equations = [equations]   # (held: their ids stay theirs)
        self.ids = set(map(id, equations))
        self.draws = ()

    def redrawing(self, draws) -> "_Staged":
        """These equations with the `draws` (ids) taken out of `ids` into `draws`."""
        staged = _Staged(())
        staged._equations = self._equations
        staged.ids = self.ids - draws
        staged.draws = draws & self.ids
        return staged

    def __contains__(self, eqn):
        return id(eqn) in self.ids

    def add(self, equations) -> None:
        """Count `equations` as computed by the staging too."""
        equations = list(equations)
        self._equations.append(equations)
        self.ids.update(map(id, equations))

    def __iter__(self):
        """The equations counted, staging's first, in the order it computed them."""
        for equations in self._equations:
            yield from equations


def staged_values(graph):
    """`(values, equations)` staging computed for the call being recorded, for its first
    run to take instead of computing them again (xform.ir.interpret.concrete_env); None
    where that run must compute them itself: numpy warned while staging (the run raises the
    warnings), or an effect of `graph` is in a sub-graph. A draw at the top level runs again
    (it must advance the user's generator): its staged value was drawn from a copy, and
    where the run draws the same bits, what staging computed from it is taken too
    (`equations.draws`)."""
    record = _record.get()
    if record is None or record.values is None or record.numpy_warned:
        return None
    if not graph_has_effects(graph):
        return record.values
    draws = top_level_effects(graph)
    if draws is None:
        return None
    values, staged = record.values
    return values, staged.redrawing(set(map(id, draws)))


def _numpy_warned(kind, flag) -> None:
    record = _record.get()
    if record is not None:
        record.numpy_warned = True


def _public_noting_warnings():
    state = np.errstate(all="call", call=_numpy_warned)
    state.__enter__()
    return state


def _public_error_state_reset(state):
    state.__exit__(None, None, None)


try:
    # np.errstate(all="call", call=_numpy_warned) without its Python layer, which cost a
    # staged equation ~1.8 us (of ~15): numpy 2 keeps the error state in this context var
    from numpy._core._ufunc_config import _extobj_contextvar
    from numpy._core.umath import _make_extobj

    # (made once per error state it is made from, whose buffer size it keeps: the pair is
    # replaced whole, so that a thread never reads another's half)
    _noting_state = (None, None)

    def _noting_warnings():
        global _noting_state
        current = _extobj_contextvar.get()
        made_from, made = _noting_state
        if made_from is not current:
            made = _make_extobj(all="call", call=_numpy_warned)
            _noting_state = (current, made)
        return _extobj_contextvar.set(made)

    _error_state_reset = _extobj_contextvar.reset
except ImportError:     # another numpy: its public context manager
    _noting_warnings, _error_state_reset = _public_noting_warnings, _public_error_state_reset


def staging_mark():
    """A mark of what the call being staged has recorded so far (its decisions, and the
    state of the generator copies its draws come from), for `forget_after`."""
    record = _record.get()
    if record is None:
        return None
    return len(record.decisions), {key: (original, copy.deepcopy(drawn))
                                   for key, (original, drawn) in record.generators.items()}


def forget_after(mark) -> None:
    """Drop what was recorded after `mark` (staging_mark): a staging thrown away (vmap's
    lane 0, when the lanes decide apart or draw) decided nothing for the path, and its draws
    were not made: the stagings after it draw what the user's generators will draw."""
    record = _record.get()
    if record is not None and mark is not None:
        count, generators = mark
        del record.decisions[count:]
        record.generators.clear()
        record.generators.update(generators)


def has_guards(graph) -> bool:
    """Whether `graph` asks questions about its inputs' values (guard equations), in its
    sub-graphs too (a checkpointed function's `if`), and in the graphs of a callee that
    says it has guards (a custom_jvp or custom_vjp function's call staged on its values)."""
    return any(eqn.primitive is guard_p
               or eqn.params and (holds_subgraphs(eqn.params)
                                  and any(map(has_guards, subgraphs(eqn.params)))
                                  or getattr(eqn.params.get("callee"), "has_guards", bool)())
               for eqn in graph.equations)


def speculative_generators(builder) -> dict:
    """Where a staging's draws take their generators' copies from: the record of the call
    being staged (shared by nested stagings), else the builder's own."""
    record = _record.get()
    return record.generators if record is not None else builder.generator_copies


guard_p = Primitive("guard", multiple_results=True)


def _guard_impl(x, *, key, kind, expected, batched=False):
    if not batched:
        outcome = _OUTCOMES[kind](x)
        if _same(expected, outcome):
            return ()
        raise GuardFailure(key, kind, expected, outcome)
    outcomes = _lane_outcomes(kind, x)
    if outcomes is not None:
        if kind in ("float", "complex") and expected != expected:
            agree = np.isnan(outcomes).all()
        else:
            agree = bool(np.all(outcomes == expected))
        if agree:
            return ()
    raise GuardFailure(key, kind, expected, None)


def _guard_abstract_eval(x, **params):
    return []


def _guard_jvp(primals, tangents, **params):
    if type(tangents[0]) is not Zero and params["kind"] in ("float", "complex"):
        # staging refuses float() of a value a derivative flows through; a guard meeting a
        # tangent would cut that derivative silently. A truth value or an integer is
        # piecewise constant: its derivative is zero, as in eager numpy under autograd.
        raise XformError(f"a derivative flows through {params['kind']}() of a traced value",
                         params["key"].site, "keep the value an array (np.sin instead of "
                         "math.sin, no float()) so that its derivative is not cut")
    return guard_p.bind(primals[0], **params), []


def _guard_batch(size, args, dims, **params):
    x, = args
    if dims[0] is NOT_MAPPED:
        return guard_p.bind(x, **params), []
    return guard_p.bind(np.moveaxis(x, dims[0], 0), **{**params, "batched": True}), []


register(guard_p, impl=_guard_impl, abstract_eval=_guard_abstract_eval, jvp=_guard_jvp,
         batch=_guard_batch, symbolic_zeros=True, kept=True,
         construct="a Python question about a traced value (a guard)")


def compute_values(builder, eqn, rules) -> None:
    """Store the values of the outputs of `eqn`, just staged into `builder`, when every
    input's value is known; mark them dependent on the inputs (and perturbed) as their inputs
    are."""
    values = builder.values
    dependent = builder.dependent
    ins = []
    is_dependent = is_perturbed = False
    for atom in eqn.inputs:
        if type(atom) is Literal:
            ins.append(atom.value)
            continue
        value = values.get(atom, NO_VALUE)
        if value is NO_VALUE:
            return
        ins.append(value)
        if atom in dependent:
            is_dependent = True
            if atom in builder.perturbed and not rules.no_derivative:
                is_perturbed = True
    params = eqn.params
    on_scalars = False
    if rules.effectful or (params and (rules.hooks.inline is not None or holds_subgraphs(params))
                           and _has_effects(eqn)):
        speculate = rules.hooks.speculative_impl
        if speculate is None:   # (a call of a function that draws: its draws are its own)
            return
        is_dependent = True     # a draw differs from call to call
        impl = functools.partial(speculate, speculative_generators(builder))
    else:
        impl = rules.impl
        scalar = rules.scalar_math
        if scalar is not None and scalar.template is not None and scalar.exact and not params:
            kinds = set(map(type, ins))
            if _FLOAT64_OPERANDS.issuperset(kinds):
                # numpy's own scalar arithmetic (the operator the template spells) on
                # np.float64 operands: the ufunc's bits, result type and warnings, without
                # the ufunc's dispatch (~0.5 us of an equation's ~4)
                impl, on_scalars = scalar.function, True
                if np.float64 not in kinds:     # (Python floats alone: Python's operator)
                    ins[0] = np.float64(ins[0])
    # warnings belong to the run of the staged path, which raises them where eager numpy
    # would: here they are noted
    token = _noting_warnings()
    try:
        result = impl(*ins, **params)
    except GuardFailure:
        raise
    except Exception:       # the staged path raises it when it runs, as eager numpy would
        return
    finally:
        _error_state_reset(token)
    if on_scalars and type(result) is not np.float64:
        result = np.float64(result)     # (a library's `function` may give a Python float)
    outs = eqn.outputs
    if len(outs) == 1 and not eqn.primitive.multiple_results:    # (most equations)
        out = outs[0]
        values[out] = result
        if is_dependent:
            dependent.add(out)
            if is_perturbed and out.aval.dtype.kind in "fc":
                builder.perturbed.add(out)
        return
    for var, value in zip(outs, result):
        values[var] = value
    if is_dependent:
        dependent.update(outs)
        if is_perturbed:
            builder.perturbed.update(var for var in outs if var.aval.dtype.kind in "fc")


# Operand types of compute_values' scalar path: a Python float joins np.float64 as numpy's
# promotion joins a weak float
_FLOAT64_OPERANDS = frozenset((np.float64, float))


def _has_effects(eqn) -> bool:
    try:
        return has_effects(eqn)
    except Exception:   # a callee that cannot be staged: then no value is computed either
        return True


def outcome_of(kind, value):
    """What eager numpy answers `kind` ("bool", "int", "index", "float", "complex") of
    `value` (numpy's own error where it raises one)."""
    return _OUTCOMES[kind](value)


__all__ = ["NO_VALUE", "GuardFailure", "GuardKey", "StagingRecord", "compute_values",
           "forget_after", "generator_kind", "guard_p", "has_guards", "staging_mark",
           "keep_fused_values", "keep_values", "note_decision", "outcome_of", "recording_decisions",
           "spare_copy", "speculative_generators", "staged_constants", "staged_values"]
