"""Codegen: a graph becomes the source of one Python function, compiled once.

One statement per equation; primitive impls, constants and literals are bound as globals of
the generated module under generated names, so no user text reaches the source. A value is
deleted right after its last use, so large intermediates are freed as early as possible.
"""
from __future__ import annotations

import functools
import itertools

from xform.ir.core import Graph, Literal
from xform.rules.registry import rule_for

_counter = itertools.count()


class CompiledGraph:
    """A callable made from a graph: `CompiledGraph(graph)(*args) -> list of outputs`."""

    __slots__ = ("graph", "source", "fn")

    def __init__(self, graph: Graph, source: str, fn):
        self.graph = graph
        self.source = source
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)


def _last_uses(graph: Graph) -> list[list]:
    """For each equation, the vars whose last use it is (outputs of the graph excluded)."""
    last = {}
    for index, eqn in enumerate(graph.equations):
        for atom in eqn.inputs:
            if type(atom) is not Literal:
                last[atom] = index
    for atom in graph.outputs:
        last.pop(atom, None)
    frees = [[] for _ in graph.equations]
    for var, index in last.items():
        frees[index].append(var)
    return frees


def graph_source(graph: Graph) -> tuple[str, dict]:
    """(source, globals) of the function computing `graph`."""
    names: dict = {}
    namespace: dict = {}

    def name_of(atom):
        if type(atom) is Literal:
            key = f"k{len(namespace)}"
            namespace[key] = atom.value
            return key
        return names[atom]

    args = []
    for i, var in enumerate(graph.inputs):
        names[var] = f"a{i}"
        args.append(names[var])
    for i, (var, value) in enumerate(graph.consts):
        names[var] = f"c{i}"
        namespace[names[var]] = value
    body = []
    frees = _last_uses(graph)
    counter = itertools.count()
    for index, eqn in enumerate(graph.equations):
        impl = rule_for(eqn, "impl")
        fn_name = f"f{index}"
        namespace[fn_name] = functools.partial(impl, **eqn.params) if eqn.params else impl
        ins = ", ".join(name_of(a) for a in eqn.inputs)
        for var in eqn.outputs:
            names[var] = f"v{next(counter)}"
        outs = ", ".join(names[v] for v in eqn.outputs)
        if eqn.primitive.multiple_results:
            outs = outs + ("," if len(eqn.outputs) == 1 else "")
        body.append(f"    {outs} = {fn_name}({ins})")
        dead = [names[v] for v in frees[index] if v in names and names[v][0] in "va"]
        if dead:
            body.append(f"    del {', '.join(dead)}")
    outs = ", ".join(name_of(a) for a in graph.outputs)
    body.append(f"    return [{outs}]")
    source = f"def xform_graph({', '.join(args)}):\n" + "\n".join(body) + "\n"
    return source, namespace


def compile_graph(graph: Graph) -> CompiledGraph:
    """Compile `graph` once into a Python function."""
    source, namespace = graph_source(graph)
    code = compile(source, f"<xform-generated-{next(_counter)}>", "exec")
    exec(code, namespace)
    return CompiledGraph(graph, source, namespace["xform_graph"])
