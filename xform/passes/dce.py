"""Dead-code elimination: keep only equations an output depends on."""
from __future__ import annotations

import networkx as nx

from xform.ir.core import Graph
from xform.ir.nx import OUTPUT, dataflow_graph, graph_from_order


def eliminate_dead_code(graph: Graph) -> Graph:
    """Drop every equation no output depends on (all primitives are pure).

    >>> eliminate_dead_code(make_graph(lambda x: (np.sin(x), x)[1])(1.0))  # no `sin` left
    """
    dag = dataflow_graph(graph)
    live = nx.ancestors(dag, OUTPUT)
    if len(live) == len(graph.equations):
        return graph
    return graph_from_order(graph, sorted(live))
