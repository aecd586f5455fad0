"""eval_graph: the reference interpreter. Under an active builder it re-emits the equations,
which is how a transformed graph is inlined into an enclosing staging. run_concrete: the same
on concrete values only, calling each primitive's impl directly (a first call's tier)."""
from __future__ import annotations

from contextvars import ContextVar

import numpy as np

from xform.ir.builder import (bind, current_builder, enter_source_scope, leave_source_scope,
                              source_scope)
from xform.ir.core import Literal
from xform.ir.registry import RULES, primitive_for
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
        token = enter_source_scope((eqn.source, eqn.origin))
        try:
            outs = bind(eqn.primitive, *[read(env, a) for a in eqn.inputs], **eqn.params)
        finally:
            leave_source_scope(token)
        if eqn.primitive.multiple_results:
            env.update(zip(eqn.outputs, outs))
        else:
            env[eqn.outputs[0]] = outs
    return env


def run_concrete(graph, args, known=None) -> list:
    """Evaluate `graph` on concrete `args` (arrays and scalars, no tracers) with each
    primitive's impl; returns the list of outputs. eval_graph's results without its per-
    equation staging checks: the interpreter of a transform's first call
    (xform.runtime.tiers), whose values are the compiled code's (the scalar path's are too:
    xform.codegen.scalar keeps numpy's bits unless scalar_math is "fast"); `known` as in
    concrete_env.

    >>> from xform.ir.interpret import run_concrete
    >>> run_concrete(xform.make_graph(lambda x: np.sin(x) * 2)(1.0), [0.5])
    [np.float64(0.958851077208406)]
    """
    env = concrete_env(graph, args, known)
    return [atom.value if type(atom) is Literal else env[atom] for atom in graph.outputs]


def _all_known(outputs, known_values) -> bool:
    for var in outputs:
        if var not in known_values:
            return False
    return True


def _none_in(inputs, recomputed) -> bool:
    for atom in inputs:
        if type(atom) is not Literal and atom in recomputed:
            return False
    return True


def concrete_env(graph, args, known=None) -> dict:
    """run_concrete's environment: var -> value for every var of `graph`. `known` holds
    `(values, equations)` computed already for these `args` by staging with values
    (xform.ir.values): those equations are not run again."""
    env = dict(graph.consts)
    env.update(zip(graph.inputs, args))
    rules = RULES
    if known is not None:
        known_values, staged = known
        staged_ids, draws = staged.ids, staged.draws
        recomputed = set()
    for eqn in graph.equations:
        if known is not None:
            # An equation staging computed, none of whose inputs was computed again here (a
            # pass may have rewritten one: its value may round differently)
            outputs = eqn.outputs
            if outputs and id(eqn) in staged_ids and _all_known(outputs, known_values) \
                    and (not recomputed or _none_in(eqn.inputs, recomputed)):
                for var in outputs:
                    env[var] = known_values[var]
                continue
            recomputed.update(outputs)
        values = [atom.value if type(atom) is Literal else env[atom] for atom in eqn.inputs]
        rule = rules.get(eqn.primitive)
        impl = None if rule is None else rule.impl
        if impl is None:   # eval_graph's error, naming the rule and the user's line
            with source_scope(eqn.source, eqn.origin):
                outs = bind(eqn.primitive, *values, **eqn.params)
        else:
            outs = impl(*values, **eqn.params)
        if eqn.primitive.multiple_results:
            env.update(zip(eqn.outputs, outs))
        else:
            env[eqn.outputs[0]] = outs
        if known is not None and draws and id(eqn) in draws \
                and _drew_as_staged(eqn.outputs, env, known_values):
            # what staging computed from the draw's copy is what this run computes from it
            recomputed.difference_update(eqn.outputs)
    return env


class StagedRegions:
    """The values staging computed inside the fused regions of a first call's graph, whose
    outputs the call took from staging (concrete_env): a region's vjp on values reads them
    (`values_in`) rather than computing the region again. Found by following the region's
    equations to the staged ones fusion took them from (the same primitive and params on the
    same atoms): an element-wise equation gives the same bits in a region as alone."""

    __slots__ = ("_graph", "_env", "_known", "_fused", "_readers")

    def __init__(self, graph, env, known):
        self._graph, self._env, self._known = graph, env, known
        self._fused = None      # id(region) -> the graph's equation holding it
        self._readers = None    # (primitive, ids of its input atoms) -> staged equations

    def values_in(self, region) -> dict:
        """region var -> value, for the vars of `region` (a param of the graph's `elementwise`
        equation) whose values staging computed: empty where the call computed them."""
        if self._fused is None:
            fusion_p = primitive_for("fusion")
            self._fused = {id(eqn.params["region"]): eqn for eqn in self._graph.equations
                           if eqn.primitive is fusion_p}
        eqn = self._fused.get(id(region))
        if eqn is None:
            return {}
        env, (known_values, staged_equations) = self._env, self._known
        for var in eqn.outputs:
            if env.get(var) is not known_values.get(var):
                return {}   # (not the values staging computed: the call ran the region)
        readers = self._readers
        if readers is None:
            readers = self._readers = {}
            for staged in staged_equations:
                key = (staged.primitive, tuple([id(a) for a in staged.inputs]))
                readers.setdefault(key, []).append(staged)
        outer = dict(zip(region.inputs, eqn.inputs))
        values = {}
        for inner in region.equations:
            atoms = [id(a) if type(a) is Literal else id(outer.get(a)) for a in inner.inputs]
            for staged in readers.get((inner.primitive, tuple(atoms)), ()):
                # (fusion keeps an equation's params object: equality only for a twin)
                if staged.params is inner.params or staged.params == inner.params:
                    break
            else:
                return values
            for var, staged_var in zip(inner.outputs, staged.outputs):
                value = known_values.get(staged_var)
                if value is None:
                    return values
                outer[var] = staged_var
                values[var] = value
        return values


# The StagedRegions of the first call whose reverse pass runs (xform.transforms.vjp)
first_call_regions: ContextVar = ContextVar("xform_first_call_regions", default=None)


def _drew_as_staged(outputs, env, known_values) -> bool:
    """Whether a draw's `outputs` hold, in `env`, the bits staging drew for them."""
    for var in outputs:
        drawn, staged = env[var], known_values.get(var)
        if type(drawn) is not type(staged) or np.shape(drawn) != np.shape(staged) \
                or np.asarray(drawn).tobytes() != np.asarray(staged).tobytes():
            return False
    return True
