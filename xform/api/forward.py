"""Forward mode: `jvp` and `linearize`, cached per signature; their graphs come from
xform.transforms.derived."""
from __future__ import annotations

import numpy as np

from xform.api.dispatch import Transformed, aval_of_signature, leaf_signature, run
from xform.api.pipeline import as_built, finish_graph
from xform.errors import ShapeError, TreeMismatchError, TypeCheckError
from xform.ir.avals import is_differentiable
from xform.ir.builder import stage_function
from xform.ir.core import Graph
from xform.ir.tracer import Tracer
from xform.source_info import user_frame_info
from xform.transforms.derived import jvp_split, tangent_graph
from xform.tree import tree_flatten, tree_unflatten


def as_dtype(value, dtype):
    """A tangent or cotangent in the dtype its primal's tangent has (float32 tangents for
    float64 primals are cast, as autograd and torch do, rather than refused)."""
    if type(value) is Tracer:
        return value if value.dtype == dtype else value.astype(dtype)
    if isinstance(value, np.ndarray) and value.dtype == dtype:
        return value
    return np.asarray(value, dtype)[()] if np.ndim(value) == 0 else np.asarray(value, dtype)


def _check_tangents(primal_avals, tangent_leaves, p_tree, t_tree):
    if p_tree != t_tree:
        raise TreeMismatchError(f"tangents have structure {t_tree}, primals {p_tree}",
                                user_frame_info())
    for p, t in zip(primal_avals, tangent_leaves):
        p_shape, t_shape = p.shape, np.shape(t)
        if p_shape != t_shape:
            raise ShapeError(f"tangent of shape {t_shape} for a primal of shape {p_shape}",
                             user_frame_info())


def jvp(fun, primals, tangents, has_aux=False):
    """`(fun(*primals), J @ tangents)`: forward-mode derivative along `tangents`; with
    has_aux, `fun` returns `(out, aux)` and the result is `(out, J @ tangents, aux)`.

    >>> xform.jvp(lambda x: x ** 2, (3.0,), (0.5,))    # (x**2, 2 x * 0.5)
    (np.float64(9.0), np.float64(3.0))
    """
    primals, tangents = tuple(primals), tuple(tangents)
    p_leaves, p_tree = tree_flatten(primals)
    t_leaves, t_tree = tree_flatten(tangents)
    avals = [aval_of_signature(leaf_signature(x)) for x in p_leaves]
    _check_tangents(avals, t_leaves, p_tree, t_tree)
    diff = [is_differentiable(a) for a in avals]

    def build(fun, in_tree, _avals):
        graph, captured, out_tree = stage_function(fun, p_tree, avals)
        if has_aux and (out_tree.kind is not tuple or len(out_tree.children) != 2):
            raise TypeCheckError("jvp with has_aux=True needs fun to return (output, aux)",
                                 user_frame_info())
        nonzeros = diff + [False] * len(captured)
        jvp_graph_ = tangent_graph(graph, nonzeros, len(captured))
        n = len(graph.outputs)
        if has_aux:
            main_tree, aux_tree = out_tree.children
            n_main = main_tree.num_leaves

            def unflatten(results):
                return (tree_unflatten(main_tree, results[:n_main]),
                        tree_unflatten(main_tree, results[n:n + n_main]),
                        tree_unflatten(aux_tree, results[n_main:n]))
            return jvp_graph_, captured, unflatten

        def unflatten(results):
            return tree_unflatten(out_tree, results[:n]), tree_unflatten(out_tree, results[n:])
        return jvp_graph_, captured, unflatten

    diff_tangents = [as_dtype(t, a.dtype) for t, a, d in zip(t_leaves, avals, diff) if d]
    return Transformed(fun, "jvp", build, (has_aux,))(primals, diff_tangents)


def linearize(fun, *primals):
    """`(fun(*primals), f_jvp)` where `f_jvp(*tangents)` evaluates only the linear part.

    >>> out, f_jvp = xform.linearize(lambda x: x ** 2, 3.0)
    >>> out, f_jvp(0.5)
    (np.float64(9.0), np.float64(3.0))
    """
    return Transformed(fun, "linearize", _build_linearize, finish=as_built)(*primals)


def _build_linearize(fun, in_tree, avals):
    """The forward graph (leaves -> outputs, residuals) and an unflatten giving `linearize`'s
    result, whose f_jvp runs the linear graph on the call's residuals."""
    diff = [is_differentiable(a) for a in avals]
    graph, captured, out_tree = stage_function(fun, in_tree, avals)
    forward, linear = jvp_split(graph, diff + [False] * len(captured))
    n_out = len(graph.outputs)
    if forward is None:
        # The linear graph re-runs the whole jvp: its residuals are the inputs.
        forward = Graph(graph.inputs, graph.consts, graph.equations,
                        list(graph.outputs) + list(graph.inputs))
    forward, linear = finish_graph(forward, own_outputs=False), finish_graph(linear)

    def f_jvp_of(residuals):
        def f_jvp(*tangents):
            t_leaves, t_tree = tree_flatten(tangents)
            _check_tangents(avals, t_leaves, in_tree, t_tree)
            diff_tangents = [as_dtype(t, a.dtype)
                             for t, a, d in zip(t_leaves, avals, diff) if d]
            return tree_unflatten(out_tree, run(linear, [*residuals, *diff_tangents]))
        return f_jvp

    def unflatten(results):
        return tree_unflatten(out_tree, results[:n_out]), f_jvp_of(results[n_out:])
    return forward, captured, unflatten
