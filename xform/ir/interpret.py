"""eval_graph: the reference interpreter. Under an active builder it re-emits the equations,
which is how a transformed graph is inlined into an enclosing staging."""
from __future__ import annotations

from xform.ir.builder import bind, current_builder, source_scope
from xform.ir.core import Literal
from xform.ir.tracer import Tracer


def eval_graph(graph, *args):
    """Evaluate `graph` on `args` (arrays, or tracers of the current builder); returns a list.

    >>> xform.eval_graph(xform.make_graph(lambda x: x * 2)(1.0), 3.0)
    [np.float64(6.0)]
    """
    if len(args) != len(graph.inputs):
        from xform.errors import TypeCheckError
        from xform.source_info import user_frame_info
        raise TypeCheckError(f"eval_graph: the graph takes {len(graph.inputs)} arguments, "
                             f"got {len(args)}", user_frame_info(),
                             "pass the arguments separately: eval_graph(graph, x, y)")
    env = emit_equations(graph, args)
    return [read(env, atom) for atom in graph.outputs]


def read(env, atom):
    return atom.value if type(atom) is Literal else env[atom]


def emit_equations(graph, args) -> dict:
    """Bind every equation of `graph` on `args`; returns the environment var -> value."""
    builder = current_builder()
    if builder is not None and all(type(a) is Tracer and a.builder is builder
                                   and a.graph_var is v for a, v in zip(args, graph.inputs)):
        if builder.adopt(graph):   # args are the graph's own inputs: take it as it is
            env = {var: value for var, value in graph.consts}  # rules may fold on them
            env.update(zip(graph.inputs, args))
            env.update((var, Tracer(builder, var))
                       for eqn in graph.equations for var in eqn.outputs)
            return env
    env = {var: value for var, value in graph.consts}
    env.update(zip(graph.inputs, args))
    for eqn in graph.equations:
        with source_scope(eqn.source, eqn.origin):
            outs = bind(eqn.primitive, *[read(env, a) for a in eqn.inputs], **eqn.params)
        if eqn.primitive.multiple_results:
            env.update(zip(eqn.outputs, outs))
        else:
            env[eqn.outputs[0]] = outs
    return env
