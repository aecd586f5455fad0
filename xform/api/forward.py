"""Forward mode: `jvp` (cached per signature) and `linearize`."""
from __future__ import annotations

import numpy as np

from xform.api.dispatch import Transformed, aval_of_signature, leaf_signature, run
from xform.api.pipeline import finish_graph
from xform.errors import ShapeError, TreeMismatchError
from xform.ir.ad import instantiate, zero_tangent
from xform.ir.avals import is_differentiable, tangent_aval
from xform.ir.builder import GraphBuilder, stage_function, using_builder
from xform.ir.core import Graph, Var
from xform.ir.tracer import Tracer
from xform.passes import optimize
from xform.runtime.config import config
from xform.source_info import user_frame_info
from xform.transforms import jvp_eval, split_graph
from xform.tree import tree_flatten, tree_unflatten


def as_dtype(value, dtype):
    """A tangent or cotangent in the dtype its primal's tangent has (float32 tangents for
    float64 primals are cast, as autograd and torch do, rather than refused)."""
    if type(value) is Tracer:
        return value if value.dtype == dtype else value.astype(dtype)
    if isinstance(value, np.ndarray) and value.dtype == dtype:
        return value
    return np.asarray(value, dtype)[()] if np.ndim(value) == 0 else np.asarray(value, dtype)


def _check_tangents(primal_leaves, tangent_leaves, p_tree, t_tree):
    if p_tree != t_tree:
        raise TreeMismatchError(f"tangents have structure {t_tree}, primals {p_tree}",
                                user_frame_info())
    for p, t in zip(primal_leaves, tangent_leaves):
        p_shape, t_shape = leaf_signature(p)[0], np.shape(t)
        if p_shape != t_shape:
            raise ShapeError(f"tangent of shape {t_shape} for a primal of shape {p_shape}",
                             user_frame_info())


def jvp(fun, primals, tangents):
    """`(fun(*primals), J @ tangents)`: forward-mode derivative along `tangents`.

    >>> xform.jvp(lambda x: x ** 2, (3.0,), (0.5,))    # (x**2, 2 x * 0.5)
    (np.float64(9.0), np.float64(3.0))
    """
    primals, tangents = tuple(primals), tuple(tangents)
    p_leaves, p_tree = tree_flatten(primals)
    t_leaves, t_tree = tree_flatten(tangents)
    _check_tangents(p_leaves, t_leaves, p_tree, t_tree)
    avals = [aval_of_signature(leaf_signature(x)) for x in p_leaves]
    diff = [is_differentiable(a) for a in avals]

    def build(in_tree, _avals):
        graph, captured, out_tree = stage_function(fun, p_tree, avals)
        builder = GraphBuilder()
        with using_builder(builder):
            ins = [builder.new_input(a) for a in avals]
            t_ins = [builder.new_input(tangent_aval(a)) if d else zero_tangent(a)
                     for a, d in zip(avals, diff)]
            ins += [builder.new_input(v.aval) for v in graph.inputs[len(avals):]]
            t_ins += [zero_tangent(v.aval) for v in graph.inputs[len(avals):]]
            outs, t_outs = jvp_eval(graph, ins, t_ins)
            t_outs = [instantiate(t) for t in t_outs]
        jvp_graph_ = builder.build(list(outs) + t_outs)

        def unflatten(results):
            n = len(outs)
            return tree_unflatten(out_tree, results[:n]), tree_unflatten(out_tree, results[n:])
        return jvp_graph_, captured, unflatten

    diff_tangents = [as_dtype(t, a.dtype) for t, a, d in zip(t_leaves, avals, diff) if d]
    return Transformed(fun, "jvp", build)(primals, diff_tangents)


def linearize(fun, *primals):
    """`(fun(*primals), f_jvp)` where `f_jvp(*tangents)` evaluates only the linear part.

    >>> out, f_jvp = xform.linearize(lambda x: x ** 2, 3.0)
    >>> out, f_jvp(0.5)
    (np.float64(9.0), np.float64(3.0))
    """
    p_leaves, p_tree = tree_flatten(primals)
    avals = [aval_of_signature(leaf_signature(x)) for x in p_leaves]
    diff = [is_differentiable(a) for a in avals]
    graph, captured, out_tree = stage_function(fun, p_tree, avals)
    builder = GraphBuilder()
    with using_builder(builder):
        ins = [builder.new_input(v.aval) for v in graph.inputs]
        t_ins = [builder.new_input(tangent_aval(a)) if d else zero_tangent(a)
                 for a, d in zip(avals, diff)]
        t_ins += [zero_tangent(v.aval) for v in graph.inputs[len(avals):]]
        outs, t_outs = jvp_eval(graph, ins, t_ins)
        t_outs = [instantiate(t) for t in t_outs]
    combined = builder.build(list(outs) + t_outs)
    forward, linear = split_graph(combined, len(graph.inputs), len(outs))
    defined = set(forward.inputs) | {v for e in forward.equations for v in e.outputs}
    if all(type(a) is not Var or a in defined for a in forward.outputs):
        forward, linear = optimize(forward, checks=config.checks), finish_graph(linear)
        results = run(forward, [*p_leaves, *captured])
        outs, residuals = results[:len(graph.outputs)], results[len(graph.outputs):]
    else:
        # A primitive whose jvp yields primal and tangent outputs in one equation (cond,
        # while_loop) cannot be cut in two: the linear function then re-runs the whole jvp.
        outs = run(optimize(graph, checks=config.checks), [*p_leaves, *captured])
        residuals = [*p_leaves, *captured]
        linear = finish_graph(Graph(combined.inputs, combined.consts, combined.equations,
                               combined.outputs[len(outs):]))

    def f_jvp(*tangents):
        t_leaves, t_tree = tree_flatten(tangents)
        _check_tangents(p_leaves, t_leaves, p_tree, t_tree)
        diff_tangents = [as_dtype(t, a.dtype) for t, a, d in zip(t_leaves, avals, diff) if d]
        return tree_unflatten(out_tree, run(linear, [*residuals, *diff_tangents]))

    return tree_unflatten(out_tree, outs), f_jvp
