"""The only place that knows networkx: graph <-> DiGraph conversions used by the passes."""
from __future__ import annotations

import networkx as nx

from xform.ir.core import Graph, Literal

OUTPUT = "out"  # the sink node standing for the graph's outputs


def dataflow_graph(graph: Graph) -> nx.DiGraph:
    """Nodes: equation indices, plus OUTPUT; an edge u -> v (attr `var`) when v reads u's output.

    Inputs and constants are not nodes: an equation reading only them has no in-edges.
    """
    dag = nx.DiGraph()
    producer = {}
    for index, eqn in enumerate(graph.equations):
        dag.add_node(index, eqn=eqn)
        for atom in eqn.inputs:
            if type(atom) is not Literal and atom in producer:
                dag.add_edge(producer[atom], index, var=atom)
        for var in eqn.outputs:
            producer[var] = index
    dag.add_node(OUTPUT)
    for atom in graph.outputs:
        if type(atom) is not Literal and atom in producer:
            dag.add_edge(producer[atom], OUTPUT, var=atom)
    return dag


def graph_from_order(graph: Graph, order, outputs=None) -> Graph:
    """`graph` with its equations replaced by those at indices `order`, in that order; consts
    no longer read are dropped."""
    equations = [graph.equations[i] for i in order if i != OUTPUT]
    outputs = graph.outputs if outputs is None else outputs
    read = {a for eqn in equations for a in eqn.inputs if type(a) is not Literal}
    read.update(a for a in outputs if type(a) is not Literal)
    consts = tuple((v, c) for v, c in graph.consts if v in read)
    return Graph(graph.inputs, consts, equations, outputs)


def stable_topological_order(dag: nx.DiGraph) -> list:
    """A topological order that keeps the original equation order where it can."""
    return list(nx.lexicographical_topological_sort(
        dag, key=lambda n: float("inf") if n == OUTPUT else n))
