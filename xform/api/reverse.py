"""Reverse mode: `grad`, `value_and_grad` and `vjp`, cached per signature; their graphs come
from xform.transforms.derived."""
from __future__ import annotations

import functools
import operator

import numpy as np

from xform.api.dispatch import Transformed, leaf_signature, normalize_argnums, run
from xform.api.forward import as_dtype
from xform.api.pipeline import as_built, finish_graph, fuse_if_enabled
from xform.errors import ShapeError, TreeMismatchError, TypeCheckError
from xform.ir.avals import float0, is_differentiable
from xform.ir.builder import stage_function
from xform.source_info import user_frame_info
from xform.transforms.derived import vjp_split
from xform.transforms.vjp import vjp_graph
from xform.tree import tree_flatten, tree_unflatten


def _float0_zeros(aval):
    return np.zeros(aval.shape, float0)


def _check_scalar_output(graph, has_aux, out_tree, fun_name):
    if has_aux:
        if out_tree.kind is not tuple or len(out_tree.children) != 2:
            raise TypeCheckError(f"{fun_name} with has_aux=True needs the function to return "
                                 "a pair (output, aux)", user_frame_info())
        if out_tree.children[0].num_leaves != 1:
            raise TypeCheckError(f"{fun_name}: the output (first of the pair) must be a "
                                 "scalar", user_frame_info())
    elif out_tree.num_leaves != 1:
        raise TypeCheckError(f"{fun_name} needs a function with one scalar output, got a "
                             f"pytree {out_tree}", user_frame_info())
    out_aval = graph.outputs[0].aval
    if out_aval.shape != () or not is_differentiable(out_aval):
        raise TypeCheckError(
            f"{fun_name} needs a scalar float output, got {out_aval.str_short()}",
            user_frame_info(), "use xform.vjp or xform.jacrev for non-scalar outputs, or "
            "reduce the output (e.g. np.sum)")


def value_and_grad(fun, argnums=0, has_aux=False):
    """`(fun(*args), gradient of fun w.r.t. args[argnums])`; with has_aux, `fun` returns
    `(out, aux)` and the result is `((out, aux), grads)`.

    >>> xform.value_and_grad(lambda x: np.sum(x ** 2))(np.array([1.0, 2.0]))
    (np.float64(5.0), array([2., 4.]))
    """
    return _gradient_transform(fun, argnums, has_aux, with_value=True)


def grad(fun, argnums=0, has_aux=False):
    """The gradient of scalar-output `fun` w.r.t. `args[argnums]` (a pytree like them); with
    has_aux, `fun` returns `(out, aux)` and the result is `(grads, aux)`.

    >>> xform.grad(lambda x: x ** 3 + np.sin(x))(0.0)    # 3 x**2 + cos(x)
    np.float64(1.0)
    """
    return _gradient_transform(fun, argnums, has_aux, with_value=False)


def _gradient_transform(fun, argnums, has_aux, with_value):
    name = "value_and_grad" if with_value else "grad"

    def build(in_tree, avals):
        nums = normalize_argnums(argnums, len(in_tree.children))
        graph, captured, out_tree = stage_function(fun, in_tree, avals)
        _check_scalar_output(graph, has_aux, out_tree, name)
        graph = fuse_if_enabled(graph)
        offsets = np.cumsum([0] + [c.num_leaves for c in in_tree.children])
        wanted = [i for n in nums for i in range(offsets[n], offsets[n + 1])]
        n_outs = len(graph.outputs)
        kept = range(n_outs) if with_value else range(1, n_outs) if has_aux else ()
        # The forward pass is `graph` itself (adopted), the output's cotangent is 1.
        grad_graph = vjp_graph(graph, (True,) + (False,) * (n_outs - 1), wanted, kept,
                                     seed_ones=True, adopt=True)
        n_kept = len(kept)
        grads_of = _grads_unflattener(in_tree, nums, argnums, wanted, avals)
        if with_value:
            def unflatten(results):
                return tree_unflatten(out_tree, results[:n_kept]), grads_of(results[n_kept:])
        elif has_aux:
            aux_tree = out_tree.children[1]

            def unflatten(results):
                return grads_of(results[n_kept:]), tree_unflatten(aux_tree, results[:n_kept])
        else:
            unflatten = grads_of
        return grad_graph, captured, unflatten

    return Transformed(fun, name, build, (argnums, has_aux), finish=_finish_fused)


def _finish_fused(graph):
    """A gradient's finish: fused after reverse mode too (xform.api.pipeline.fuse_if_enabled)."""
    return finish_graph(graph, fuse=True)


def _grads_unflattener(in_tree, nums, argnums, wanted, avals):
    """gradient outputs -> the pytree of gradients (float0 zeros for integer leaves)."""
    if isinstance(argnums, int) and in_tree.children[nums[0]].kind is None \
            and is_differentiable(avals[wanted[0]]):
        return operator.itemgetter(0)

    def unflatten(grad_results):
        grad_iter = iter(grad_results)
        leaves = iter([next(grad_iter) if is_differentiable(avals[i])
                       else _float0_zeros(avals[i]) for i in wanted])
        trees = [tree_unflatten(in_tree.children[n],
                                [next(leaves) for _ in range(in_tree.children[n].num_leaves)])
                 for n in nums]
        return trees[0] if isinstance(argnums, int) else tuple(trees)
    return unflatten


def vjp(fun, *primals, has_aux=False):
    """`(fun(*primals), vjp_fn)`; `vjp_fn(cotangent)` returns a tuple of cotangents, one per
    primal. With has_aux: `(out, vjp_fn, aux)`.

    >>> out, f_vjp = xform.vjp(lambda x: x ** 2, 3.0)
    >>> out, f_vjp(1.0)
    (np.float64(9.0), (np.float64(6.0),))
    """
    return Transformed(fun, "vjp", functools.partial(_build_vjp, fun, has_aux), (has_aux,),
                       finish=as_built)(*primals)


def _build_vjp(fun, has_aux, in_tree, avals):
    """The forward graph (leaves -> outputs, residuals) and an unflatten giving `vjp`'s result,
    whose vjp_fn runs the backward graph on the call's residuals."""
    graph, captured, out_tree = stage_function(fun, in_tree, avals)
    if has_aux:
        if out_tree.kind is not tuple or len(out_tree.children) != 2:
            raise TypeCheckError("vjp with has_aux=True needs fun to return (output, aux)",
                                 user_frame_info())
        n_main = out_tree.children[0].num_leaves
        main_tree = out_tree.children[0]
    else:
        n_main, main_tree = out_tree.num_leaves, out_tree
    graph = fuse_if_enabled(graph)
    live = [i < n_main and is_differentiable(a.aval) for i, a in enumerate(graph.outputs)]
    forward, backward = vjp_split(graph, live, range(len(avals)))
    # Residuals are read only by the backward part: no copies of them.
    forward = finish_graph(forward, fuse=True, own_outputs=False)
    backward = _finish_fused(backward)
    n_out = len(graph.outputs)
    main_avals = [a.aval for a in graph.outputs[:n_main]]

    def vjp_fn_of(residuals):
        def vjp_fn(cotangent):
            ct_leaves, ct_tree = tree_flatten(cotangent)
            if ct_tree != main_tree:
                raise TreeMismatchError(f"vjp_fn got a cotangent of structure {ct_tree}, "
                                        f"expected the output's structure {main_tree}",
                                        user_frame_info())
            diff_cts = []
            for ct, aval in zip(ct_leaves, main_avals):
                shape = leaf_signature(ct)[0]
                if shape != aval.shape:
                    raise ShapeError(f"vjp_fn got a cotangent of shape {shape} for an output "
                                     f"of shape {aval.shape}", user_frame_info())
                if is_differentiable(aval):
                    diff_cts.append(as_dtype(ct, aval.dtype))
            grads = iter(run(backward, [*residuals, *diff_cts]))
            grad_leaves = [next(grads) if is_differentiable(a) else _float0_zeros(a)
                           for a in avals]
            return tree_unflatten(in_tree, grad_leaves)
        return vjp_fn

    def unflatten(results):
        out_value = tree_unflatten(out_tree, results[:n_out])
        vjp_fn = vjp_fn_of(results[n_out:])
        if has_aux:
            return out_value[0], vjp_fn, out_value[1]
        return out_value, vjp_fn
    return forward, captured, unflatten
