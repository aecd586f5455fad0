"""Jacobians and Hessians, composed from the other transforms and cached per signature like
them: `jacfwd` (vmap of jvp), `jacrev` (vmap of a vjp), `hessian` (jacfwd of jacrev).

Results are laid out as in JAX: the output pytree with each leaf replaced by the pytree of
the differentiated arguments (a tuple of them when `argnums` is a tuple), whose leaves have
shape `out_leaf.shape + in_leaf.shape`.
"""
from __future__ import annotations

import numpy as np

from xform.api.dispatch import normalize_argnums, transformed
from xform.api.forward import jvp
from xform.api.mapping import vmap_directions
from xform.api.pipeline import finish_graph
from xform.api.reverse import (check_input_dtypes, check_output_dtype,
                               differentiated_static, vjp)
from xform.errors import TypeCheckError, not_callable_error
from xform.ir.avals import aval_of, float0, is_differentiable
from xform.ir.builder import stage_function
from xform.ir.tracer import Tracer
from xform.source_info import user_frame_info
from xform.tree import tree_flatten, tree_unflatten


def _aval(value):
    return value.aval if type(value) is Tracer else aval_of(value)


def _basis(leaves, dtypes):
    """One identity basis over all of `leaves`' elements, split per leaf: leaf k's part has
    shape (total, *leaf_k.shape), so that row r is the r-th unit perturbation."""
    shapes = [np.shape(leaf) for leaf in leaves]
    sizes = [int(np.prod(shape, dtype=np.int64)) for shape in shapes]
    total = sum(sizes)
    offsets = np.cumsum([0] + sizes)
    return [np.eye(total, dtype=dtype)[:, offsets[k]:offsets[k + 1]].reshape((total,) + shape)
            for k, (shape, dtype) in enumerate(zip(shapes, dtypes))], offsets


def _block(stacked, start, stop, out_shape, in_shape, stacked_out):
    """The Jacobian block of one output and one input leaf from rows start:stop of `stacked`:
    (rows, *out_shape) when the rows run over inputs (forward), (rows, *in_shape) when they
    run over outputs (reverse); either way (*out_shape, *in_shape)."""
    rows = stacked[start:stop]
    if stacked_out:   # rows over the input's elements: move them last
        rows = np.moveaxis(rows, 0, -1) if np.ndim(rows) > 1 else rows
    return np.reshape(rows, tuple(out_shape) + tuple(in_shape))


def _split_arguments(args, nums):
    """(the differentiated leaves, their tree, a function of those leaves calling `fun` with
    the other arguments as given)."""
    dyn_leaves, dyn_tree = tree_flatten(tuple(args[n] for n in nums))

    def with_leaves(fun):
        def partial_fun(*leaves):
            values = list(args)
            for n, value in zip(nums, tree_unflatten(dyn_tree, leaves)):
                values[n] = value
            return fun(*values)
        return partial_fun
    return dyn_leaves, dyn_tree, with_leaves


def _as_argnums_tree(argnums, dyn_tree, blocks):
    trees = tree_unflatten(dyn_tree, blocks)
    return trees[0] if isinstance(argnums, int) else trees


def _jacobian_transform(fun, name, body, argnums, has_aux, holomorphic, allow_int,
                        static_argnums, static_argnames, backend=None):
    if not callable(fun):
        raise not_callable_error(fun, name)

    def build(fun, in_tree, avals, known=None):
        nums = normalize_argnums(argnums, len(in_tree.children))
        offsets = np.cumsum([0] + [c.num_leaves for c in in_tree.children])
        positions = [i for n in nums for i in range(offsets[n], offsets[n + 1])]
        wanted = [avals[i] for i in positions]
        check_input_dtypes(name, wanted, holomorphic, allow_int)
        if name != "jacrev" and not holomorphic and any(a.dtype.kind == "c" for a in wanted):
            raise TypeCheckError(f"{name} needs real inputs (complex ones: pass "
                                 "holomorphic=True, or use xform.jvp)", user_frame_info())

        def staged(*args):
            return body(fun, args, nums)
        if known is not None:
            known = known.perturbing(positions)
        graph, captured, out_tree = stage_function(staged, in_tree, avals, known)
        scalars = [i for i, out in enumerate(graph.outputs) if not out.aval.shape]

        def unflatten(outs):
            outs = list(outs)
            for i in scalars:   # 0-d blocks as numpy scalars, as grad gives them
                outs[i] = outs[i][()] if type(outs[i]) is np.ndarray else outs[i]
            return tree_unflatten(out_tree, outs)
        return graph, captured, unflatten

    static, static_keywords = differentiated_static(fun, argnums, static_argnums,
                                                    static_argnames, name)
    return transformed(fun, name, build, (argnums, has_aux, holomorphic, allow_int),
                       finish=finish_graph, static=static, static_keywords=static_keywords,
                       keywords=bool(static_argnames), backend=backend)


def _check_outputs(name, out_leaves, holomorphic):
    for leaf in out_leaves:
        check_output_dtype(name, _aval(leaf), holomorphic)


def _stacked(fun, basis, total):
    """`vmap(fun)(*basis)`, the lanes sharing the function's draws; a one-row basis (a scalar
    output or input) is one call of `fun` given a leading axis, so that nothing is batched
    over a single lane."""
    if total == 1:
        return [np.expand_dims(r, 0) for r in fun(*[b[0] for b in basis])]
    return vmap_directions(fun)(*basis)


def _jacfwd_body(fun, args, nums, argnums, has_aux, holomorphic):
    """jacfwd of `fun` at `args`, staged: vmap of jvp over a basis of the inputs."""
    dyn_leaves, dyn_tree, with_leaves = _split_arguments(args, nums)
    main = with_leaves(fun)
    if has_aux:
        main = with_leaves(lambda *a: fun(*a)[0])
    basis, in_offsets = _basis(dyn_leaves, [_aval(x).dtype for x in dyn_leaves])
    outputs = []

    def push(*tangents):
        # The outputs' structure and types come from this jvp: a call of `main` of their own
        # would stage the primal computation a second time (kept when it is a primitive whose
        # jvp recomputes it, e.g. a while_loop_grad).
        primal, tangent = jvp(main, dyn_leaves, tangents)
        out_leaves, out_tree = tree_flatten(primal)
        _check_outputs("jacfwd", out_leaves, holomorphic)
        outputs[:] = [[_aval(o) for o in out_leaves], out_tree]
        return tree_flatten(tangent)[0]
    if in_offsets[-1]:
        columns = _stacked(push, basis, in_offsets[-1])
        out_avals, out_tree = outputs
    else:
        out_leaves, out_tree = tree_flatten(main(*dyn_leaves))
        _check_outputs("jacfwd", out_leaves, holomorphic)
        out_avals = [_aval(o) for o in out_leaves]
        columns = [np.zeros((0,) + a.shape) for a in out_avals]
    jacobian = tree_unflatten(out_tree, [
        _as_argnums_tree(argnums, dyn_tree, [
            _block(col, in_offsets[k], in_offsets[k + 1], out.shape, np.shape(x),
                   stacked_out=True)
            for k, x in enumerate(dyn_leaves)])
        for out, col in zip(out_avals, columns)])
    if has_aux:
        return jacobian, with_leaves(fun)(*dyn_leaves)[1]
    return jacobian


def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False, *, static_argnums=(),
           static_argnames=(), backend=None):
    """The Jacobian by forward mode, laid out as in JAX: the output pytree with each leaf
    replaced by the pytree of `args[argnums]`, leaves shaped `out.shape + x.shape`. With
    has_aux, `fun` returns `(out, aux)` and the result is `(jacobian, aux)`. Other arguments
    are as in `grad`.

    >>> xform.jacfwd(lambda x: x * 2.0)(np.ones(2))
    array([[2., 0.],
           [0., 2.]])
    >>> xform.jacfwd(lambda p: [p["a"] * p["b"]])({"a": 2.0, "b": 3.0})
    [{'a': np.float64(3.0), 'b': np.float64(2.0)}]
    """
    def body(fun, args, nums):
        return _jacfwd_body(fun, args, nums, argnums, has_aux, holomorphic)
    return _jacobian_transform(fun, "jacfwd", body, argnums, has_aux, holomorphic, False,
                               static_argnums, static_argnames, backend)


def _jacrev_body(fun, args, nums, argnums, has_aux, holomorphic):
    """jacrev of `fun` at `args`, staged: vmap of the pullback over a basis of the outputs."""
    dyn_leaves, dyn_tree, with_leaves = _split_arguments(args, nums)
    if has_aux:
        out, pullback, aux = vjp(with_leaves(fun), *dyn_leaves, has_aux=True)
    else:
        out, pullback = vjp(with_leaves(fun), *dyn_leaves)
    out_leaves, out_tree = tree_flatten(out)
    _check_outputs("jacrev", out_leaves, holomorphic)
    dtypes = [_aval(o).dtype if is_differentiable(_aval(o)) else np.float64
              for o in out_leaves]
    basis, out_offsets = _basis(out_leaves, dtypes)

    def pull(*cotangents):
        grads = pullback(tree_unflatten(out_tree, cotangents))
        return [g if is_differentiable(_aval(x)) else np.zeros(np.shape(x))
                for g, x in zip(grads, dyn_leaves)]
    rows = (_stacked(pull, basis, out_offsets[-1]) if out_offsets[-1]
            else [np.zeros((0,) + np.shape(x)) for x in dyn_leaves])
    jacobian = tree_unflatten(out_tree, [
        _as_argnums_tree(argnums, dyn_tree, [
            _block(row, out_offsets[o], out_offsets[o + 1], np.shape(out), np.shape(x),
                   stacked_out=False) if is_differentiable(_aval(x))
            else np.zeros(np.shape(out) + np.shape(x), float0)   # allow_int, as JAX
            for x, row in zip(dyn_leaves, rows)])
        for o, out in enumerate(out_leaves)])
    return (jacobian, aux) if has_aux else jacobian


def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, *,
           static_argnums=(), static_argnames=(), backend=None):
    """The Jacobian by reverse mode, laid out as `jacfwd`'s (as in JAX): the output pytree
    with each leaf replaced by the pytree of `args[argnums]`. Arguments are as in `grad`.

    >>> xform.jacrev(lambda x: x * 2.0)(np.ones(2))
    array([[2., 0.],
           [0., 2.]])
    >>> xform.jacrev(lambda p: p[0] * p[1])([2.0, 3.0])
    [np.float64(3.0), np.float64(2.0)]
    """
    def body(fun, args, nums):
        return _jacrev_body(fun, args, nums, argnums, has_aux, holomorphic)
    return _jacobian_transform(fun, "jacrev", body, argnums, has_aux, holomorphic, allow_int,
                               static_argnums, static_argnames, backend)


def hessian(fun, argnums=0, has_aux=False, holomorphic=False, *, static_argnums=(),
            static_argnames=(), backend=None):
    """The Hessian, forward-over-reverse: `jacfwd(jacrev(fun))`, laid out as in JAX (the
    output pytree, then the input pytree, then the input pytree again).

    >>> xform.hessian(lambda x: np.sum(x ** 3))(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    # One transform of `fun` (not jacfwd of a jacrev object): its cache entries belong to
    # `fun`, so `hessian(f)(x)`, the transform made anew at each call, finds them.
    def body(fun, args, nums):
        def gradient(*args):
            return _jacrev_body(fun, args, nums, argnums, has_aux, holomorphic)
        return _jacfwd_body(gradient, args, nums, argnums, has_aux, holomorphic)
    return _jacobian_transform(fun, "hessian", body, argnums, has_aux, holomorphic, False,
                               static_argnums, static_argnames, backend)


__all__ = ["hessian", "jacfwd", "jacrev"]
