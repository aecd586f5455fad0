"""Forward mode: `jvp_graph(graph)` is a graph computing outputs and output tangents."""
from __future__ import annotations

from xform.ir.avals import is_differentiable, tangent_aval
from xform.ir.builder import GraphBuilder, bind, source_scope, using_builder
from xform.ir.core import Literal
from xform.ir.ad import Zero, check_rule_outputs, fit_tangent, instantiate, zero_tangent
from xform.ir.registry import rule_for


def jvp_graph(graph, nonzeros=None):
    """Inputs: primals, then a tangent for each input marked in `nonzeros` (default: every
    differentiable input). Outputs: primal outputs, then one tangent per output (float0 zeros
    for integer outputs).

    >>> print(xform.jvp_graph(xform.make_graph(np.sin)(1.0)))    # inputs: primal a, tangent b
    { lambda a:~f64[] b:f64[] . let
        c:f64[] = sin a
        d:f64[] = cos a
        e:f64[] = multiply b d
      in (c, e) }
    """
    if nonzeros is None:
        nonzeros = [is_differentiable(v.aval) for v in graph.inputs]
    builder = GraphBuilder()
    with using_builder(builder):
        primals = [builder.new_input(v.aval) for v in graph.inputs]
        tangents = [builder.new_input(tangent_aval(v.aval)) if nz else zero_tangent(v.aval)
                    for v, nz in zip(graph.inputs, nonzeros)]
        outs, t_outs = jvp_eval(graph, primals, tangents)
        t_outs = [instantiate(t) for t in t_outs]
    return builder.build(list(outs) + t_outs)


def jvp_eval(graph, primals, tangents):
    """Emit the jvp of `graph` into the current builder; returns (outs, tangents)."""
    env = {}
    tangent_env = {}
    for var, value in graph.consts:
        env[var] = value
    for var, primal, tangent in zip(graph.inputs, primals, tangents):
        env[var] = primal
        tangent_env[var] = tangent

    def read(atom):
        return atom.value if type(atom) is Literal else env[atom]

    def read_tangent(atom):
        if type(atom) is Literal:
            return zero_tangent(atom.aval)
        tangent = tangent_env.get(atom)
        return tangent if tangent is not None else zero_tangent(atom.aval)

    for eqn in graph.equations:
        ins = [read(a) for a in eqn.inputs]
        tangents_in = [read_tangent(a) for a in eqn.inputs]
        with source_scope(eqn.source, f"jvp of {eqn.primitive}"):
            if all(type(t) is Zero for t in tangents_in):
                outs = bind(eqn.primitive, *ins, **eqn.params)
                outs = outs if eqn.primitive.multiple_results else [outs]
                tangents_out = [zero_tangent(v.aval) for v in eqn.outputs]
            else:
                outs, tangents_out = rule_for(eqn, "jvp")(ins, tangents_in, **eqn.params)
                if not eqn.primitive.multiple_results:
                    outs, tangents_out = [outs], [tangents_out]
                check_rule_outputs(eqn, "jvp", outs, [v.aval for v in eqn.outputs])
                check_rule_outputs(eqn, "jvp", tangents_out,
                                   [tangent_aval(v.aval) for v in eqn.outputs], tangent=True)
                tangents_out = [fit_tangent(t, v.aval) for t, v in zip(tangents_out, eqn.outputs)]
        for var, out, tangent in zip(eqn.outputs, outs, tangents_out):
            env[var] = out
            tangent_env[var] = tangent
    return [read(a) for a in graph.outputs], [read_tangent(a) for a in graph.outputs]


