"""Reverse mode: `vjp_graph(graph)` computes outputs and input cotangents in one graph, and
`split_graph` cuts such a graph into a forward part (outputs + residuals) and a backward part.

Per equation, reverse mode uses the primitive's direct vjp rule when it has one, else it
linearizes the equation with its jvp rule and transposes that small linear graph.
"""
from __future__ import annotations

import numpy as np
# (names read per equation: numpy's module __getattr__ keeps CPython 3.11 from specializing
# `np.name` reads, which then cost twice a global's)
from numpy import float64, ndarray

from xform.errors import RuleError, UnsupportedError, construct_of
from xform.ir.avals import is_differentiable, tangent_aval
from xform.ir.builder import (GraphBuilder, bind, current_builder, enter_source_scope,
                              leave_source_scope, source_scope, using_builder)
from xform.ir.core import Graph, Literal
from xform.ir.interpret import StagedRegions, concrete_env, emit_equations, first_call_regions
from xform.ir.ad import (Undefined, Zero, add_tangents, aval, check_rule_outputs, fit_tangent,
                         instantiate, zero_tangent, zeros)
from xform.ir.registry import (RULES, derived, effectful_primitives, graph_has_effects,
                               has_effects, rule_for, top_level_effects)
from xform.ir.tracer import Tracer
from xform.transforms.transpose import backward_pass


def vjp_graph(graph, live=None, wanted=None, kept=None, seed_ones=False, adopt=False):
    """Inputs: primals, then one cotangent per differentiable output. Outputs: the primal
    outputs, then one cotangent per differentiable input (zeros where there is no path).

    The one builder of reverse-mode graphs, so its options serve the api and derived graphs:
    only the `live` outputs (default: the differentiable ones) get a cotangent input, only
    the differentiable inputs among `wanted` (default: all) a gradient, only the outputs at
    indices `kept` (default: all) are returned. With `seed_ones`, the live outputs'
    cotangents are 1 (a gradient) rather than inputs. With `adopt`, the new graph's inputs
    are `graph`'s own Vars and its forward pass is `graph`'s equations as they are (no
    re-emitting: the fast path of a gradient of a graph just staged).

    >>> print(xform.vjp_graph(xform.make_graph(np.sin)(1.0)))    # inputs: primal a, cotangent b
    { lambda a:~f64[] b:f64[] . let
        c:f64[] = sin a
        d:f64[] = cos a
        e:f64[] = multiply b d
      in (c, e) }
    """
    live, wanted, kept = _options(graph, live, wanted, kept)
    builder = GraphBuilder()
    with using_builder(builder):
        ins = (builder.adopt_inputs(graph) if adopt
               else [builder.new_input(v.aval) for v in graph.inputs])
        cts = [None if seed_ones else builder.new_input(tangent_aval(a.aval)) if is_live
               else None for a, is_live in zip(graph.outputs, live)]
        outs, cts_in = vjp_eval(graph, ins, _seeds(graph, live, cts))
        grads = [instantiate(cts_in[i]) for i in wanted
                 if is_differentiable(graph.inputs[i].aval)]
    return builder.build([outs[i] for i in kept] + grads)


def gradient_values(graph, args, live=None, wanted=None, kept=None, known=None) -> list:
    """What `vjp_graph(graph, live, wanted, kept, seed_ones=True)` computes on concrete `args`,
    computed at once and no graph built: the forward pass by each primitive's impl, then the
    same rules as vjp_graph's on concrete values, whose operations then run eagerly, as
    autograd's do (the first call of a gradient, xform.runtime.tiers). Must run outside any
    staging, on a graph `computable_at_once`. `known`: the forward values staging computed
    already (xform.ir.interpret.concrete_env)."""
    live, wanted, kept = _options(graph, live, wanted, kept)
    env = concrete_env(graph, args, known)
    token = None if known is None else first_call_regions.set(StagedRegions(graph, env, known))
    try:
        # (no effect is differentiated, none is in a sub-graph: the graph is computable_at_once)
        ct_env = _backward(graph, env, _seeds(graph, live), _depending_on(graph, wanted),
                           effects=False)
    finally:
        if token is not None:
            first_call_regions.reset(token)
    results = []
    outputs, inputs = graph.outputs, graph.inputs
    for i in kept:
        atom = outputs[i]
        results.append(atom.value if type(atom) is Literal else env[atom])
    for i in wanted:
        var = inputs[i]
        if var.aval.dtype.kind in "fc":     # (differentiable)
            ct = ct_env.get(var)
            results.append(zeros(tangent_aval(var.aval)) if ct is None else ct)
    return results


def _depending_on(graph, wanted) -> set:
    """The vars of `graph` that depend on its differentiable inputs at indices `wanted`: the
    only ones whose cotangents a gradient reads (vjp_graph leaves the others to dead-code
    elimination; computed at once, they would be computed, e.g. a data matrix's)."""
    inputs = graph.inputs
    active = set()
    for i in wanted:
        if inputs[i].aval.dtype.kind in "fc":     # (differentiable)
            active.add(inputs[i])
    for eqn in graph.equations:
        # (Literals compare by identity: never among the active Vars)
        if not active.isdisjoint(eqn.inputs):
            active.update(eqn.outputs)
    return active


def computable_at_once(graph, wanted=None) -> bool:
    """Whether gradient_values may compute `graph`'s gradient (with vjp_graph's `wanted`):
    not when some of its reverse mode must be pruned as a graph before it runs. A random
    draw's cotangent in its parameters raises only if a gradient reads it (dead-code
    elimination drops it otherwise), so a draw is computed at once only at the top level and
    when nothing it reads depends on a `wanted` input (then it runs in its place in the
    forward pass and is never differentiated); and a threaded_map's vjp computes every mapped
    input's cotangent (e.g. of a dask array's rows), of which only those read are kept. And
    not when a primitive has no impl: building the graph names the missing rule a gradient
    needs first (a jvp or vjp), as the compiled tier does."""
    kinds = _at_once_kinds()
    with_params = draws = False
    for eqn in graph.equations:
        kind = kinds.get(eqn.primitive) or _at_once_kind(eqn.primitive)
        if kind != "run":
            if kind != "draw" or wanted is None:
                return False
            draws = True
        with_params = with_params or bool(eqn.params)
    if draws:
        return _draws_computable_at_once(graph, wanted)
    # No effectful primitive at the top level: only a sub-graph (in params) can hold one.
    return not (with_params and graph_has_effects(graph))


def _draws_computable_at_once(graph, wanted) -> bool:
    """computable_at_once's answer for a graph with effects at its top level."""
    draws = top_level_effects(graph)
    if draws is None:
        return False
    active = _depending_on(graph, wanted)
    for eqn in draws:
        if RULES[eqn.primitive].impl is None or not active.isdisjoint(eqn.inputs):
            return False
    return True


@derived
def _at_once_kinds() -> dict:
    """primitive -> how gradient_values may run it (computable_at_once): "run" (an impl, no
    effect, no reverse mode pruned as a graph), "draw" (an effect with an impl) or "no";
    filled as first calls meet primitives (one look-up per equation), since a scan of every
    rule cost a process's first call ~0.6 ms."""
    return {}


def _at_once_kind(prim) -> str:
    rules = RULES.get(prim)
    pruned = rules is not None and rules.hooks.reverse_by_graph
    kind = ("no" if rules is None or rules.impl is None or pruned else
            "draw" if rules.effectful else "run")
    _at_once_kinds()[prim] = kind
    return kind


def _options(graph, live, wanted, kept):
    """vjp_graph's defaults: every differentiable output live, every input wanted, every
    output kept."""
    live = (tuple(is_differentiable(a.aval) for a in graph.outputs) if live is None
            else tuple(live))
    wanted = range(len(graph.inputs)) if wanted is None else wanted
    kept = range(len(graph.outputs)) if kept is None else kept
    return live, wanted, kept


def _seeds(graph, live, cts=None):
    """The output cotangents: `cts[i]` where given, 1 for the other live outputs (a
    gradient's seed), None (no cotangent) for the dead ones."""
    seeds = []
    for i, (atom, is_live) in enumerate(zip(graph.outputs, live)):
        ct = cts[i] if is_live and cts is not None else None
        seeds.append(None if not is_live else _one(atom.aval.dtype) if ct is None else ct)
    return seeds


_ONES: dict = {}


def _one(dtype):
    """The numpy scalar 1 of `dtype` (immutable, so made once per dtype)."""
    one = _ONES.get(dtype)
    if one is None:
        one = _ONES[dtype] = np.ones((), dtype)[()]
    return one


def vjp_eval(graph, primals, cts_out):
    """Emit forward and backward passes of `graph` into the current builder.

    Returns (outs, cts_in) with one cotangent (or Zero) per graph input.
    """
    if graph_has_effects(graph):
        graph = _draws_at_top_level(graph)
    env = emit_equations(graph, primals)
    ct_env = _backward(graph, env, cts_out)
    cts_in = [ct_env.get(v) for v in graph.inputs]
    cts_in = [Zero(tangent_aval(v.aval)) if ct is None else ct
              for v, ct in zip(graph.inputs, cts_in)]
    return [a.value if type(a) is Literal else env[a] for a in graph.outputs], cts_in


def _backward(graph, env, cts_out, active=None, effects=None) -> dict:
    """The backward pass of `graph` given its forward environment `env` (values or tracers)
    and its outputs' cotangents `cts_out` (None or a Zero: none), in the current builder if
    any; returns the cotangents, var -> cotangent (absent: a zero). With `active` (a set of
    vars), only those get cotangents, and equations reading none of them are skipped.
    `effects`: whether `graph` has effects, when the caller knows (else asked)."""
    ct_env = {}
    for atom, ct in zip(graph.outputs, cts_out):
        if ct is None or type(ct) is Zero or type(atom) is Literal:
            continue
        atom_aval = atom.aval
        if atom_aval.dtype.kind not in "fc" or (active is not None and atom not in active):
            continue
        ct = fit_tangent(ct, atom_aval)
        previous = ct_env.get(atom)
        ct_env[atom] = ct if previous is None else add_tangents(previous, ct)
    summed = set()  # the atoms whose cotangent in ct_env is an array a sum here made

    if effects is None:
        effects = graph_has_effects(graph)
    rules_of, reverse_of = RULES.get, _REVERSE.get
    for eqn in reversed(graph.equations):
        outputs = eqn.outputs
        prim = eqn.primitive
        multiple = prim.multiple_results
        if not multiple:   # most equations: no list walks
            cts = ct_env.pop(outputs[0], None)
            if cts is None:
                continue
        else:
            cts = [ct_env.pop(v, None) for v in outputs]
            if all(ct is None for ct in cts):
                continue
        inputs = eqn.inputs
        for a in inputs:
            if a.aval.dtype.kind in "fc":    # some input is differentiable
                break
        else:
            continue
        if effects and has_effects(eqn):
            _check_replays_no_draw(eqn)
        params = eqn.params
        rules = rules_of(prim)
        reverse = reverse_of(rules)
        if reverse is None or reverse.primitive is not prim:
            reverse = _reverse(prim, rules)
        token = enter_source_scope((eqn.source, reverse.origin))
        try:
            # (the two commonest cases inline)
            if reverse.transposes_one and len(inputs) == 1:
                # a linear equation's one input, differentiable as checked above: no value read
                cts_in = reverse.transpose(cts, _undefined(inputs[0].aval), **params)
            elif reverse.vjp is not None and not multiple:
                ins = []    # (a loop: a comprehension makes a function object per equation)
                constant = False
                for a in inputs:
                    if type(a) is Literal:
                        ins.append(a.value)
                        constant = True
                    else:
                        ins.append(env[a])
                        if active is not None and a not in active:
                            constant = True
                if constant and reverse.needed_only is not None:
                    # no cotangent computed for a constant (2.0 in `2.0 * x`) only to be dropped
                    cts_in = reverse.needed_only(
                        ins, env[outputs[0]], cts, params,
                        [type(a) is not Literal and (active is None or a in active)
                         for a in inputs])
                # (no empty params unpacked: that call costs twice a plain one)
                elif params:
                    cts_in = reverse.vjp(ins, env[outputs[0]], cts, **params)
                else:
                    cts_in = reverse.vjp(ins, env[outputs[0]], cts)
            else:
                cts_in = _cotangents_in(eqn, reverse, env, cts)
        finally:
            leave_source_scope(token)
        # Each input's cotangent added to its total (inline: a call per input costs more
        # than most of these steps)
        for atom, ct in zip(inputs, cts_in):
            kind = type(ct)
            if ct is None or kind is Zero or type(atom) is Literal:
                continue
            atom_aval = atom.aval
            if kind is ndarray or kind is float64 or kind is Tracer:  # (most: no aval)
                ct_shape, ct_dtype = ct.shape, ct.dtype
            else:
                ct_aval = aval(ct)
                ct_shape, ct_dtype = ct_aval.shape, ct_aval.dtype
            if ct_shape != atom_aval.shape:
                raise _cotangent_shape_error(eqn, atom, ct)
            atom_dtype = atom_aval.dtype
            if atom_dtype.kind not in "fc" or (active is not None and atom not in active):
                continue
            if ct_dtype is not atom_dtype and ct_dtype != atom_dtype:
                ct = fit_tangent(ct, atom_aval)
            previous = ct_env.get(atom)
            if previous is None:
                ct_env[atom] = ct
            elif type(previous) is Tracer or type(ct) is Tracer:   # staged: at eqn's line
                with source_scope(eqn.source):
                    ct_env[atom] = add_tangents(previous, ct)
            elif atom in summed:
                # A sum this pass made, which no rule has read yet (an atom's cotangent is
                # read once, after its last sum): added into, the bits a new sum would have
                np.add(previous, ct, out=previous)
            else:
                ct_env[atom] = total = previous + ct
                if type(total) is ndarray and total.ndim:
                    summed.add(atom)
    return ct_env


# id(aval) -> its Undefined, which keeps the aval alive (so the id names no other meanwhile):
# by id, since an aval's hash is a Python call and avals are mostly the memo's same objects
_UNDEFINED: dict = {}


def _undefined(aval_) -> Undefined:
    """The Undefined of `aval_` (immutable: one per aval serves every transpose)."""
    found = _UNDEFINED.get(id(aval_))
    if found is None:
        if len(_UNDEFINED) >= 4096:
            _UNDEFINED.clear()
        found = _UNDEFINED[id(aval_)] = Undefined(aval_)
    return found


def _cotangents_in(eqn, reverse, env, cts):
    """The cotangents of `eqn`'s inputs from those of its outputs, `cts` (for a single
    output, its cotangent), by its vjp rule, its transpose or its linearized jvp."""
    inputs, outputs = eqn.inputs, eqn.outputs
    ins = [a.value if type(a) is Literal else env[a] for a in inputs]
    if eqn.primitive.multiple_results:
        cts = [zero_tangent(v.aval) if ct is None else ct for ct, v in zip(cts, outputs)]
        outs = [env[v] for v in outputs]
    else:
        outs = env[outputs[0]]
    if reverse.vjp is not None:
        return reverse.vjp(ins, outs, cts, **eqn.params)
    linear_in = reverse.linear_in
    if linear_in and _transposable(linear_in, inputs):
        # Linear in its differentiable inputs: the vjp is the transpose, with no small linear
        # graph to build per equation.
        args = [_undefined(a.aval) if i in linear_in and a.aval.dtype.kind in "fc" else x
                for i, (a, x) in enumerate(zip(inputs, ins))]
        return reverse.transpose(cts, *args, **eqn.params)
    return vjp_from_jvp(eqn, ins, cts)


class _Reverse:
    """How reverse mode treats a primitive, read once from its Rules: its vjp rule as
    transforms call it, else its transpose rule and the inputs it is linear in (when it has
    both), and the origin of the equations they emit ("vjp of <prim>")."""

    __slots__ = ("primitive", "vjp", "needed_only", "transpose", "linear_in", "transposes_one",
                 "origin")

    def __init__(self, prim, rules):
        self.primitive = prim
        self.vjp = rules.calls["vjp"] if rules is not None else None
        # (a defvjp or multilinear_vjp rule's: only the cotangents some input needs)
        self.needed_only = getattr(self.vjp, "needed_only", None)
        self.transpose = rules.calls["transpose"] if rules is not None else None
        self.linear_in = rules.linear_in if self.transpose is not None else ()
        # transposed when it has one input, linear in it, with one output
        self.transposes_one = (self.vjp is None and self.linear_in == (0,)
                               and not prim.multiple_results)
        self.origin = f"vjp of {prim}"


# Rules (by identity: a registration makes new ones) -> its _Reverse (of one primitive)
_REVERSE: dict = {}


def _reverse(prim, rules) -> _Reverse:
    reverse = _Reverse(prim, rules)
    if rules is not None:   # (no rules: the missing rule's error is raised each time)
        if len(_REVERSE) >= 4096:
            _REVERSE.clear()
        _REVERSE[rules] = reverse
    return reverse


def _draws_at_top_level(graph):
    """`graph` with the calls that draw random numbers opened: a call's vjp runs its callee
    again in the backward pass, which would draw again; opened, each draw is one equation
    whose value the backward pass reads."""
    def emit(sub, args):
        env = {var: value for var, value in sub.consts}
        env.update(zip(sub.inputs, args))
        for eqn in sub.equations:
            rules = RULES.get(eqn.primitive)
            ins = [a.value if type(a) is Literal else env[a] for a in eqn.inputs]
            with source_scope(eqn.source, eqn.origin):
                if rules is not None and rules.hooks.inline is not None and has_effects(eqn) \
                        and rules.hooks.inline(eqn) is not None:
                    outs = emit(rules.hooks.inline(eqn), ins)
                else:
                    outs = bind(eqn.primitive, *ins, **eqn.params)
                    outs = outs if eqn.primitive.multiple_results else [outs]
            env.update(zip(eqn.outputs, outs))
        return [a.value if type(a) is Literal else env[a] for a in sub.outputs]
    builder = GraphBuilder()
    with using_builder(builder):
        ins = [builder.new_input(v.aval) for v in graph.inputs]
        return builder.build(emit(graph, ins))


def _check_replays_no_draw(eqn) -> None:
    """A loop or branch whose body draws: its reverse mode would run the body again."""
    rules = RULES.get(eqn.primitive)
    if eqn.primitive in effectful_primitives() or (
            rules is not None and rules.hooks.draws_once_in_reverse):
        return
    raise UnsupportedError(
        f"reverse-mode differentiation of {construct_of(eqn.primitive) or eqn.primitive} "
        f"whose body draws "
        f"random numbers: its backward pass would run the body, and draw, again",
        eqn.source, "draw outside it and pass the draws in (e.g. as the xs of a scan), or "
        "differentiate in forward mode (xform.jvp, jacfwd)")


def _transposable(linear_in, inputs) -> bool:
    """Whether every differentiable input (atom) is one the primitive is declared linear in."""
    for i, a in enumerate(inputs):
        if i not in linear_in and a.aval.dtype.kind in "fc":
            return False
    return True


def _cotangent_shape_error(eqn, atom, ct) -> RuleError:
    return RuleError(f"the vjp rule of '{eqn.primitive}' returned a cotangent of shape "
                     f"{aval(ct).shape} for an input of shape {atom.aval.shape}",
                     eqn.source, "a vjp or transpose rule must return cotangents shaped "
                     "like its inputs (unbroadcast them)")


def vjp_from_jvp(eqn, ins, cts):
    """Linearize one equation with its jvp rule, then transpose the linear part."""
    jvp = rule_for(eqn, "jvp")
    linear_builder = GraphBuilder(parent=current_builder())
    diff = [is_differentiable(aval(x)) for x in ins]
    with using_builder(linear_builder):
        tangents = [linear_builder.new_input(tangent_aval(aval(x))) if d
                    else zero_tangent(aval(x)) for x, d in zip(ins, diff)]
        _, tangents_out = jvp(ins, tangents, **eqn.params)
        if not eqn.primitive.multiple_results:
            tangents_out = [tangents_out]
        check_rule_outputs(eqn, "jvp", tangents_out,
                           [tangent_aval(v.aval) for v in eqn.outputs], tangent=True)
        tangents_out = [instantiate(fit_tangent(t, v.aval))
                        for t, v in zip(tangents_out, eqn.outputs)]
    linear_graph = linear_builder.build(tangents_out)
    captured = linear_builder.captured_values
    n_linear = sum(diff)
    cts_list = cts if eqn.primitive.multiple_results else [cts]
    linear_cts = backward_pass(linear_graph, [None] * n_linear + captured,
                               [True] * n_linear + [False] * len(captured), cts_list)
    linear_cts = iter(linear_cts)
    return [next(linear_cts) if d else None for d in diff]


def split_graph(graph, n_primals: int, n_primal_outputs: int):
    """Cut a graph whose inputs are (primals, seeds) and outputs (primal outputs, results)
    into forward: primals -> (primal outputs, residuals) and backward: (residuals, seeds) ->
    results. An equation belongs to the backward graph when it depends on a seed. Seeds are
    cotangents for a vjp graph, tangents for a jvp graph (that split is `linearize`).
    """
    ct_inputs = set(graph.inputs[n_primals:])
    backward_vars = set(ct_inputs)
    forward_eqns, backward_eqns = [], []
    for eqn in graph.equations:
        if any(type(a) is not Literal and a in backward_vars for a in eqn.inputs):
            backward_eqns.append(eqn)
            backward_vars.update(eqn.outputs)
        else:
            forward_eqns.append(eqn)
    primal_outs = graph.outputs[:n_primal_outputs]
    grad_outs = graph.outputs[n_primal_outputs:]
    const_vars = {var for var, _ in graph.consts}
    needed = []
    seen = set()
    for atom in [a for eqn in backward_eqns for a in eqn.inputs] + list(grad_outs):
        if (type(atom) is Literal or atom in backward_vars or atom in seen
                or atom in const_vars):
            continue
        seen.add(atom)
        needed.append(atom)
    forward = Graph(graph.inputs[:n_primals], graph.consts, forward_eqns,
                    list(primal_outs) + needed)
    backward = Graph(needed + list(graph.inputs[n_primals:]), graph.consts, backward_eqns,
                     grad_outs)
    return forward, backward
