"""Fusion: each maximal connected region of element-wise equations becomes one `elementwise`
equation holding the region's graph (the primitive registered with role "fusion");
`elementwise` equations over the same inputs that share work are merged."""
from __future__ import annotations

import attrs
import numpy as np

from xform.ir.avals import broadcast_shapes, is_differentiable
from xform.ir.core import Equation, Graph, Literal, Params, Var
from xform.ir.nx import contracted_order, predecessors, with_equations
from xform.ir.registry import elementwise_primitives, hooks_named, primitive_for
from xform.passes.cse import eliminate_common_subexpressions
from xform.passes.dce import eliminate_dead_code
from xform.passes.fold import fold_constants

# Widest region (distinct differentiable inputs) whose vjp uses NDual rather than the
# per-equation rules; measured in bench/NDUAL.md.
NDUAL_MAX_WIDTH = 3
# Groups the cycle check may visit per merge attempt; past it the merge is refused, so that
# fusion stays linear in the graph's size (a refused merge only leaves two regions apart).
CYCLE_CHECK_BUDGET = 64
# Fusion pays on numpy only where NDual saves the tape work: a region needs arrays of at least
# FUSION_MIN_SIZE elements and an equation whose vjp needs more than its inputs (a
# transcendental function). Regions of + - * / only, or of small arrays, run slower fused
# (more calls, partials computed and kept): bench/fusion_breakeven.py, bench/SPEED2.md.
FUSION_MIN_SIZE = 1024


def fuse_elementwise(graph: Graph, max_width: int = NDUAL_MAX_WIDTH) -> Graph:
    """Replace each maximal connected region of element-wise equations (of primitives
    registered `elementwise=True`, and `elementwise` itself) by one `elementwise` equation.
    Its inputs are the region's distinct array inputs, its outputs the region's values read
    outside it. A region has at least two equations, at most `max_width`
    differentiable inputs (so that its vjp takes the NDual path, see bench/NDUAL.md), outputs
    whose shapes broadcast together, and no path leaving it and coming back. A region is
    fused only where it pays (arrays of FUSION_MIN_SIZE elements or more, and a
    transcendental equation: see `_pays`); elsewhere its equations are left alone.

    `elementwise` equations over the same inputs whose regions share work are merged into the
    earlier one: in reverse mode these are a region and its NDual form, which then evaluate
    the region once.

    Every `elementwise` equation of the result, fused here or before (one re-emitted from
    another graph), names in its `constants` param the positions of its inputs that are
    constants of this graph (absent when none): no cotangent flows to them, so its vjp takes
    no NDual direction for them, alike on a gradient's first call's values and in its graph.

    >>> from xform.passes import fuse_elementwise
    >>> graph = xform.make_graph(lambda x: np.sum(np.sin(np.cos(x)) * x))(np.ones(2000))
    >>> print(fuse_elementwise(graph))
    { lambda a:f64[2000] . let
        b:f64[2000] = elementwise[max_width=3, region=
            { lambda c:f64[2000] . let
                d:f64[2000] = cos c
                e:f64[2000] = sin d
                f:f64[2000] = multiply e c
              in (f) }] a
        g:f64[] = sum[axes=(0,), dtype=None] b
      in (g) }
    >>> small = xform.make_graph(lambda x: np.sum(np.sin(np.cos(x)) * x))(np.ones(3))
    >>> fuse_elementwise(small) is small        # too small to pay
    True
    """
    fusion_p = primitive_for("fusion")
    if len(graph.equations) < 2:     # no region, and nothing to merge
        if graph.equations and graph.equations[0].primitive is fusion_p:
            return _constants_named(graph, fusion_p)
        return graph
    if not _pays(graph.equations, _sizes_only(fusion_p)):
        return graph    # (arrays too small to pay, whatever their derivatives: no table read)
    fusible = _Fusible(fusion_p, elementwise_primitives(), hooks_named("arithmetic_derivative"))
    if not _pays(graph.equations, fusible):
        # No equation pays, so no region can; and no `elementwise` equation has a sibling to
        # merge with (nor is there one to name constants of). (One pass: a first call on
        # small arrays pays no more for fusion.)
        return graph
    graph = _merge_siblings(graph, fusion_p)
    fused = _fuse_regions(graph, max_width, fusible)
    # Regions just made may share work too (the graph was not CSE'd, say).
    return _constants_named(fused if fused is graph else _merge_siblings(fused, fusion_p),
                            fusion_p)


def _constants_named(graph, fusion_p):
    """`graph` with each `elementwise` equation's `constants` param naming the positions of
    its inputs that are Literals or constants of `graph` (fuse_elementwise's promise)."""
    consts = {var for var, _ in graph.consts}
    equations, renamed = list(graph.equations), False
    for index, eqn in enumerate(equations):
        if eqn.primitive is not fusion_p:
            continue
        constants = tuple(i for i, atom in enumerate(eqn.inputs)
                          if type(atom) is Literal or atom in consts)
        if constants != eqn.params.get("constants", ()):
            params = {k: v for k, v in eqn.params.items() if k != "constants"}
            if constants:
                params["constants"] = constants
            equations[index] = attrs.evolve(eqn, params=Params(params))
            renamed = True
    return with_equations(graph, equations) if renamed else graph


def _fuse_regions(graph, max_width, fusible):
    candidates = [eqn for eqn in graph.equations if fusible(eqn)]
    if not _pays(candidates, fusible) or not _has_fusible_pair(candidates):
        return graph
    before = predecessors(graph)
    groups = _Groups(graph, max_width, fusible)
    for index in range(len(graph.equations)):  # equations are in topological order
        groups.add(index, before[index])
    blocks = {}
    for rep, members in groups.blocks().items():
        if len(members) > 1 and not _pays([graph.equations[i] for i in members], fusible):
            blocks.update((i, [i]) for i in members)
        else:
            blocks[rep] = members
    if all(len(members) == 1 for members in blocks.values()):
        return graph
    block_of = {i: rep for rep, members in blocks.items() for i in members}
    read_by = {}
    for index, eqn in enumerate(graph.equations):
        for atom in eqn.inputs:
            if type(atom) is Var:
                read_by.setdefault(atom, set()).add(index)
    escaping = {a for a in graph.outputs if type(a) is Var}
    equations = []
    for rep in contracted_order(before, block_of):
        members = blocks[rep]
        if len(members) == 1:
            equations.append(graph.equations[rep])
            continue
        inside = set(members)
        outputs = [v for i in members for v in graph.equations[i].outputs
                   if v in escaping or not read_by.get(v, set()) <= inside]
        equations.append(_fused([graph.equations[i] for i in members], outputs, max_width,
                                fusible.fusion_p))
    return with_equations(graph, equations)


class _Groups:
    """Greedy grouping in topological order: each fusible equation joins the groups of its
    fusible producers when the merged group stays narrow, broadcasts and adds no cycle.

    Notes: a group must not reach itself through an equation outside it, or contracting it
    would make a cycle. Each group keeps its `successors`, the equations already seen that
    read it from outside, so that the check walks only the groups downstream of the merge,
    and at most CYCLE_CHECK_BUDGET of them: an early group read all along a long program
    would otherwise be walked from on every merge (quadratic staging).
    """

    def __init__(self, graph, max_width, fusible):
        self.fusible = fusible
        self.equations = graph.equations
        self.max_width = max_width
        self.consts = {var for var, _ in graph.consts}
        self.parent = {}
        self.groups = {}

    def find(self, index):
        root = index
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[index] != root:
            self.parent[index], index = root, self.parent[index]
        return root

    def add(self, index, predecessors):
        eqn = self.equations[index]
        self.parent[index] = index
        self.groups[index] = _Group.of(eqn)
        if self.fusible(eqn):
            candidates = sorted({self.find(u) for u in predecessors
                                 if self.fusible(self.equations[u])})
            # All producers at once first: a partial merge can be wider than the whole one
            # (an input of the part is produced by another part).
            if not self._try_merge([index] + candidates, predecessors):
                for rep in candidates:
                    self._try_merge([self.find(index), rep], predecessors)
        mine = self.find(index)
        for u in predecessors:
            if self.find(u) != mine:
                self.groups[self.find(u)].successors.add(index)

    def _try_merge(self, reps, predecessors) -> bool:
        """Merge the groups `reps` into one if it is fusible; returns whether it did."""
        # A group read from many places (an early value read all along a loop) is left
        # alone: merging it would copy and walk its readers on every attempt (quadratic).
        if sum(len(self.groups[rep].successors) for rep in reps) > CYCLE_CHECK_BUDGET:
            return False
        merged = self.groups[reps[0]]
        for rep in reps[1:]:
            merged = merged.merged(self.groups[rep])
            if merged is None:
                return False
        if len(reps) == 1 or merged.width(self.consts) > self.max_width:
            return False
        if self._closes_cycle(set(reps), predecessors):
            return False
        low = min(reps)
        for rep in reps:
            self.parent[rep] = low
            if rep != low:
                del self.groups[rep]
        merged.successors = {w for w in merged.successors if self.find(w) != low}
        self.groups[low] = merged
        return True

    def _closes_cycle(self, reps, predecessors):
        """Whether some path leaves the groups `reps` and comes back (to one of them, or to
        the equation being added, through its `predecessors`)."""
        feeding = {self.find(u) for u in predecessors} - reps
        frontier = [self.find(w) for r in reps for w in self.groups[r].successors]
        frontier = [g for g in frontier if g not in reps]
        seen = set(frontier)
        while frontier:
            group = frontier.pop()
            if group in feeding or len(seen) > CYCLE_CHECK_BUDGET:
                return True
            for w in self.groups[group].successors:
                successor = self.find(w)
                if successor in reps:
                    return True
                if successor not in seen:
                    seen.add(successor)
                    frontier.append(successor)
        return False

    def blocks(self) -> dict:
        """{representative (smallest index): member indices in order}."""
        blocks = {}
        for index in range(len(self.equations)):
            blocks.setdefault(self.find(index), []).append(index)
        return blocks


@attrs.define
class _Group:
    inputs: set      # Vars read from outside
    produced: set    # Vars defined inside
    shape: tuple | None  # the broadcast shape of every output (None: they do not broadcast)
    successors: set = attrs.Factory(set)

    @classmethod
    def of(cls, eqn):
        return cls({a for a in eqn.inputs if type(a) is Var}, set(eqn.outputs),
                   _broadcast(*[v.aval.shape for v in eqn.outputs]))

    def merged(self, other):
        if self.shape is None or other.shape is None:
            return None
        shape = _broadcast(self.shape, other.shape)
        if shape is None:
            return None
        produced = self.produced | other.produced
        return _Group((self.inputs | other.inputs) - produced, produced, shape,
                      self.successors | other.successors)

    def width(self, consts) -> int:
        """N: the inputs that can have a cotangent (differentiable, not constants)."""
        return sum(is_differentiable(v.aval) for v in self.inputs if v not in consts)


def _pays(members, fusible) -> bool:
    """Whether fusing the equations `members` should be faster than leaving them alone: one
    is an `elementwise` member (fused already) or an equation whose derivative is not mere
    arithmetic (Hooks.arithmetic_derivative: a transcendental one) with outputs of
    FUSION_MIN_SIZE elements or more (see FUSION_MIN_SIZE). A region pays only if one of
    its equations does, so a graph with no such equation is not grouped at all."""
    fusion_p, arithmetic = fusible.fusion_p, fusible.arithmetic
    for eqn in members:     # (a loop, not nested generators: every first call asks)
        if eqn.primitive is fusion_p:
            return True
        if eqn.primitive not in arithmetic:
            for var in eqn.outputs:
                if var.aval.shape and var.aval.size >= FUSION_MIN_SIZE:
                    return True
    return False


def _sizes_only(fusion_p) -> "_Fusible":
    """What `_pays` asks for whether any region could pay by its sizes alone (no derivative
    counts as arithmetic): read before the element-wise tables, which a first call's small
    arrays then never need."""
    found = _SIZES_ONLY.get(fusion_p)
    if found is None:
        found = _SIZES_ONLY[fusion_p] = _Fusible(fusion_p, frozenset(), {})
    return found


_SIZES_ONLY: dict = {}


def _has_fusible_pair(candidates) -> bool:
    """Whether some of the fusible equations `candidates` (in graph order) reads another's
    output: the least a region needs. A linear sweep, so that graphs with nothing to fuse
    (scalar code) pay no more."""
    produced = set()
    for eqn in candidates:
        if not produced.isdisjoint(eqn.inputs):
            return True
        produced.update(eqn.outputs)
    return False


@attrs.frozen
class _Fusible:
    """Whether an equation may join a region: element-wise; an `elementwise` equation only
    when its region is typed for its inputs (its equations are then spliced as they are).
    The element-wise set, and which of it has an arithmetic derivative (`_pays`), are read
    once per pass."""

    fusion_p: object
    elementwise: frozenset
    arithmetic: dict

    def __call__(self, eqn) -> bool:
        if eqn.primitive is self.fusion_p:
            return _typed(eqn)
        # Scalars gain nothing (no residual arrays to save) and would pay an extra call.
        if eqn.primitive not in self.elementwise:
            return False
        outputs = eqn.outputs
        return bool(outputs[0].aval.shape) if len(outputs) == 1 else any(
            v.aval.shape for v in outputs)


def _typed(eqn) -> bool:
    return all(a.aval.shape == v.aval.shape and a.aval.dtype == v.aval.dtype
               for a, v in zip(eqn.inputs, eqn.params["region"].inputs))


def _broadcast(*shapes):
    try:
        return broadcast_shapes(*shapes)
    except ValueError:
        return None


def _fused(members, outputs, max_width, fusion_p) -> Equation:
    """One `elementwise` equation computing `outputs` (Vars) from the equations `members`,
    in their order; `elementwise` members are opened, so regions never nest."""
    region_of = {}   # outer atom -> region atom
    inputs, region_inputs = [], []

    def read(atom):
        if type(atom) is Literal:
            return atom
        if atom not in region_of:
            region_of[atom] = Var(atom.aval, atom.hint)
            inputs.append(atom)
            region_inputs.append(region_of[atom])
        return region_of[atom]

    equations, consts = [], []
    for eqn in members:
        args = [read(a) for a in eqn.inputs]
        if eqn.primitive is fusion_p:
            body, body_consts, body_outputs = _renamed(eqn.params["region"], args)
            equations.extend(body)
            consts.extend(body_consts)
            region_of.update(zip(eqn.outputs, body_outputs))
        else:
            outs = [Var(v.aval, v.hint) for v in eqn.outputs]
            equations.append(attrs.evolve(eqn, inputs=args, outputs=outs))
            region_of.update(zip(eqn.outputs, outs))
    region = Graph(region_inputs, consts, equations, [region_of[v] for v in outputs])
    return Equation(fusion_p, inputs, outputs,
                    Params({"max_width": max_width, "region": region}), members[0].source)


def _renamed(region, args):
    """(equations, consts, outputs) of `region` applied to the atoms `args`, with fresh Vars."""
    rename = dict(zip(region.inputs, args))
    consts = []
    for var, value in region.consts:
        rename[var] = Var(var.aval, var.hint)
        consts.append((rename[var], value))
    equations = []
    for eqn in region.equations:
        outs = [Var(v.aval, v.hint) for v in eqn.outputs]
        equations.append(attrs.evolve(
            eqn, inputs=[a if type(a) is Literal else rename[a] for a in eqn.inputs],
            outputs=outs))
        rename.update(zip(eqn.outputs, outs))
    return equations, consts, [a if type(a) is Literal else rename[a] for a in region.outputs]


def clean_region(region: Graph) -> Graph:
    """`region` folded, CSE'd and DCE'd, but not fused: a region stays flat (fused regions
    and their derived graphs are cleaned with it).

    >>> from xform.passes import clean_region
    >>> print(clean_region(xform.make_graph(lambda x: np.sin(x) * 1.0 + np.sin(x))(1.0)))
    { lambda a:~f64[] . let
        b:f64[] = sin a
        c:f64[] = add b b
      in (c) }
    """
    return eliminate_dead_code(eliminate_common_subexpressions(fold_constants(region)))


# -- merging `elementwise` equations over the same inputs that share work ---------------------

def _literal_key(atom):
    return (type(atom.value), atom.aval, np.asarray(atom.value, atom.aval.dtype).tobytes())


def _inputs_key(eqn):
    return tuple(a if type(a) is Var else _literal_key(a) for a in eqn.inputs)


def _work(region, interned) -> set:
    """Each equation of `region` as a number naming what it computes from the region's
    inputs (the same number in every region, through `interned`), so that regions over the
    same inputs show their shared work as a shared number."""
    names = {v: -1 - i for i, v in enumerate(region.inputs)}
    names.update((v, ("const", id(value))) for v, value in region.consts)
    work = set()
    for eqn in region.equations:
        key = (eqn.primitive, eqn.params,
               tuple(names[a] if type(a) is Var else _literal_key(a) for a in eqn.inputs))
        number = interned.setdefault(key, len(interned))
        work.add(number)
        names.update((var, (number, j)) for j, var in enumerate(eqn.outputs))
    return work


def _merge_siblings(graph: Graph, fusion_p) -> Graph:
    """Merge each `elementwise` equation into an earlier one over the same inputs when their
    regions share work (e.g. a region and its NDual form, which vjp emits later): the merged
    equation, standing where the earlier one was, evaluates the shared part once."""
    buckets = {}
    for index, eqn in enumerate(graph.equations):
        if eqn.primitive is fusion_p and _typed(eqn):
            buckets.setdefault(_inputs_key(eqn), []).append(index)
    if all(len(indices) == 1 for indices in buckets.values()):
        return graph                  # no two over the same inputs
    current = dict(enumerate(graph.equations))
    interned = {}
    for indices in (i for i in buckets.values() if len(i) > 1):
        kept = []  # (index, work) of the equations left standing
        for index in indices:
            work = _work(current[index].params["region"], interned)
            for slot, (earlier, earlier_work) in enumerate(kept):
                merged = _merged(current[earlier], current[index]) if work & earlier_work \
                    else None
                if merged is not None:
                    current[earlier] = merged
                    del current[index]
                    kept[slot] = (earlier, earlier_work | work)
                    break
            else:
                kept.append((index, work))
    if len(current) == len(graph.equations):
        return graph
    return with_equations(graph, [current[i] for i in sorted(current)])


def _merged(first, second):
    """One equation computing the outputs of both, or None when they share no equation."""
    regions = (first.params["region"], second.params["region"])
    larger = 0 if len(regions[0].equations) >= len(regions[1].equations) else 1
    args = [Var(v.aval, v.hint) for v in regions[0].inputs]
    equations, consts, outputs = [], [], [None, None]
    for which in (larger, 1 - larger):  # the larger region's order comes first
        body, body_consts, outputs[which] = _renamed(regions[which], args)
        equations.extend(body)
        consts.extend(body_consts)
    union = clean_region(Graph(args, consts, equations, outputs[0] + outputs[1]))
    if len(union.equations) >= len(regions[0].equations) + len(regions[1].equations):
        return None
    return attrs.evolve(first, outputs=first.outputs + second.outputs,
                        params=Params({**first.params, "region": union}))


__all__ = ["FUSION_MIN_SIZE", "NDUAL_MAX_WIDTH", "clean_region", "fuse_elementwise"]
