"""The only module that imports networkx: the dataflow and call graphs the passes analyse, the
graph algorithms they run on them, rebuilding a Graph from an equation order, and the
layered layout of a picture (drawn by xform.ir.draw)."""
from __future__ import annotations

import heapq
import itertools
import operator
from collections import deque



class _OnFirstUse:
    """networkx, imported the first time a pass needs it: most graphs never do (passes skip
    graphs without calls or fusible pairs), and its import is most of `import xform`'s
    time."""

    def __getattr__(self, name):
        import networkx
        globals()["nx"] = networkx
        return getattr(networkx, name)


nx = _OnFirstUse()
from xform.ir.core import Graph, Literal, subgraphs
from xform.ir.registry import graph_has_effects, has_effects

OUTPUT = "out"  # the sink node standing for the graph's outputs
_inputs_of = operator.attrgetter("inputs")


class _Root:
    def __repr__(self) -> str:
        return "ROOT"


ROOT = _Root()  # the call-graph node of the graph being analysed (never equal to a user key)


def _dataflow_edges(graph: Graph):
    """`(u, v, var)` for each edge of the dataflow of `graph` (see `dataflow_graph`), in the
    order the equations read them; an effect's edge to the next effect has var None."""
    producer = {}
    last_effect = None
    effects = graph_has_effects(graph)
    for index, eqn in enumerate(graph.equations):
        for atom in eqn.inputs:
            if type(atom) is not Literal and atom in producer:
                yield producer[atom], index, atom
        if effects and has_effects(eqn):
            # Effects (draws from one generator) keep their order: an edge with no var.
            if last_effect is not None:
                yield last_effect, index, None
            last_effect = index
        for var in eqn.outputs:
            producer[var] = index
    for atom in graph.outputs:
        if type(atom) is not Literal and atom in producer:
            yield producer[atom], OUTPUT, atom


def dataflow_graph(graph: Graph) -> nx.DiGraph:
    """Nodes: equation indices, plus OUTPUT; an edge u -> v (attr `var`) when v reads u's output.

    Inputs and constants are not nodes: an equation reading only them has no in-edges.
    >>> from xform.ir.nx import dataflow_graph
    >>> sorted(dataflow_graph(xform.make_graph(lambda x: np.sin(x) * 2.0)(1.0)).edges)
    [(0, 1), (1, 'out')]
    """
    dag = nx.DiGraph()
    dag.add_nodes_from((index, {"eqn": eqn}) for index, eqn in enumerate(graph.equations))
    dag.add_node(OUTPUT)
    for u, v, var in _dataflow_edges(graph):
        dag.add_edge(u, v, var=var)
    return dag


def predecessors(graph: Graph) -> list:
    """For each equation of `graph`, the indices of its predecessors in `dataflow_graph`, in
    the same order, computed without networkx: fusion runs on a gradient's first call, and
    importing networkx (about 0.1 s of CPU) would be most of a fresh process's first call.

    >>> from xform.ir.nx import predecessors
    >>> predecessors(xform.make_graph(lambda x: np.sin(x) * np.cos(x))(1.0))
    [[], [], [0, 1]]
    """
    found = [{} for _ in graph.equations]
    for u, v, _ in _dataflow_edges(graph):
        if v is not OUTPUT:
            found[v][u] = None
    return [list(before) for before in found]


def live_equations(graph: Graph) -> set:
    """The indices of the equations some output of `graph` depends on, and of its effects.

    One backward sweep: a graph's equations are in a topological order, so every reader is
    seen before what it reads (linear, where `nx.ancestors` on the dataflow graph would first
    build that graph).
    """
    needed = {a for a in graph.outputs if type(a) is not Literal}
    live = set()
    equations = graph.equations
    for index in range(len(equations) - 1, -1, -1):
        eqn = equations[index]
        outputs = eqn.outputs
        if ((outputs[0] in needed if len(outputs) == 1 else not needed.isdisjoint(outputs))
                or has_effects(eqn)):
            live.add(index)
            needed.update(eqn.inputs)        # Literals too, harmlessly: no Var is one
    return live


def stable_topological_order(dag: nx.DiGraph) -> list:
    """A topological order that keeps the original equation order where it can (OUTPUT last),
    so printing and generated code do not depend on how a pass visited the equations."""
    return list(nx.lexicographical_topological_sort(
        dag, key=lambda n: float("inf") if n == OUTPUT else n))


def contracted_order(predecessors, block_of) -> list:
    """A stable topological order of the blocks of a graph's equations, whose dataflow has
    `predecessors` (as `predecessors(graph)` gives them): `block_of[i]` names equation i's
    block by one of its indices, and each block is contracted to one node. Among the blocks
    ready at each step the smallest goes first, as in `stable_topological_order` (written out
    here: fusion runs on first calls, which do not import networkx).

    >>> from xform.ir.nx import contracted_order, predecessors
    >>> graph = xform.make_graph(lambda x: np.cos(np.sin(x)) * 2.0)(1.0)   # sin, cos, multiply
    >>> contracted_order(predecessors(graph), {0: 0, 1: 1, 2: 1})   # equations 1, 2 as one
    [0, 1]
    """
    waiting = dict.fromkeys(block_of.values(), 0)   # block -> blocks it still waits for
    successors = {}
    for v, before in enumerate(predecessors):
        b = block_of[v]
        for u in before:
            a = block_of[u]
            after = successors.setdefault(a, set())
            if a != b and b not in after:
                after.add(b)
                waiting[b] += 1
    ready = [block for block, count in waiting.items() if not count]
    heapq.heapify(ready)
    order = []
    while ready:
        block = heapq.heappop(ready)
        order.append(block)
        for after in successors.get(block, ()):
            waiting[after] -= 1
            if not waiting[after]:
                heapq.heappush(ready, after)
    assert len(order) == len(waiting), "the contracted blocks form a cycle"
    return order


def with_equations(graph: Graph, equations, outputs=None, consts=None) -> Graph:
    """`graph` with new `equations` (and optionally outputs and consts); consts no longer read
    are dropped.

    >>> from xform.ir.nx import with_equations
    >>> graph = xform.make_graph(lambda x: np.sin(x) * 2.0)(1.0)
    >>> print(with_equations(graph, graph.equations[:-1], outputs=graph.equations[-2].outputs))
    { lambda a:~f64[] . let
        b:f64[] = sin a
      in (b) }
    """
    outputs = graph.outputs if outputs is None else outputs
    consts = graph.consts if consts is None else consts
    if consts:
        # Which consts are read: membership in the (small) set of consts, not a set of every
        # atom read, whose inserts cost the more per equation the larger the graph.
        held = {var for var, _ in consts}
        read = held.intersection(itertools.chain.from_iterable(map(_inputs_of, equations)))
        read.update(a for a in outputs if a in held)
        consts = tuple((v, c) for v, c in consts if v in read)
    return Graph(graph.inputs, tuple(consts), equations, outputs)


def graph_from_order(graph: Graph, order, outputs=None) -> Graph:
    """`graph` with its equations replaced by those at indices `order`, in that order; consts
    no longer read are dropped.

    >>> from xform.ir.nx import graph_from_order
    >>> graph = xform.make_graph(lambda x: (np.sin(x), np.cos(x)))(1.0)
    >>> print(graph_from_order(graph, [1, 0]))    # the two are independent: cos may go first
    { lambda a:~f64[] . let
        b:f64[] = cos a
        c:f64[] = sin a
      in (c, b) }
    """
    return with_equations(graph, [graph.equations[i] for i in order if i != OUTPUT], outputs)


# -- call graphs -----------------------------------------------------------------------------

def callee_of(eqn):
    """`(key, body)` when `eqn` is a call an `inline` rule can open, else None.

    The key is `eqn.params["callee"]` (the body graph itself when the call has no such param).
    """
    from xform.ir.registry import RULES  # ir does not import rules at module level
    rules = RULES.get(eqn.primitive)
    if rules is None or rules.hooks.inline is None:
        return None
    try:
        body = rules.hooks.inline(eqn)
    except Exception:  # noqa: BLE001
        # A callee that fails to stage (say, in a branch that never runs) is simply not
        # opened: its error belongs to the run that calls it, not to the optimizer.
        return None
    if body is None:
        return None
    return eqn.params.get("callee", body), body


def _calls_in(graph: Graph, callee):
    """Every `(key, body)` called from `graph`, looking inside the sub-graphs (branches, loop
    bodies) of equations that are not calls themselves."""
    for eqn in graph.equations:
        found = callee(eqn)
        if found is not None:
            yield found
        else:
            for sub in subgraphs(eqn.params):
                yield from _calls_in(sub, callee)


def call_graph(root: Graph, callee=callee_of, limit: int = 1000) -> nx.DiGraph:
    """Who calls whom, from `root` (node ROOT) over callee keys, expanding bodies breadth-first.

    Node attributes: `body` (the callee graph) and `expanded` (False for the callees left
    unopened once `limit` nodes were reached: their calls are unknown).
    >>> from xform.ir.nx import call_graph, recursive_nodes
    >>> @xform.function
    ... def f(x, n):
    ...     return xform.cond(n > 0, lambda: 2.0 * f(x, n - 1), lambda: x)
    >>> calls = call_graph(xform.make_graph(f)(1.0, 3))
    >>> list(calls.edges), recursive_nodes(calls)    # f calls itself
    ([(ROOT, f), (f, f)], {f})
    """
    calls = nx.DiGraph()
    calls.add_node(ROOT, body=root, expanded=False)
    queue = deque([ROOT])
    while queue:
        node = queue.popleft()
        if calls.number_of_nodes() > limit:
            break
        calls.nodes[node]["expanded"] = True
        for key, body in _calls_in(calls.nodes[node]["body"], callee):
            if key not in calls:
                calls.add_node(key, body=body, expanded=False)
                queue.append(key)
            calls.add_edge(node, key)
    return calls


def recursive_nodes(calls: nx.DiGraph) -> set:
    """The nodes that lie on a cycle (self-calls included): the recursive callees."""
    cyclic = set(nx.nodes_with_selfloops(calls))
    for component in nx.strongly_connected_components(calls):
        if len(component) > 1:
            cyclic.update(component)
    return cyclic


# -- pictures --------------------------------------------------------------------------------

def layout(graph: Graph, sweeps: int = 4) -> nx.DiGraph:
    """The dataflow of `graph` placed in layers for a picture (see xform.ir.draw).

    Nodes: `("input", i)`, `("const", i)`, equation indices and `("output", i)`, with
    attributes `kind` ('input', 'const', 'equation', 'output'), `item` (the Var, Equation
    or output atom) and `pos` = (x, -layer): inputs on top, outputs at the bottom, each const
    just above its first reader. Edge attribute `var`. Within a layer nodes are ordered by
    the mean x of their neighbours (a few barycenter `sweeps`), which removes most crossings.
    >>> from xform.ir.nx import layout
    >>> [kind for _, kind in layout(xform.make_graph(np.sin)(1.0)).nodes(data="kind")]
    ['input', 'equation', 'output']
    """
    dag = nx.DiGraph()
    producer = {}
    for i, var in enumerate(graph.inputs):
        dag.add_node(("input", i), kind="input", item=var)
        producer[var] = ("input", i)
    for i, (var, _) in enumerate(graph.consts):
        dag.add_node(("const", i), kind="const", item=var)
        producer[var] = ("const", i)
    for index, eqn in enumerate(graph.equations):
        dag.add_node(index, kind="equation", item=eqn)
        for atom in eqn.inputs:
            if type(atom) is not Literal and atom in producer:
                dag.add_edge(producer[atom], index, var=atom)
        for var in eqn.outputs:
            producer[var] = index
    for i, atom in enumerate(graph.outputs):
        dag.add_node(("output", i), kind="output", item=atom)
        if type(atom) is not Literal and atom in producer:
            dag.add_edge(producer[atom], ("output", i), var=atom)

    layer = {}
    for node in nx.topological_sort(dag):
        layer[node] = max((layer[p] + 1 for p in dag.predecessors(node)), default=0)
    bottom = max((layer[n] for n, kind in dag.nodes(data="kind") if kind != "output"),
                 default=-1) + 1
    for node, kind in dag.nodes(data="kind"):
        if kind == "output":
            layer[node] = bottom
        elif kind == "const" and dag.out_degree(node):
            layer[node] = min(layer[s] for s in dag.successors(node)) - 1

    rows = {}
    for node in dag.nodes:  # insertion order: the graph's own order is the first guess
        rows.setdefault(layer[node], []).append(node)
    x = {}

    def place(row):
        for k, node in enumerate(row):
            x[node] = k - (len(row) - 1) / 2

    for row in rows.values():
        place(row)
    for sweep in range(sweeps):
        # Down sweeps order a layer by its predecessors, up sweeps by its successors.
        neighbours = dag.predecessors if sweep % 2 == 0 else dag.successors
        for level in sorted(rows, reverse=sweep % 2 == 1):
            row = rows[level]
            centre = {n: [x[m] for m in neighbours(n)] for n in row}
            row.sort(key=lambda n: sum(centre[n]) / len(centre[n]) if centre[n] else x[n])
            place(row)
    nx.set_node_attributes(dag, {n: (x[n], -float(layer[n])) for n in dag.nodes}, "pos")
    return dag


__all__ = ["OUTPUT", "ROOT", "call_graph", "callee_of", "contracted_order", "dataflow_graph",
           "graph_from_order", "layout", "live_equations", "predecessors", "recursive_nodes",
           "stable_topological_order", "with_equations"]
