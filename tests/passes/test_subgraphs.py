"""Every pass of PIPELINE applies inside every sub-graph kind reached through params (fused
regions, cond branches, while bodies, scan/fori bodies, threaded_map bodies): the sub-graph
is simplified, its signature kept, the graph checks, and results are bit for bit."""
import sys

import numpy as np
import pytest

import xform
from xform.ir.core import subgraphs
from xform.passes import (accumulate_pads, eliminate_common_subexpressions,
                          eliminate_dead_code, fold_constants, inline_calls, optimize)

from tests.passes.support import assert_same_results

X = np.linspace(0.2, 0.9, 3)


@xform.function
def helper(x):
    return np.cos(x) * 2.0


def body_for(pass_name):
    """A body holding what `pass_name` removes: a call, `* 1.0`, a repeated sin, dead code,
    or the pads of a gradient of indexing."""
    def body(x):
        if pass_name == "inline":
            return helper(x) + x
        if pass_name == "fold":
            return np.sin(x) * 1.0
        if pass_name == "cse":
            return np.sin(x) + np.sin(x)
        if pass_name == "dce":
            c = np.cos(x)
            np.exp(c)  # dead
            return np.sin(c)
        return x + xform.grad(lambda v: v[0] * v[1] + v[2] * v[0])(x)
    return body


KINDS = {
    "cond": lambda body: lambda x: xform.cond(np.sum(x) > 0, body, lambda v: v + 1.0, x),
    "while": lambda body: lambda x: xform.while_loop(lambda c: np.sum(c[1]) < 2, lambda c: (
        body(c[0]), c[1] + 1.0), (x, np.zeros(1)))[0],
    "fori": lambda body: lambda x: xform.fori_loop(0, 2, lambda i, c: body(c), x),
    "scan": lambda body: lambda x: xform.scan(lambda c, a: (body(c) * a, c), x, X)[0],
    "threaded_map": lambda body: lambda x: xform.threaded_map(body, np.stack([x, x])),
    "fused region": lambda body: body,
}
PASSES = {"inline": inline_calls, "fold": fold_constants,
          "cse": eliminate_common_subexpressions, "accumulate": accumulate_pads,
          "dce": eliminate_dead_code}
# What each pass removes, or adds, inside the sub-graph (primitive name -> count change sign).
EFFECT = {"inline": ("call", -1), "fold": ("multiply", -1), "cse": ("sin", -1),
          "accumulate": ("pad_sum", +1), "dce": ("exp", -1)}


def inner_primitives(graph) -> list:
    """Names of the equations inside every sub-graph of `graph`, recursively."""
    names = []
    for eqn in graph.equations:
        for sub in subgraphs(eqn.params):
            names += [e.primitive.name for e in sub.equations] + inner_primitives(sub)
    return names


def staged(kind, pass_name):
    fun = KINDS[kind](body_for(pass_name))
    graph = xform.make_graph(fun)(X)
    if kind == "fused region":
        fuse = sys.modules["xform.passes.fuse"]
        graph = fuse.fuse_elementwise(inline_calls(graph) if pass_name == "inline" else graph)
    return graph


# Pairs that cannot occur, so are not generated: a fused region holds element-wise equations
# only (no call, no pad); threaded_map maps its body over elements (no indexing to
# accumulate) and inlines @xform.function calls when it stages its body (no call left).
IMPOSSIBLE = {("fused region", "inline"), ("fused region", "accumulate"),
              ("threaded_map", "accumulate"), ("threaded_map", "inline")}
PAIRS = [(kind, pass_name) for kind in KINDS for pass_name in PASSES
         if (kind, pass_name) not in IMPOSSIBLE]


@pytest.mark.parametrize("kind, pass_name", PAIRS)
def test_each_pass_applies_inside_each_sub_graph_kind(monkeypatch, kind, pass_name):
    monkeypatch.setattr(sys.modules["xform.passes.fuse"], "_pays", lambda members, f: True)
    graph = staged(kind, pass_name)
    before = inner_primitives(graph)
    assert before, f"no sub-graph staged for {kind}"
    name, sign = EFFECT[pass_name]
    assert sign > 0 or name in before, f"staging {kind} left no {name} in its sub-graph"
    after = optimize(graph, passes=(PASSES[pass_name],))
    after.check()
    if pass_name == "accumulate":
        # pad_sum adds a body's value read before its pads in another association than the
        # add tree (the same at top level; see the report): equal to rounding.
        for got, want in zip(xform.eval_graph(after, X), xform.eval_graph(graph, X)):
            np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)
    else:
        assert_same_results(graph, after, X)
    change = inner_primitives(after).count(name) - before.count(name)
    assert change * sign > 0, (kind, pass_name, before, inner_primitives(after))
    # Signatures are kept: the owner reads its sub-graphs as before.
    for old, new in zip(graph.equations, after.equations):
        for a, b in zip(subgraphs(old.params), subgraphs(new.params)):
            assert [v.aval for v in a.inputs] == [v.aval for v in b.inputs]
            assert [v.aval for v in a.outputs] == [v.aval for v in b.outputs]


def test_a_shared_sub_graph_is_optimized_once(monkeypatch):
    calls = []

    def counting(graph):
        calls.append(graph)
        return fold_constants(graph)
    body = body_for("fold")
    graph = xform.make_graph(lambda x: xform.cond(np.sum(x) > 0, body, body, x))(X)
    optimize(graph, passes=(counting,))
    branches = [sub for eqn in graph.equations for sub in subgraphs(eqn.params)]
    distinct = {id(b) for b in branches}
    assert len(calls) == len(distinct) + 1  # each distinct branch, then the graph


def test_a_gradient_through_an_optimized_body_is_unchanged_bit_for_bit():
    fun = KINDS["scan"](body_for("fold"))
    want = xform.grad(lambda x: np.sum(KINDS["scan"](np.sin)(x)))(X)
    got = xform.grad(lambda x: np.sum(fun(x)))(X)
    np.testing.assert_array_equal(got, want)
