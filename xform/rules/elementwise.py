"""The `elementwise` primitive: one equation standing for a fused region of element-wise
equations, whose closed graph is its `region` param (made by xform.passes.fuse). Its vjp runs
the region once in forward mode with one tangent direction per differentiable input (NDual)
that is not among its `constants` param (the positions of inputs that are constants of the
graph, which fusion names; absent when none)."""
from __future__ import annotations

import attrs
import numpy as np

from xform.ir.avals import broadcast_shapes, is_differentiable, tangent_aval
from xform.ir.builder import (GraphBuilder, bind, current_builder, source_scope,
                              using_builder)
from xform.ir.core import Literal, Primitive, rewire
from xform.ir.execute import compiled_memo, runtime
from xform.ir.interpret import eval_graph, first_call_regions, run_concrete
from xform.ir.tracer import Tracer
from xform.ir.ad import NOT_MAPPED, Zero, aval, fit_tangent, move_to_front, zero_tangent
from xform.rules.helpers import unbroadcast
from xform.ir.registry import RULES, Hooks, is_elementwise, register, rule_for
from xform.passes import clean_region, eliminate_dead_code
from xform.transforms.derived import batch_of, memo
from xform.transforms.jvp import jvp_eval
from xform.transforms.vjp import vjp_eval

elementwise_p = Primitive("elementwise", multiple_results=True)

BLOCK = 1 << 15  # elements per block of a large region: a block's intermediates stay in cache
SHORT_REGION = 8       # equations per output below which a region runs whole...
WHOLE_LIMIT = 1 << 21  # ...unless it has this many elements
# region -> the function running it, one lookup per call; dropped with the compiled code
_RUNNERS = compiled_memo()
_RAN_ONCE = object()    # in _RUNNERS: the region ran once, interpreted; the next run compiles
# Elements of a region's largest value up to which its first run is interpreted (and its
# NDual partials computed at once on values): building and compiling its code costs ~0.1-0.5
# ms, more than such a region's run; larger temporaries cost more than the compiled code's
# reused buffers (bench/FIRSTCALL.md, "Session 15").
INTERPRETED_FIRST_RUN = 1 << 14
# A first call's NDual partials on values, which computes no value of the region again (only
# tangents), are computed at once also past that while elements times equations stay under
# this (bench/FIRSTCALL.md, "Session 16").
INTERPRETED_FIRST_PARTIALS = 1 << 17


def _elementwise_impl(*args, max_width, region, constants=()):
    runner = _RUNNERS.get(region)
    if runner is None:
        if _largest_size(region) <= INTERPRETED_FIRST_RUN:
            _RUNNERS[region] = _RAN_ONCE
            return run_concrete(region, args)     # the impls give the compiled code's bits
        runner = _RUNNERS[region] = _runner(region)
    elif runner is _RAN_ONCE:
        runner = _RUNNERS[region] = _runner(region)
    return runner(*args)


def _partials_at_once(region) -> bool:
    """Whether a first call computes `region`'s NDual partials at once on values (interpreted)
    rather than by its compiled graph."""
    size = _largest_size(region)
    return size <= INTERPRETED_FIRST_RUN or \
        size * len(region.equations) <= INTERPRETED_FIRST_PARTIALS


def _largest_size(region) -> int:
    """The elements of `region`'s largest input or intermediate."""
    largest = 0
    for v in region.inputs:
        largest = max(largest, v.aval.size)
    for eqn in region.equations:
        for v in eqn.outputs:
            largest = max(largest, v.aval.size)
    return largest


def _runner(region):
    """The function running `region`: its compiled code, block by block when it is large."""
    run = runtime().compiled(region)
    plan = _BlockPlan.of(region)
    if plan is None:
        return run

    def blocked(*args):
        if any(np.shape(a) != s for a, s in zip(args, plan.in_shapes)):
            return run(*args)
        return plan.run(run, args)
    return blocked


@attrs.frozen
class _BlockPlan:
    """How to run a large region block by block along its first axis, writing each block of
    the outputs in place: every intermediate is then one block, not one array, long (the
    fused loop NDual assumes). Element-wise equations give the same bits in any blocking.

    `sliced[i]`: whether input i spans the first axis; `outputs[k]`: ("block",) for an output
    spanning it, ("whole",) for one every block computes alike, ("input", i), ("literal",
    value) or ("same", j) for an output that is input i, a literal or output j.
    """

    in_shapes: tuple
    rows: int
    step: int
    sliced: tuple
    outputs: tuple

    @classmethod
    def of(cls, region):
        shape = _broadcast_shape([a.shape for a in region.out_avals + region.in_avals])
        size = int(np.prod(shape)) if shape is not None else 0
        if size < 2 * BLOCK or shape[0] < 2:
            return None
        rank, rows = len(shape), shape[0]

        def spans(a):
            return len(a.shape) == rank and a.shape[0] == rows
        inputs = {v: i for i, v in enumerate(region.inputs)}
        outputs, first = [], {}
        for k, atom in enumerate(region.outputs):
            if type(atom) is Literal:
                outputs.append(("literal", atom.value))
            elif atom in first:
                outputs.append(("same", first[atom]))
            elif atom in inputs:
                outputs.append(("input", inputs[atom]))
            else:
                outputs.append(("block",) if spans(atom.aval) else ("whole",))
            if type(atom) is not Literal:
                first.setdefault(atom, k)
        # Blocks keep intermediates in cache but copy every output once more: a short region
        # (few equations per output) runs faster whole until its arrays outgrow the caches
        # (bench/NDUAL.md, "Blocks").
        block_outputs = sum(kind == ("block",) for kind in outputs)
        if (len(region.equations) < SHORT_REGION * max(1, block_outputs)
                and size < WHOLE_LIMIT):
            return None
        return cls(tuple(a.shape for a in region.in_avals), rows,
                   max(1, BLOCK * rows // size), tuple(spans(a) for a in region.in_avals),
                   tuple(outputs))

    def run(self, run, args):
        outs = [None] * len(self.outputs)
        for lo in range(0, self.rows, self.step):
            hi = min(lo + self.step, self.rows)
            results = run(*[a[lo:hi] if s else a for a, s in zip(args, self.sliced)])
            for k, (kind, result) in enumerate(zip(self.outputs, results)):
                if kind[0] == "block":
                    if outs[k] is None:
                        outs[k] = np.empty((self.rows,) + np.shape(result)[1:],
                                           np.result_type(result))
                    outs[k][lo:hi] = result
                elif kind[0] == "whole" and outs[k] is None:
                    outs[k] = result
        for k, kind in enumerate(self.outputs):
            if kind[0] == "input":
                outs[k] = args[kind[1]]
            elif kind[0] == "literal":
                outs[k] = kind[1]
            elif kind[0] == "same":
                outs[k] = outs[kind[1]]
        return outs


def _broadcast_shape(shapes):
    try:
        return broadcast_shapes(*shapes)
    except ValueError:
        return None


def _elementwise_abstract_eval(*avals, max_width, region, constants=()):
    if len(avals) != len(region.inputs):
        raise TypeError(f"{len(avals)} inputs for a region of {len(region.inputs)}")
    if all(a.shape == v.aval.shape and a.dtype == v.aval.dtype
           for a, v in zip(avals, region.inputs)):
        return list(region.out_avals)
    # Other shapes or dtypes: the region's equations broadcast and promote them as numpy does.
    return list(_retyped(region, avals).out_avals)


# -- jvp: the primal region, and one region computing the output tangents --------------------

def _jvp_region(region, nonzeros):
    """(graph, diff): graph maps (inputs, tangents of the `nonzeros` inputs) to the tangents of
    the outputs marked in `diff` (those with a nonzero tangent)."""
    def build():
        builder = GraphBuilder()
        with using_builder(builder):
            primals = [builder.new_input(v.aval) for v in region.inputs]
            tangents = [builder.new_input(tangent_aval(v.aval)) if nz else zero_tangent(v.aval)
                        for v, nz in zip(region.inputs, nonzeros)]
            _, t_outs = jvp_eval(region, primals, tangents)
        diff = tuple(type(t) is not Zero and is_differentiable(a.aval)
                     for t, a in zip(t_outs, region.outputs))
        graph = builder.build([t for t, d in zip(t_outs, diff) if d])
        return clean_region(graph), diff
    return memo(region, ("elementwise_jvp", nonzeros), build)


def _elementwise_jvp(primals, tangents, *, region, **params):
    # Two equations rather than one computing both: the tangent one depends on the tangents
    # and the primal one does not, so linearize can split them apart. (The tangent one's
    # inputs start with the primal's: its `constants` are the primal's.)
    outs = elementwise_p.bind(*primals, region=region, **params)
    nonzeros = tuple(type(t) is not Zero for t in tangents)
    graph, diff = _jvp_region(region, nonzeros)
    live = [fit_tangent(t, v.aval) for t, v, nz in zip(tangents, region.inputs, nonzeros) if nz]
    t_values = iter(elementwise_p.bind(*primals, *live, region=graph, **params)
                    if any(diff) else ())
    return outs, [next(t_values) if d else zero_tangent(a.aval)
                  for d, a in zip(diff, region.outputs)]


# -- vjp: NDual below the width threshold, the per-equation rules above it -------------------

def _ndual_region(region, live, directions, given=()):
    """(graph, partials) for the NDual vjp of `region`: derivatives of its outputs at indices
    `live` w.r.t. its inputs at indices `directions`.

    graph: the region's inputs -> its outputs, then traced partial derivatives. It evaluates
    the region once, every equation followed by its tangents in each direction (input i's
    tangent seeded with a scalar one), so intermediates die as early as in the primal.
    With `given` (a first call's, positions in `_values_of(region)` of values it computed
    already): the region's inputs, then those values -> the partial derivatives only, the
    equations computing a given value not run.
    partials[(k, i)]: d output k / d input i, as ("out", index into graph.outputs) or
    ("value", a constant); absent where the output does not depend on the input.
    """
    def build():
        builder = GraphBuilder()
        with using_builder(builder):
            ins = [builder.new_input(v.aval) for v in region.inputs]
            values = _values_of(region)
            computed = {values[i]: builder.new_input(values[i].aval) for i in given}
            outs, tangents = _ndual_run(region, ins, live, directions, computed)
            outs = [] if given else outs
            traced, partials = [], {}
            for key, t in tangents.items():
                if type(t) is Tracer:
                    partials[key] = ("out", len(outs) + len(traced))
                    traced.append(t)
                else:
                    partials[key] = ("value", t)
        return clean_region(builder.build(outs + traced)), partials
    return memo(region, ("elementwise_ndual", live, directions, given), build)


def _values_of(region) -> list:
    """The vars `region`'s equations compute, in order."""
    return [var for eqn in region.equations for var in eqn.outputs]


def _computed(region, outs) -> dict:
    """var -> value of what a first call computed of `region` already: its outputs `outs`
    (when given), and the values inside it that staging computed (StagedRegions)."""
    regions = first_call_regions.get()
    computed = {} if regions is None else regions.values_in(region)
    for atom, value in zip(region.outputs, outs or ()):
        if type(atom) is not Literal:
            computed[atom] = value
    return computed


def _ndual_run(region, ins, live, directions, computed=None):
    """(outs, {(k, i): d output k / d input i}): `region` run on `ins` (tracers, or values
    for a gradient computed at once), every equation followed by its tangents in each
    direction (input i's tangent seeded with a scalar one), in _ndual_region's order.
    `computed`: var -> value of the region's values computed already (a first call's): an
    equation computing one is not evaluated again (its bits are the same), its tangents are."""
    env = dict(region.consts)
    env.update(zip(region.inputs, ins))
    given = ()
    if computed:
        given = {var for var in computed if var not in env}
        env.update((var, computed[var]) for var in given)
    # A scalar seed broadcasts like ones of the input's shape, without the array.
    tangent_envs = [{region.inputs[i]: np.ones((), region.inputs[i].aval.dtype)[()]}
                    for i in directions]
    for eqn in region.equations:
        _ndual_step(eqn, env, tangent_envs, given)
    outs = [a.value if type(a) is Literal else env[a] for a in region.outputs]
    tangents = {}
    for k in live:
        for i, tangent_env in zip(directions, tangent_envs):
            t = tangent_env.get(region.outputs[k])
            if t is not None:
                tangents[(k, i)] = t
    return outs, tangents


def _ndual_step(eqn, env, tangent_envs, given=()):
    """Emit `eqn` and, for each direction with a nonzero input tangent, its tangent (only the
    tangent where its output is among the values `given`, in `env` already)."""
    values = [a.value if type(a) is Literal else env[a] for a in eqn.inputs]
    outs = None
    tangent_of = _tangent_of_given(eqn, given) if given else None
    with source_scope(eqn.source, f"vjp of elementwise ({eqn.primitive})"):
        computed = []   # (tangents, their output tangents) of the directions so far
        for tangent_env in tangent_envs:
            tangents = [tangent_env.get(a) for a in eqn.inputs]
            if all(t is None for t in tangents):
                continue
            tangents = [zero_tangent(a.aval) if t is None else t
                        for a, t in zip(eqn.inputs, tangents)]
            # Directions whose tangents are alike here share their output tangents (a
            # broadcast input's direction often carries the same seed as another's)
            t_outs = next((t_outs for earlier, t_outs in computed
                           if _same_tangents(earlier, tangents)), None)
            if t_outs is None and tangent_of is not None:
                t_outs = [tangent_of(values, tangents, env[eqn.outputs[0]], eqn.params)]
                computed.append((tangents, t_outs))
            elif t_outs is None:
                # The jvp rule emits the primal equation again for every direction; CSE
                # keeps the first, so the region is evaluated once.
                primal, t_outs = rule_for(eqn, "jvp")(values, tangents, **eqn.params)
                if not eqn.primitive.multiple_results:
                    primal, t_outs = [primal], [t_outs]
                computed.append((tangents, t_outs))
                outs = primal if outs is None else outs
            for var, t in zip(eqn.outputs, t_outs):
                if type(t) is not Zero and is_differentiable(var.aval):
                    tangent_env[var] = t
        if tangent_of is not None:
            return
        if outs is None:
            outs = bind(eqn.primitive, *values, **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
    env.update(zip(eqn.outputs, outs))


def _tangent_of_given(eqn, given):
    """The function giving `eqn`'s tangent from its output (its jvp rule's own, without the
    primal), where that output is among those `given`; else None."""
    if eqn.primitive.multiple_results or eqn.outputs[0] not in given:
        return None
    rules = RULES[eqn.primitive]
    jvp = rules.calls["jvp"]
    # (a rule behind the zeros convention is called as it is, not through its parts)
    return getattr(jvp, "tangent", None) if jvp is rules.jvp else None


def _same_tangents(a, b) -> bool:
    """Whether the tangents `a` and `b` (lists) are alike: the same values or tracers, numpy
    scalars of the same bits, or zeros of one aval."""
    for x, y in zip(a, b):
        if x is y:
            continue
        kind = type(x)
        if kind is not type(y):
            return False
        if kind is Zero:
            if x.aval != y.aval:
                return False
        elif not isinstance(x, np.generic) or x.dtype != y.dtype or x.tobytes() != y.tobytes():
            return False
    return True


def _mixes_precisions(region) -> bool:
    """Whether `region` holds floats of more than one precision. NDual's partials take each
    value's dtype, so d float32 / d float64 would be rounded to float32, where the
    per-equation rules (and JAX) turn the float32 cotangent into float64 and keep the
    float64 derivative."""
    values = [*region.inputs, *(v for eqn in region.equations for v in eqn.outputs)]
    return len({v.aval.dtype for v in values if v.aval.dtype.kind in "fc"}) > 1


def _elementwise_vjp(primals, outs, cts, *, region, **params):
    # N: the differentiable inputs that can have a cotangent. N decides NDual or not, and so
    # the bits, so a gradient computed at once (values only) must count as its graph does: the
    # graph's constants have none, and fusion names them in `constants`. While staging, a
    # value that is no tracer is a constant too (an equation bound outside a fused graph).
    max_width, constants = params["max_width"], params.get("constants", ())
    staging = current_builder() is not None
    directions = tuple(i for i, x in enumerate(primals)
                       if i not in constants and (type(x) is Tracer or not staging)
                       and is_differentiable(aval(x)))
    if not directions:
        return (None,) * len(primals)
    # A complex input's derivative need not be complex multiplication by one partial (abs,
    # real, conj): one real seed per input cannot give its cotangent, the per-equation rules do.
    if len(directions) > max_width or any(aval(primals[i]).dtype.kind == "c"
                                          for i in directions) or _mixes_precisions(region):
        # Trace-through: the per-equation rules on the region (its primal is evaluated again).
        _, cts_in = vjp_eval(region, list(primals), list(cts))
        return tuple(None if type(ct) is Zero else ct for ct in cts_in)
    live = tuple(k for k, (ct, a) in enumerate(zip(cts, region.outputs))
                 if type(ct) is not Zero and is_differentiable(a.aval))
    if staging or not _partials_at_once(region):
        # (on values, a first call's: from the values computed already, whose equations
        # then do not run again)
        given, args = (), primals
        if not staging:
            computed = _computed(region, outs)
            values = _values_of(region)
            given = tuple(i for i, var in enumerate(values) if var in computed)
            args = (*primals, *(computed[values[i]] for i in given))
        graph, partials = _ndual_region(region, live, directions, given)
        results = []
        if any(kind == "out" for kind, _ in partials.values()):
            results = elementwise_p.bind(*args, region=graph, **params)
        partials = {key: results[value] if kind == "out" else value
                    for key, (kind, value) in partials.items()}
    else:
        # Values of a small region (a first call's gradient): the partials at once, as the
        # graph's code computes them (its passes, fold, CSE and DCE, change no bits), with
        # no graph built (interpreted, as a first run of its region would be)
        _, partials = _ndual_run(region, primals, live, directions, _computed(region, outs))
    grads = [None] * len(primals)
    for (k, i), partial in partials.items():
        term = unbroadcast(cts[k] * partial, aval(primals[i]))
        grads[i] = term if grads[i] is None else grads[i] + term
    return tuple(grads)


# -- batch: align the batch axes in front (broadcasting), then the region retyped ------------

def _retyped(region, avals):
    """`region` staged again on inputs of `avals` (batched shapes broadcast the same way)."""
    def build():
        builder = GraphBuilder()
        with using_builder(builder):
            outs = eval_graph(region, *[builder.new_input(a) for a in avals])
        return builder.build(outs)
    return memo(region, ("elementwise_retyped", tuple(avals)), build)


def _elementwise_batch(size, args, dims, *, region, **params):
    if not all(is_elementwise(e.primitive) for e in region.equations):
        # A broadcast_to in the region fixes a shape that retyping cannot batch: batch the
        # region's equations one by one instead.
        outs = eval_graph(batch_of(region, dims, size), *args)
        return outs, [0] * len(outs)
    rank = max((a.ndim for a in region.in_avals + region.out_avals), default=0)
    aligned = []
    for x, d, v in zip(args, dims, region.inputs):
        if d is not NOT_MAPPED:
            x = move_to_front(x, d, size)
            if v.aval.ndim < rank:
                x = np.reshape(x, (size,) + (1,) * (rank - v.aval.ndim) + v.aval.shape)
        aligned.append(x)
    retyped = _retyped(region, [aval(x) for x in aligned])
    outs = elementwise_p.bind(*aligned, region=retyped, **params)
    results, out_dims = [], []
    for out, old in zip(outs, region.outputs):
        # Outputs that read a batched input have the batch axis (and rank + 1 dims).
        if aval(out).ndim > rank:
            if aval(out).shape != (size,) + old.aval.shape:
                out = np.reshape(out, (size,) + old.aval.shape)
            results.append(out)
            out_dims.append(0)
        else:
            results.append(out)
            out_dims.append(NOT_MAPPED)
    return results, out_dims


def _elementwise_dce(eqn, used):
    # The inputs stay: a region and its NDual form keep equal inputs, so the pass merges them.
    region = eqn.params["region"]

    def build():
        kept = [k for k, u in enumerate(used) if u]
        return eliminate_dead_code(rewire(region, region.inputs, kept))
    smaller = memo(region, ("elementwise_dce", used), build)
    return attrs.evolve(eqn, outputs=[v for v, u in zip(eqn.outputs, used) if u],
                        params={**eqn.params, "region": smaller})


def _elementwise_decomposition(*args, region, **params):
    return eval_graph(region, *args)


register(elementwise_p, impl=_elementwise_impl, abstract_eval=_elementwise_abstract_eval,
         jvp=_elementwise_jvp, vjp=_elementwise_vjp, batch=_elementwise_batch,
         decomposition=_elementwise_decomposition, hooks=Hooks(dce=_elementwise_dce),
         symbolic_zeros=True,
         role="fusion")
