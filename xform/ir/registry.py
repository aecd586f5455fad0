"""The one rule table: `RULES[primitive] -> Rules`, how rules get into it, and the traits
passes and codegen read instead of keeping lists of primitives.

Each primitive is registered once with every rule kind and trait it has, by keyword, in the
order impl, abstract_eval, jvp, transpose|vjp, batch, then traits. Library authors extend with
`extend` or the `Primitive.def_*` methods. A primitive with an impl but no batch rule is
batched by a Python loop (`loop_batch`), with a warning once per primitive.
"""
from __future__ import annotations

import warnings
import weakref
from typing import Callable

import attrs

from xform.errors import MissingRuleError, RegistrationError, install_construct_namer
from xform.ir.core import Graph, holds_subgraphs
from xform.source_info import user_frame_info

RULE_KINDS = ("impl", "abstract_eval", "jvp", "transpose", "vjp", "batch", "decomposition")
ZERO_KINDS = ("jvp", "transpose", "vjp")  # the rule kinds that tangents/cotangents reach
# The traits (and the symbolic_zeros flag), declared in `register` next to the rules.
TRAITS = ("elementwise", "scalar_math", "linear_in", "hooks", "construct", "effectful", "kept",
          "no_derivative")


@attrs.frozen
class ScalarMath:
    """How generated code computes a primitive on Python floats (xform.codegen.scalar).

    `function` computes it on floats; `template`, when given, is the same as an expression of
    operand names `{0}`, `{1}` (`"{0} + {1}"`), written inline instead of a call. `exact`: IEEE
    754 rounds it correctly, so it equals numpy bit for bit on every machine (the "exact"
    policy admits it); otherwise the "fast" policy admits it after a self-check. `monotone`:
    for a template, the operand positions where a non-finite operand surely gives a
    non-finite result (the others are checked before they go in). An exact one with a
    template also computes the primitive's value on float64 scalars while staging
    (xform.ir.values.compute_values), without the ufunc's dispatch.

    >>> from xform.ir.registry import ScalarMath
    >>> ScalarMath(lambda a, b: a + b, "{0} + {1}", exact=True, monotone=(0, 1)).exact
    True
    """

    function: Callable
    template: str | None = None
    exact: bool = False
    monotone: tuple = ()


@attrs.frozen(kw_only=True)
class Hooks:
    """How the passes, code generation and transforms treat one primitive beyond its rules
    (each absent by default). Given to `register(..., hooks=Hooks(...))`, or as a dict of
    these names (an unknown name fails there); `hooks_named(name)` collects one per pass.

    fold: `fold(eqn, known) -> replacement or None`, constant folding of a higher-order
        primitive (`known[i]` a value or UNKNOWN; e.g. a cond on a literal predicate).
    dce: `dce(eqn, used_outputs) -> smaller Equation or None`, drops unused outputs of a
        multi-output equation (and what computes only them inside its sub-graphs).
    inline: `inline(eqn) -> callee Graph or None`: the primitive is a call; its body.
    peephole: `peephole(eqn, value_of, producer) -> None | atoms | Equation`, an algebraic
        simplification fold_constants runs to a fixed point (x * 1 -> x).
    in_place: `in_place(*args, **params)`, an impl that may overwrite its first operand,
        which generated code uses when nothing reads that operand afterwards.
    in_place_index: `in_place_index(eqn) -> numpy index or None`, what lets generated code
        write such an update as `x[i] = v` (requires `in_place`).
    in_place_applies: `in_place_applies(eqn) -> bool`, where `in_place` may run only for
        some equations of the primitive (pad_sum: when its first operand is the whole output).
    region: `region(eqn) -> box or None`, the elements of its first operand a view made by the
        equation shows, or an update writes (slice, gather, scatter, pad_sum): a live view
        then blocks only the in-place writes that may touch its box
        (xform.codegen.analyses.writes_in_place, xform.passes.writes).
    arithmetic_derivative: an element-wise primitive whose derivative is arithmetic on the
        values it reads (a sum, a product, a sign, a selection; none, or a linear map): fusing
        it computes no transcendental function once instead of twice, so a large output of it
        is no reason to fuse (xform.passes.fuse).
    takes_floats: its impl takes 0-d float64 operands as Python floats exactly as numpy
        scalars (the scalar path keeps them unconverted).
    speculative_impl: `speculative_impl(generators, *args, **params)`, the impl of an
        effectful primitive run while staging with values, on stand-ins of the generators.
    reverse_by_graph: reverse mode must transpose it as a graph, never compute its
        cotangents at once from values (its rules take sub-graphs).
    draws_once_in_reverse: its reverse mode saves what its body drew, so a body that draws
        is differentiable (checkpoint).
    xla: `xla(*args, **params)`, its lowering written with jax.numpy (xform.codegen.xla);
        without one the equation runs on the host.

    Algebraic traits of a two-input element-wise primitive `op` (or a one-input `f`), each
    the key of rewrites in xform.passes.fold and xform.passes.simplify that a primitive
    declaring it gets:
    identity: the value `e` with `op(x, e)` equal to `x` bit for bit whenever the result has
        x's type (a signed zero is matched with its sign: x + -0.0 is x, x + 0.0 is not
        for x = -0.0; of complex results only a zero, in both parts, as complex addition
        acts part by part); `op(x, e) -> x` (x * 1, x + -0.0, x - 0.0, x ** 1).
    commutative: `op(x, y)` is `op(y, x)` bit for bit: patterns match either operand order.
    casts_operands: `op` casts both operands to its result's type before computing, so an
        operand's weak type changes nothing when the other operand has the result's type:
        `op(g(a, e), y) -> op(a, y)` for a weakly typed `a` and a primitive `g` with
        identity `e` (reverse mode makes `1.0 * a` of a Python float `a`).
    equal_operands: the value of `op(x, x)` for any integer x (x - x = 0).
    inverted_by: for `f`, a one-input primitive `g` with `g(f(x))` equal to x within
        rounding for x >= 0, and `f(x)` nan for x < 0 (exp undoes log):
        `g(f(x)) -> where(x < 0, nan, x) + 0`.

    >>> from xform.ir.registry import Hooks
    >>> Hooks(takes_floats=True).takes_floats
    True
    """

    fold: Callable | None = None
    dce: Callable | None = None
    inline: Callable | None = None
    peephole: Callable | None = None
    in_place: Callable | None = None
    in_place_index: Callable | None = None
    in_place_applies: Callable | None = None
    region: Callable | None = None
    arithmetic_derivative: bool = False
    takes_floats: bool = False
    speculative_impl: Callable | None = None
    reverse_by_graph: bool = False
    draws_once_in_reverse: bool = False
    xla: Callable | None = None
    identity: object = None
    commutative: bool = False
    casts_operands: bool = False
    equal_operands: object = None
    inverted_by: object = None


HOOK_NAMES = tuple(field.name for field in attrs.fields(Hooks))
# The hooks of a primitive that declares none: one shared record (it is frozen), so that the
# hook tables skip such primitives by identity.
NO_HOOKS = Hooks()


def _hooks(given) -> Hooks:
    """`given` (a Hooks or a dict of hook names) as a Hooks; an unknown name fails."""
    if type(given) is Hooks:
        return given
    unknown = set(given) - set(HOOK_NAMES)
    if unknown:
        raise RegistrationError(f"unknown hooks {sorted(unknown)}; the hooks are "
                                f"{', '.join(HOOK_NAMES)} (xform.ir.registry.Hooks)",
                                user_frame_info())
    return Hooks(**given)


def _convention(kind: str, fn: Callable) -> Callable:
    """`fn` called with symbolic zeros instantiated: the convention of a rule that does not
    declare `symbolic_zeros` (as in JAX, such rules see arrays)."""
    from xform.ir.ad import instantiate

    def instantiated(values):
        if type(values) is list or type(values) is tuple:
            return [instantiate(v) for v in values]
        return instantiate(values)
    if kind == "jvp":
        def rule(primals, tangents, **params):
            return fn(primals, instantiated(tangents), **params)
    elif kind == "vjp":
        def rule(primals, outs, cts, **params):
            return fn(primals, outs, instantiated(cts), **params)
    else:
        def rule(cts, *inputs, **params):
            return fn(instantiated(cts), *inputs, **params)
    return rule


@attrs.frozen(eq=False)
class Rules:
    """Every rule and trait of one primitive. A None rule means the rule is absent.

    `decomposition` is the trace-through definition of a primitive that exists only for
    speed (what the "minimal" context stages instead).

    Traits: `symbolic_zeros`, the rule kinds (of ZERO_KINDS) that take symbolic `Zero`
    tangents/cotangents (the others get zero arrays); `elementwise`, it maps equal positions
    of its broadcast inputs to that position of its output (fusible, mappable by
    threaded_map); `scalar_math`, a ScalarMath; `linear_in`, the input positions in which it
    is jointly linear, so reverse mode applies its transpose rule directly when only those
    inputs are differentiable; `hooks`, a `Hooks` record (per-pass behaviour: fold, dce,
    inline, peephole, ...);
    `construct`, for a primitive users never call by name, the construct it implements as
    users know it ("xform.while_loop"), which errors name instead of the primitive;
    `effectful`, running it has an effect (a random draw advances its generator): no pass
    drops, merges, folds or reorders it, and staging emits it even on constants; `kept`,
    it has no outputs but must run (a guard checks the path a call takes): dead-code
    elimination keeps it; `no_derivative`, its outputs carry no derivative of its inputs
    (stop_gradient, floor, sign): `float()` of them cuts nothing.
    `calls[kind]` is the rule as transforms call it (`rule_for`).
    """

    impl: Callable | None = None
    abstract_eval: Callable | None = None
    jvp: Callable | None = None
    transpose: Callable | None = None
    vjp: Callable | None = None
    batch: Callable | None = None
    decomposition: Callable | None = None
    symbolic_zeros: frozenset = attrs.field(default=frozenset(), converter=frozenset)
    elementwise: bool = False
    scalar_math: ScalarMath | None = None
    linear_in: tuple = attrs.field(default=(), converter=tuple)
    hooks: Hooks = attrs.field(default=NO_HOOKS, converter=_hooks)
    construct: str | None = None
    effectful: bool = False
    kept: bool = False
    no_derivative: bool = False
    calls: dict = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self):
        # Decided once here, so that calling a rule costs no check of the flag.
        calls = {}
        for kind in RULE_KINDS:
            fn = getattr(self, kind)
            if fn is not None and kind in ZERO_KINDS and kind not in self.symbolic_zeros:
                fn = _convention(kind, fn)
            calls[kind] = fn
        object.__setattr__(self, "calls", calls)


RULES: dict = {}
_ROLES: dict = {}   # role name -> the primitive passes and codegen know by that role


def _zero_kinds(rules: dict, symbolic_zeros: bool, previous=frozenset()) -> frozenset:
    given = {kind for kind in ZERO_KINDS if kind in rules}
    return frozenset((previous - given) | (given if symbolic_zeros else set()))


def _check_kinds(rules: dict) -> None:
    unknown = set(rules) - set(RULE_KINDS) - set(TRAITS)
    if unknown:
        raise TypeError(f"unknown rule kinds or traits {sorted(unknown)}; known: "
                        f"{RULE_KINDS + TRAITS}")


def register(prim, *, replace: bool = False, symbolic_zeros: bool = False, role=None,
             **rules) -> None:
    """Register every rule and trait of `prim` at once:
    `register(sin_p, impl=np.sin, jvp=..., elementwise=True)`.

    With `symbolic_zeros=True` the jvp, transpose and vjp rules given take symbolic `Zero`
    tangents/cotangents; by default they get zero arrays. `role` names the primitive for the
    passes that emit or recognise it (`primitive_for`).
    """
    if prim in RULES and not replace:
        raise RegistrationError(f"primitive '{prim}' is already registered", user_frame_info(),
                                "pass replace=True to replace its rules, or add rules to it "
                                "with xform.extend.extend(p, ...)")
    _check_kinds(rules)
    added = prim not in RULES and role is None
    RULES[prim] = Rules(**rules, symbolic_zeros=_zero_kinds(rules, symbolic_zeros))
    if role is not None:
        _ROLES[role] = prim
    _changed(RULES[prim] if added else None)


def extend(prim, *, symbolic_zeros: bool = False, **rules) -> None:
    """Add or replace some rules or traits of a primitive (the hooks given replace those
    hooks, the others stay). `symbolic_zeros` applies to the jvp, transpose and vjp rules
    given, as in `register`."""
    _check_kinds(rules)
    old = RULES.get(prim, Rules())
    if "hooks" in rules:
        given = _hooks(rules["hooks"])
        rules["hooks"] = attrs.evolve(old.hooks, **{
            name: getattr(given, name) for name in HOOK_NAMES
            if getattr(given, name) != getattr(NO_HOOKS, name)})
    zero_kinds = _zero_kinds(rules, symbolic_zeros, old.symbolic_zeros)
    RULES[prim] = attrs.evolve(old, **rules, symbolic_zeros=zero_kinds)
    _changed()


def define_rule(prim, kind: str, fn, symbolic_zeros: bool = False) -> None:
    """Set one rule of `prim`: `define_rule(p, "jvp", rule)` (what `p.def_jvp` does)."""
    if kind not in RULE_KINDS:
        raise TypeError(f"unknown rule kind {kind!r}; known: {RULE_KINDS}")
    extend(prim, symbolic_zeros=symbolic_zeros, **{kind: fn})


def primitive_for(role: str):
    """The primitive registered with `role` (e.g. "add"), for passes and codegen that emit
    or recognise it without importing its family.

    >>> from xform.ir.registry import primitive_for
    >>> primitive_for("add")
    add
    """
    try:
        return _ROLES[role]
    except KeyError:
        raise LookupError(f"no primitive is registered with role {role!r}") from None


# -- what is derived from the table, once per change of it --------------------------------------

_derived: dict = {}    # derivation -> its value for the table as it is
_seen_size = [0]       # len(RULES) when _derived was filled: catches direct writes to RULES
_on_change: list = []
_derivations: list = []   # every `derived` function, for derive_all
_reads: dict = {}         # derivation -> the fields of Rules deciding membership (`derived`)


def on_rules_change(callback: Callable[[], None]) -> None:
    """Call `callback()` whenever a registration changes the table (upper layers drop what
    they derived from it)."""
    _on_change.append(callback)


def _changed(added=None) -> None:
    """Drop what was derived from the table; after `added`, the Rules of a primitive just
    registered anew (and no direct write), the tables derived from fields it leaves absent
    stay as they are (SciPy's special functions, registered on a first call, declare no hooks)."""
    kept = {}
    if added is not None and len(RULES) == _seen_size[0] + 1:
        kept = {key: value for key, value in _derived.items() if key in _reads
                and not any(_declared(getattr(added, field)) for field in _reads[key])}
    _derived.clear()
    _derived.update(kept)
    _seen_size[0] = len(RULES)
    _effects_of.clear()
    for callback in _on_change:
        callback()


def _derive(key, compute):
    if len(RULES) != _seen_size[0]:    # written to directly (tests do)
        _seen_size[0] = len(RULES)
        _derived.clear()
    try:
        return _derived[key]
    except KeyError:
        value = _derived[key] = compute()
        return value


def _declared(value) -> bool:
    return value is not None and value is not False and value is not NO_HOOKS


def derived(fn: Callable[[], object] | None = None, *, reads: tuple = ()):
    """`fn()` computed from RULES once, and again only after the table changes. `reads`: the
    fields of `Rules` that decide whether a primitive is in it (where those alone do), so
    that registering a primitive declaring none of them leaves it as it is."""
    if fn is None:
        return lambda fn: derived(fn, reads=reads)

    def value():
        return _derive(fn, fn)
    value.__name__, value.__doc__ = fn.__name__, fn.__doc__
    _derivations.append(value)
    if reads:
        _reads[fn] = reads
    return value


def derive_all() -> None:
    """Compute every `derived` table now. `import xform` does, once every built-in primitive
    is registered: the first calls read them (each some), and a process's first call would
    otherwise make them on its own time, with their code cold."""
    for value in _derivations:
        value()


@derived(reads=("elementwise",))
def elementwise_primitives() -> frozenset:
    """The primitives registered `elementwise=True`."""
    return frozenset(prim for prim, rules in RULES.items() if rules.elementwise)


def is_elementwise(prim) -> bool:
    """Whether `prim` was registered element-wise (fusible, mappable by threaded_map).

    >>> from xform.ir.registry import is_elementwise
    >>> from xform.rules.unary import sin_p
    >>> is_elementwise(sin_p)
    True
    """
    return prim in elementwise_primitives()


@derived(reads=("kept",))
def kept_primitives() -> frozenset:
    """The primitives registered `kept=True`."""
    return frozenset(prim for prim, rules in RULES.items() if rules.kept)


@derived(reads=("effectful",))
def effectful_primitives() -> frozenset:
    """The primitives registered `effectful=True`."""
    return frozenset(prim for prim, rules in RULES.items() if rules.effectful)


def has_effects(eqn) -> bool:
    """Whether running `eqn` has an effect: its primitive is effectful, or a sub-graph in its
    params (a loop body, a call, a branch) holds such an equation."""
    if eqn.primitive in effectful_primitives():
        return True
    if not eqn.params:
        return False
    for value in eqn.params.values():     # xform.ir.core.subgraphs, written out: every
        kind = type(value)                # equation of a fresh gradient's graph is asked
        if kind is Graph:
            if graph_has_effects(value):
                return True
        elif kind is tuple:
            for item in value:
                if type(item) is Graph and graph_has_effects(item):
                    return True
    rules = RULES.get(eqn.primitive)
    if rules is not None and rules.hooks.inline is not None:   # a call: its callee's graph
        callee = rules.hooks.inline(eqn)
        return callee is not None and graph_has_effects(callee)
    return False


@derived(reads=("hooks",))
def call_primitives() -> frozenset:
    """The primitives with an `inline` rule (calls: their callee is a graph)."""
    return frozenset(prim for prim, rules in RULES.items() if rules.hooks.inline is not None)


def graph_has_effects(graph) -> bool:
    """Whether some equation of `graph` (or of its sub-graphs) has an effect (memoized for
    graphs with sub-graphs; a flat graph, such as a gradient's on its first call, is one
    pass, cheaper than the memo's weak references)."""
    effectful = effectful_primitives()
    if not effectful:
        return False
    calls = call_primitives()
    for eqn in graph.equations:
        primitive = eqn.primitive
        if primitive in effectful:
            return True
        if primitive in calls or (eqn.params and holds_subgraphs(eqn.params)):
            break
    else:
        return False
    found = _effects_of.get(graph)
    if found is None:
        _effects_of[graph] = False      # a recursive call reaching it again: not decided here
        found = _effects_of[graph] = any(has_effects(eqn) for eqn in graph.equations)
    return found


_effects_of: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def top_level_effects(graph) -> list | None:
    """The equations of `graph` whose primitive is effectful (its draws), or None when an
    effect is in a sub-graph (a loop body, a branch, a call): what a first call may run in
    place, and what it may not."""
    effectful = effectful_primitives()
    found = []
    for eqn in graph.equations:
        if eqn.primitive in effectful:
            found.append(eqn)
        elif eqn.params and has_effects(eqn):
            return None
    return found


@derived(reads=("scalar_math",))
def scalar_math_rules() -> dict:
    """primitive -> (its impl, its ScalarMath) for the primitives with a scalar_math trait."""
    return {prim: (rules.impl, rules.scalar_math) for prim, rules in RULES.items()
            if rules.scalar_math is not None}


def hooks_named(name: str) -> dict:
    """primitive -> its hook `name` (a field of Hooks), for every primitive that has one (not
    None or False; an identity 0 counts) (ask once per pass).

    >>> from xform.ir.registry import hooks_named, primitive_for
    >>> primitive_for("add") in hooks_named("identity")
    True
    >>> hooks_named("peep_hole")
    Traceback (most recent call last):
    LookupError: no hook named 'peep_hole'; the hooks are fold, dce, inline, peephole, in_place, in_place_index, in_place_applies, region, arithmetic_derivative, takes_floats, speculative_impl, reverse_by_graph, draws_once_in_reverse, xla, identity, commutative, casts_operands, equal_operands, inverted_by
    """
    try:
        return _hook_tables()[name]
    except KeyError:
        raise LookupError(f"no hook named {name!r}; the hooks are {', '.join(HOOK_NAMES)}"
                          ) from None


@derived(reads=("hooks",))
def _hook_tables() -> dict:
    """hook name -> (primitive -> its hook) for every hook (hooks_named's tables): all made
    in one pass over the primitives that declare hooks, since a first call reads several."""
    tables = {name: {} for name in HOOK_NAMES}
    for prim, rules in RULES.items():
        hooks = rules.hooks
        if hooks is NO_HOOKS:
            continue
        for name in HOOK_NAMES:
            value = getattr(hooks, name)
            if value is not None and value is not False:
                tables[name][prim] = value
    return tables


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()  # a value not known at pass time (`known[i]` of a fold hook, peepholes)


def _construct(prim) -> str | None:
    rules = RULES.get(prim)
    return rules.construct if rules is not None else None


install_construct_namer(_construct)


def missing_rule(prim, kind: str, source=None) -> MissingRuleError:
    return MissingRuleError(prim, kind, source)


def rule_for(eqn, kind: str):
    """The `kind` rule of `eqn`'s primitive, or a MissingRuleError naming the user's line.

    A missing batch rule falls back to `loop_batch` when the primitive has an impl.
    """
    rules = RULES.get(eqn.primitive)
    rule = rules.calls[kind] if rules is not None else None
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
    >>> from xform.ir.registry import extend, loop_batch
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
