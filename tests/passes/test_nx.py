"""xform.ir.nx: dataflow and call graphs, stable orders, rebuilding graphs from an order."""
import networkx as nx
import numpy as np

import xform
from xform.ir.core import Equation, Graph, Primitive, Var
from xform.ir.nx import (OUTPUT, ROOT, call_graph, dataflow_graph, graph_from_order,
                         recursive_nodes, stable_topological_order, with_equations)
from xform.rules.binary import add_p, multiply_p
from xform.ir.registry import Hooks, register
from xform.rules.unary import cos_p, sin_p

from tests.passes.support import F64, Builder, lit


def _diamond():
    b = Builder()
    x = b.input()
    c = b.const(np.ones(2))
    s, k = b(sin_p, x), b(cos_p, x)
    b(sin_p, c)
    return b.graph(b(add_p, s, b(multiply_p, k, lit(2.0)))), (s, k)


def test_dataflow_graph_nodes_edges_and_vars():
    graph, (s, k) = _diamond()
    dag = dataflow_graph(graph)
    assert set(dag.nodes) == {0, 1, 2, 3, 4, OUTPUT}
    assert sorted(dag.edges, key=str) == sorted([(0, 4), (1, 3), (3, 4), (4, OUTPUT)], key=str)
    assert dag.edges[0, 4]["var"] is s and dag.edges[1, 3]["var"] is k
    assert dag.nodes[2]["eqn"] is graph.equations[2]
    assert nx.ancestors(dag, OUTPUT) == {0, 1, 3, 4}


def test_stable_topological_order_prefers_the_original_order():
    graph, _ = _diamond()
    assert stable_topological_order(dataflow_graph(graph)) == [0, 1, 2, 3, 4, OUTPUT]
    dag = nx.DiGraph([(3, 0), (2, 1), (0, OUTPUT)])
    dag.add_node(5)
    assert stable_topological_order(dag) == [2, 1, 3, 0, 5, OUTPUT]


def test_graph_from_order_drops_unread_consts():
    graph, _ = _diamond()
    smaller = graph_from_order(graph, [0, 1, 3, 4, OUTPUT]).check()
    assert smaller.consts == ()
    assert smaller.equations == tuple(graph.equations[i] for i in (0, 1, 3, 4))
    same = with_equations(graph, graph.equations)
    assert same.consts == graph.consts and same.outputs == graph.outputs


def test_with_equations_keeps_the_consts_read_or_returned():
    graph, _ = _diamond()
    (c, value), = graph.consts
    unread = with_equations(graph, graph.equations[:2])
    assert unread.consts == ()
    returned = with_equations(graph, graph.equations[:2], outputs=(c,)).check()
    assert returned.consts == ((c, value),)
    other = Var(F64)
    kept = with_equations(graph, graph.equations[:3], consts=[(c, value), (other, 1.0)])
    assert kept.consts == ((c, value),)      # the one read by sin; not the unread one


# -- call graphs ----------------------------------------------------------------------------------

call_p = Primitive("test_nx_call", multiple_results=True)


def _body(params):
    body = params["body"]
    return body if isinstance(body, Graph) else body()


register(call_p, impl=lambda *args, **params: xform.eval_graph(_body(params), *args),
         abstract_eval=lambda *avals, **params: list(_body(params).out_avals),
         hooks=Hooks(inline=lambda eqn: _body(eqn.params)))


def _chain(length):
    """f0 calls f1 calls ... calls f{length-1}, which calls nothing."""
    bodies = {}

    def make(i):
        x, out = Var(F64), Var(F64)
        if i == length - 1:
            return Graph([x], [], [Equation(sin_p, [x], [out])], [out])
        return Graph([x], [], [Equation(call_p, [x], [out],
                                        {"callee": f"f{i + 1}", "body": lambda: bodies[i + 1]})],
                     [out])
    for i in range(length):
        bodies[i] = make(i)
    b = Builder()
    x = b.input()
    (out,) = b(call_p, x, callee="f0", body=bodies[0])
    return b.graph(out)


def test_call_graph_of_a_chain():
    calls = call_graph(_chain(4))
    assert list(nx.topological_sort(calls)) == [ROOT, "f0", "f1", "f2", "f3"]
    assert all(expanded for _, expanded in calls.nodes(data="expanded"))
    assert recursive_nodes(calls) == set()
    assert repr(ROOT) == "ROOT"


def test_call_graph_stops_at_its_limit():
    calls = call_graph(_chain(10), limit=3)
    unexpanded = {n for n, expanded in calls.nodes(data="expanded") if not expanded}
    assert unexpanded and "f0" not in unexpanded
    assert calls.number_of_nodes() < 10


def test_recursive_nodes():
    calls = nx.DiGraph([(ROOT, "a"), ("a", "b"), ("b", "a"), (ROOT, "c"), ("c", "c"),
                        (ROOT, "d"), ("d", "e")])
    assert recursive_nodes(calls) == {"a", "b", "c"}
