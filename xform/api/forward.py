"""Forward mode: `jvp` and `linearize`, cached per signature; their graphs come from
xform.transforms.derived."""
from __future__ import annotations

import numpy as np

from xform.api.dispatch import Transformed, aval_of_signature, leaf_signature, run
from xform.api.pipeline import as_built, finish_graph
from xform.errors import ShapeError, TreeMismatchError, TypeCheckError, not_callable_error
from xform.ir.avals import is_differentiable
from xform.ir.builder import stage_function
from xform.ir.core import Graph
from xform.ir.tracer import Tracer
from xform.passes.simplify import simplify
from xform.source_info import user_frame_info
from xform.tracebacks import api_boundary
from xform.transforms.derived import jvp_split, tangent_graph
from xform.tree import tree_flatten, tree_unflatten


def as_dtype(value, dtype, what="tangent"):
    """A tangent or cotangent (`what`) in the dtype its primal's tangent has (float32
    tangents for float64 primals are cast, as autograd and torch do, rather than refused);
    one that would lose its imaginary part, or is not a number, is a TypeCheckError."""
    if type(value) is Tracer:
        if value.dtype == dtype:
            return value
        _check_castable(value.dtype, dtype, what)
        return value.astype(dtype)
    if isinstance(value, np.ndarray) and value.dtype == dtype:
        return value
    array = np.asarray(value)
    _check_castable(array.dtype, dtype, what)
    return array.astype(dtype)[()] if array.ndim == 0 else array.astype(dtype, copy=False)


def _check_castable(from_dtype, to_dtype, what):
    if from_dtype.kind in "biuf" or (from_dtype.kind == "c" and to_dtype.kind == "c"):
        return
    if from_dtype.kind == "c":
        raise TypeCheckError(f"a complex {what} ({from_dtype}) for a real value of dtype "
                             f"{to_dtype}", user_frame_info(),
                             f"pass a real {what} (np.real(t)), or make the value it belongs "
                             "to complex (x.astype(complex))")
    raise TypeCheckError(f"a {what} of dtype {from_dtype} for a value of dtype {to_dtype}",
                         user_frame_info(), f"pass a numeric {what} of dtype {to_dtype}")


def _check_tangents(primal_avals, tangent_leaves, p_tree, t_tree):
    if p_tree != t_tree:
        raise TreeMismatchError(f"tangents have structure {t_tree}, primals {p_tree}",
                                user_frame_info(),
                                "give one tangent per primal, in the same pytree structure "
                                "(a zero tangent: np.zeros_like(x))")
    for p, t in zip(primal_avals, tangent_leaves):
        p_shape, t_shape = p.shape, np.shape(t)
        if p_shape != t_shape:
            raise ShapeError(f"tangent of shape {t_shape} for a primal of shape {p_shape}",
                             user_frame_info(), "each tangent has its primal's shape")


def _check_sequences(primals, tangents):
    """jvp's primals and tangents are sequences of arguments, as in JAX."""
    for name, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, (tuple, list)):
            raise TypeCheckError(f"jvp takes {name} as a tuple or list of the arguments, got "
                                 f"{type(value).__name__}", user_frame_info(),
                                 "wrap a single argument in a tuple: "
                                 "xform.jvp(f, (x,), (t,))")


@api_boundary
def jvp(fun, primals, tangents, has_aux=False, *, backend=None):
    """`(fun(*primals), J @ tangents)`: forward-mode derivative along `tangents`; with
    has_aux, `fun` returns `(out, aux)` and the result is `(out, J @ tangents, aux)`.

    >>> xform.jvp(lambda x: x ** 2, (3.0,), (0.5,))    # (x**2, 2 x * 0.5)
    (np.float64(9.0), np.float64(3.0))
    """
    if not callable(fun):
        raise not_callable_error(fun, "jvp")
    _check_sequences(primals, tangents)
    primals, tangents = tuple(primals), tuple(tangents)
    p_leaves, p_tree = tree_flatten(primals)
    t_leaves, t_tree = tree_flatten(tangents)
    avals = [aval_of_signature(leaf_signature(x)) for x in p_leaves]
    _check_tangents(avals, t_leaves, p_tree, t_tree)
    diff = [is_differentiable(a) for a in avals]

    def build(fun, in_tree, _avals, known=None):
        if known is not None:   # (the leaves are the primals', then the tangents')
            known = known.taking(range(len(avals))).perturbing(range(len(avals)))
        graph, captured, out_tree = stage_function(fun, p_tree, avals, known)
        if has_aux and (out_tree.kind is not tuple or len(out_tree.children) != 2):
            raise TypeCheckError("jvp with has_aux=True needs fun to return (output, aux)",
                                 user_frame_info())
        nonzeros = diff + [False] * len(captured)
        jvp_graph_ = tangent_graph(_known_facts(graph), nonzeros, len(captured))
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
    return Transformed(fun, "jvp", build, (has_aux,), backend=backend)(primals, diff_tangents)


@api_boundary
def linearize(fun, *primals, backend=None):
    """`(fun(*primals), f_jvp)` where `f_jvp(*tangents)` evaluates only the linear part.

    >>> out, f_jvp = xform.linearize(lambda x: x ** 2, 3.0)
    >>> out, f_jvp(0.5)
    (np.float64(9.0), np.float64(3.0))
    """
    if not callable(fun):
        raise not_callable_error(fun, "linearize")
    return Transformed(fun, "linearize", _build_linearize, finish=as_built,
                       backend=backend)(*primals)


def _known_facts(graph):
    """`graph` with the rewrites that keep numpy's bits, as reverse mode differentiates it
    (xform.api.pipeline.fuse_if_enabled): rules decide from what the passes state in params
    (a solve with a Cholesky factor knows its triangle), never from staging history."""
    return simplify(graph, exact=True)


def _build_linearize(fun, in_tree, avals, known=None):
    """The forward graph (leaves -> outputs, residuals) and an unflatten giving `linearize`'s
    result, whose f_jvp runs the linear graph on the call's residuals."""
    diff = [is_differentiable(a) for a in avals]
    if known is not None:
        known = known.perturbing(range(len(avals)))
    graph, captured, out_tree = stage_function(fun, in_tree, avals, known)
    graph = _known_facts(graph)
    forward, linear = jvp_split(graph, diff + [False] * len(captured))
    n_out = len(graph.outputs)
    if forward is None:
        # The linear graph re-runs the whole jvp: its residuals are the inputs.
        forward = Graph(graph.inputs, graph.consts, graph.equations,
                        list(graph.outputs) + list(graph.inputs))
    forward, linear = finish_graph(forward, own_outputs=False), finish_graph(linear)

    def f_jvp_of(residuals):
        @api_boundary
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
