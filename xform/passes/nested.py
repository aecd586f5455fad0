"""Passes inside sub-graphs: every Graph an equation holds in its params (fused regions,
cond/switch branches, loop bodies, calls, threaded_map bodies, custom rule graphs) goes
through the same passes, keeping its signature (inputs and outputs, as the owner reads them)."""
from __future__ import annotations

import attrs

from xform.ir.core import Graph, Params
from xform.ir.nx import with_equations


def optimize_subgraphs(graph: Graph, optimize_one, done: dict) -> Graph:
    """`graph` with every sub-graph of its equations replaced by `optimize_one(sub-graph)`
    (which recurses), each distinct sub-graph optimized once (`done`: id -> (graph, result),
    shared over one `optimize`); `graph` itself when no sub-graph changed.

    >>> from xform.passes.nested import optimize_subgraphs
    >>> graph = xform.make_graph(lambda x: np.sin(x))(1.0)
    >>> optimize_subgraphs(graph, xform.passes.optimize, {}) is graph   # no sub-graph
    True
    """
    equations = None
    for index, eqn in enumerate(graph.equations):
        if not eqn.params:
            continue
        params = _optimized_params(eqn.params, optimize_one, done)
        if params is not None:
            if equations is None:
                equations = list(graph.equations)
            equations[index] = attrs.evolve(eqn, params=params)
    return graph if equations is None else with_equations(graph, equations)


def _optimized_params(params: Params, optimize_one, done):
    """`params` with its sub-graphs optimized, or None when none changed."""
    changed = {}
    for key, value in params.items():
        if type(value) is Graph:
            new = _optimized(value, optimize_one, done)
            if new is not value:
                changed[key] = new
        elif type(value) is tuple and any(type(item) is Graph for item in value):
            items = tuple(_optimized(item, optimize_one, done) if type(item) is Graph else item
                          for item in value)
            if any(a is not b for a, b in zip(items, value)):
                changed[key] = items
    return Params({**params, **changed}) if changed else None


def _optimized(sub: Graph, optimize_one, done) -> Graph:
    key = id(sub)
    if key not in done:
        # The graph is held with its result so that its id is not reused meanwhile.
        done[key] = (sub, optimize_one(sub))
    return done[key][1]


__all__ = ["optimize_subgraphs"]
