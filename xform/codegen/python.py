"""Codegen: a graph becomes the source of one Python function, compiled once.

One statement per equation; primitive impls, constants and literals are bound as globals of
the generated module under generated names, so no user text reaches the source. A value is
deleted right after its last use (an unused one right after it is made), so large
intermediates are freed as early as possible.
"""
from __future__ import annotations

import functools
import itertools
import linecache
import weakref

from xform.ir.core import Graph, Literal
from xform.rules.registry import rule_for

_counter = itertools.count()


class CompiledGraph:
    """A callable made from a graph: `CompiledGraph(graph)(*args) -> list of outputs`.

    Notes: the graph is held weakly. Caches key compiled code by graph in weak dictionaries;
    a strong reference from the value back to its key would keep both alive forever.
    """

    __slots__ = ("_graph", "source", "fn", "__weakref__")

    def __init__(self, graph: Graph, source: str, fn):
        self._graph = weakref.ref(graph)
        self.source = source
        self.fn = fn

    @property
    def graph(self) -> Graph | None:
        """The graph this was compiled from, or None once nothing else holds it."""
        return self._graph()

    def __call__(self, *args):
        return self.fn(*args)


def _frees(graph: Graph) -> list[list]:
    """For each equation, the vars to delete after it, in the order the equation names them:
    the inputs whose last use it is, then the outputs nobody uses. Outputs of the graph are
    never deleted."""
    last = {}
    for index, eqn in enumerate(graph.equations):
        for atom in eqn.inputs:
            if type(atom) is not Literal:
                last[atom] = index
        for var in eqn.outputs:
            last.setdefault(var, index)
    for atom in graph.outputs:
        last.pop(atom, None)
    frees = []
    for index, eqn in enumerate(graph.equations):
        dead = [v for v in (*eqn.inputs, *eqn.outputs) if last.get(v, -1) == index]
        frees.append(list(dict.fromkeys(dead)))
    return frees


def check_values(eqn, *values):
    """Debug mode: raise RuleError unless each value matches its abstract value."""
    import numpy as np

    from xform.errors import RuleError
    for var, value in zip(eqn.outputs, values):
        shape, dtype = np.shape(value), np.result_type(value)
        if shape != var.aval.shape or dtype != var.aval.dtype:
            made_by = f", emitted by the {eqn.origin} rule" if eqn.origin else ""
            raise RuleError(
                f"'{eqn.primitive}' (impl{made_by}) produced {dtype}{list(shape)} where the "
                f"graph promises {var.aval.str_short()}", eqn.source,
                f"check the rules of '{eqn.primitive}'"
                + (f" and of the primitive whose {eqn.origin.split(' of ')[0]} rule emitted it"
                   if eqn.origin else ""))


def _infix_operators() -> dict:
    from xform.rules.binary import add_p, divide_p, multiply_p, subtract_p
    return {add_p: "+", subtract_p: "-", multiply_p: "*", divide_p: "/"}


def _is_numpy_valued(atom) -> bool:
    """Whether the value is surely a numpy array or scalar at run time, never a Python
    scalar: Python scalars only arrive as weak inputs/literals, or as bools."""
    aval = atom.aval
    return bool(aval.shape) or (not aval.weak_type and aval.dtype.kind != "b")


def graph_source(graph: Graph, debug: bool = False) -> tuple[str, dict]:
    """(source, globals) of the function computing `graph`; with `debug`, every equation's
    outputs are checked against their abstract values as they are computed.

    Names: `a*` arguments, `c*` constants, `k*` literals, `f*` impls, `v*` values, `e*`
    equations (debug only).
    """
    names: dict = {}
    namespace: dict = {}
    literals = itertools.count()

    def name_of(atom):
        if type(atom) is Literal:
            key = f"k{next(literals)}"
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
    frees = _frees(graph)
    values = itertools.count()
    infix = _infix_operators()
    for index, eqn in enumerate(graph.equations):
        impl = rule_for(eqn, "impl")
        fn_name = f"f{index}"
        in_names = [name_of(a) for a in eqn.inputs]
        ins = ", ".join(in_names)
        for var in eqn.outputs:
            names[var] = f"v{next(values)}"
        outs = ", ".join(names[v] for v in eqn.outputs)
        operator = infix.get(eqn.primitive)
        if operator is not None and any(_is_numpy_valued(a) for a in eqn.inputs):
            # numpy's own scalar and array operators compute exactly what the ufunc does,
            # without the ufunc call overhead (which dominates on scalars).
            body.append(f"    {outs} = {in_names[0]} {operator} {in_names[1]}")
            if debug:
                namespace[f"e{index}"] = eqn
                namespace["check_values"] = check_values
                body.append(f"    check_values(e{index}, {outs})")
        elif not eqn.outputs:
            namespace[fn_name] = functools.partial(impl, **eqn.params) if eqn.params else impl
            body.append(f"    {fn_name}({ins})")
        else:
            namespace[fn_name] = functools.partial(impl, **eqn.params) if eqn.params else impl
            if eqn.primitive.multiple_results and len(eqn.outputs) == 1:
                outs += ","
            body.append(f"    {outs} = {fn_name}({ins})")
            if debug:
                namespace[f"e{index}"] = eqn
                namespace["check_values"] = check_values
                body.append(f"    check_values(e{index}, {outs})")
        # constants are globals of the module; only arguments and values are local
        dead = [names[v] for v in frees[index] if names.get(v, "c")[0] in "va"]
        if dead:
            body.append(f"    del {', '.join(dead)}")
    outs = ", ".join(name_of(a) for a in graph.outputs)
    body.append(f"    return [{outs}]")
    source = f"def xform_graph({', '.join(args)}):\n" + "\n".join(body) + "\n"
    return source, namespace


def compile_graph(graph: Graph) -> CompiledGraph:
    """Compile `graph` once into a Python function.

    >>> compile_graph(make_graph(np.sin)(1.0))(0.0)
    [0.0]
    """
    from xform.config import config
    source, namespace = graph_source(graph, config.debug)
    filename = f"<xform-generated-{next(_counter)}>"
    exec(compile(source, filename, "exec"), namespace)
    compiled = CompiledGraph(graph, source, namespace["xform_graph"])
    # Registered so that tracebacks through generated code show its lines, for as long as
    # the code lives (linecache never drops entries without a file by itself).
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    weakref.finalize(compiled, linecache.cache.pop, filename, None)
    return compiled
