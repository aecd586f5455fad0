"""Transposition: run a graph that is linear in some inputs backwards.

Equations that do not depend on a linear input are evaluated forwards (they compute
coefficients such as `cos(x)`); the linear ones are transposed in reverse order with a
cotangent environment that pops on read and sums on write.
"""
from __future__ import annotations

from xform.ir.builder import bind, source_scope
from xform.ir.core import Literal
from xform.ir.ad import Undefined, Zero, add_tangents, zero_tangent
from xform.ir.registry import rule_for


def backward_pass(graph, args, linear, cts):
    """Cotangents of the `linear` inputs of `graph`, given output cotangents `cts`.

    `args` holds values for the non-linear inputs (entries for linear inputs are ignored).
    Emits into the current builder. Returns one cotangent (or Zero) per linear input.
    """
    env = {var: value for var, value in graph.consts}
    linear_vars = set()
    for var, value, is_linear in zip(graph.inputs, args, linear):
        if is_linear:
            linear_vars.add(var)
        else:
            env[var] = value

    def read(atom):
        return atom.value if type(atom) is Literal else env[atom]

    linear_eqns = []
    for eqn in graph.equations:
        if any(type(a) is not Literal and a in linear_vars for a in eqn.inputs):
            linear_eqns.append(eqn)
            linear_vars.update(eqn.outputs)
            continue
        with source_scope(eqn.source, eqn.origin):
            outs = bind(eqn.primitive, *map(read, eqn.inputs), **eqn.params)
        env.update(zip(eqn.outputs, outs if eqn.primitive.multiple_results else [outs]))

    ct_env = {}
    for atom, ct in zip(graph.outputs, cts):
        if type(atom) is not Literal and atom in linear_vars and type(ct) is not Zero:
            ct_env[atom] = add_tangents(ct_env.get(atom, Zero(atom.aval)), ct)

    for eqn in reversed(linear_eqns):
        cts_out = [ct_env.pop(v, None) for v in eqn.outputs]
        if all(ct is None for ct in cts_out):
            continue
        ins = [Undefined(a.aval) if type(a) is not Literal and a in linear_vars else read(a)
               for a in eqn.inputs]
        with source_scope(eqn.source, f"transpose of {eqn.primitive}"):
            transpose = rule_for(eqn, "transpose")
            if eqn.primitive.multiple_results:
                cts_out = [zero_tangent(v.aval) if ct is None else ct
                           for ct, v in zip(cts_out, eqn.outputs)]
                cts_in = transpose(cts_out, *ins, **eqn.params)
            else:
                cts_in = transpose(cts_out[0], *ins, **eqn.params)
        for atom, x, ct in zip(eqn.inputs, ins, cts_in):
            if type(x) is Undefined and ct is not None and type(ct) is not Zero:
                ct_env[atom] = add_tangents(ct_env.get(atom, Zero(atom.aval)), ct)

    return [ct_env.get(var, Zero(var.aval)) for var, is_linear in zip(graph.inputs, linear)
            if is_linear]
