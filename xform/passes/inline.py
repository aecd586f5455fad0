"""Inlining: a call equation whose callee is not recursive and is small is replaced by the
callee's body. Recursion is found as cycles of the call graph (xform.ir.nx.call_graph)."""
from __future__ import annotations

from collections import deque

from xform.ir.core import Graph, holds_subgraphs
from xform.ir.nx import call_graph, callee_of, recursive_nodes
from xform.passes.rewrite import GraphRewriter
from xform.ir.registry import call_primitives

_MAX_GROWTH = 100_000  # equations added per pass: a DAG of calls can still grow exponentially


def inline_calls(graph: Graph, max_equations: int = 200) -> Graph:
    """Replace each top-level call (a primitive with an `inline` rule) by its callee's body
    when the callee is not recursive and has at most `max_equations` equations. Calls inside
    an inlined body are considered in turn; calls inside other sub-graphs (branches) stay.

    `inline(eqn) -> Graph | None` gives the closed body: its inputs take `eqn.inputs`, its
    outputs stand for `eqn.outputs`; `eqn.params["callee"]` is the hashable key naming the
    callee in the call graph.
    >>> from xform.passes import inline_calls
    >>> @xform.function
    ... def square(x):
    ...     return x * x
    >>> print(inline_calls(xform.make_graph(lambda x: square(x) + 1.0)(1.0)))  # no `call` left
    { lambda a:~f64[] . let
        b:f64[] = multiply a a
        c:f64[] = add b 1.0
      in (c) }
    """
    calls = call_primitives()
    if not any(eqn.primitive in calls or (eqn.params and holds_subgraphs(eqn.params))
               for eqn in graph.equations):
        return graph      # no call, nor a sub-graph that may hold one: no call graph to build
    calls = call_graph(graph)
    # Recursive callees, and callees past the call graph's size limit (their calls unknown).
    blocked = recursive_nodes(calls)
    blocked.update(key for key, expanded in calls.nodes(data="expanded") if not expanded)
    rewriter = GraphRewriter(graph)
    queue = deque(graph.equations)
    budget = _MAX_GROWTH
    while queue:
        eqn = rewriter.substituted(queue.popleft())
        found = callee_of(eqn)
        if found is not None:
            key, body = found
            size = len(body.equations)
            if key in calls and key not in blocked and size <= min(max_equations, budget):
                budget -= size
                queue.extendleft(reversed(rewriter.splice(body, eqn.inputs, eqn.outputs)))
                continue
        rewriter.emit(eqn)
    return rewriter.build()


__all__ = ["inline_calls"]
