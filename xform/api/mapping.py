"""`vmap`: a function mapped over an axis of its arguments, by batching its graph
(xform.transforms.derived), cached per signature."""
from __future__ import annotations

import numpy as np

from xform.api.collectives import bound_axis
from xform.api.dispatch import transformed
from xform.errors import (ShapeError, TreeMismatchError, TypeCheckError, UnsupportedError,
                          not_callable_error)
from xform.ir.ad import NOT_MAPPED
from xform.ir.avals import ShapedArray
from xform.ir.builder import KnownValues, stage_function
from xform.ir.interpret import run_concrete
from xform.ir.values import NO_VALUE, GuardFailure, forget_after, has_guards, staging_mark
from xform.ir.core import Graph
from xform.ir.registry import graph_has_effects
from xform.runtime.effects import Watch
from xform.source_info import user_frame_info
from xform.transforms.batch import batch_graph
from xform.tree import broadcast_prefix, tree_flatten, tree_structure, tree_unflatten


def vmap(fun, in_axes=0, out_axes=0, axis_name=None, *, backend=None):
    """Map `fun` over axis `in_axes` of its arguments (None: not mapped; a pytree prefix of the
    arguments), stacking results along `out_axes`. As in JAX, an argument whose `in_axes` is
    None reaches `fun` as it is when it is a Python int or bool or not an array (a function,
    a string): it is static, keyed by value. `backend` chooses what runs the mapped graph,
    as in `jit`.

    >>> xform.vmap(lambda x: np.dot(x, x))(np.ones((5, 3))).shape
    (5,)
    """
    if not callable(fun):
        raise not_callable_error(fun, "vmap")
    return _vmap(fun, in_axes, out_axes, axis_name, backend, directions=False)


def vmap_directions(fun):
    """`vmap(fun)` whose lanes are directions of one evaluation (a Jacobian's basis), not
    separate calls: they share `fun`'s random draws, made once as the unmapped function
    makes them (`vmap` draws per lane, as a loop of calls would)."""
    return _vmap(fun, 0, 0, None, None, directions=True)


def _vmap(fun, in_axes, out_axes, axis_name, backend, directions):
    def build(fun, in_tree, avals, known=None):
        args_tree = in_tree
        axes = _in_axes_leaves(in_axes, args_tree)
        dims = []
        size = None
        for aval, axis in zip(avals, axes):
            if axis is None:
                dims.append(NOT_MAPPED)
                continue
            if not isinstance(axis, int):
                raise TypeCheckError(f"vmap in_axes entries must be int or None, got {axis!r}",
                                     user_frame_info())
            if not -aval.ndim <= axis < max(aval.ndim, 1) or aval.ndim == 0:
                raise ShapeError(f"vmap in_axes={axis} is out of range for an argument of "
                                 f"shape {aval.shape}", user_frame_info())
            axis %= aval.ndim
            if size is not None and aval.shape[axis] != size:
                raise ShapeError(f"vmap got inconsistent sizes along the mapped axes: "
                                 f"{size} and {aval.shape[axis]}", user_frame_info(),
                                 "map arguments of one size, or leave an argument unmapped "
                                 "with in_axes=None at its position")
            size = aval.shape[axis]
            dims.append(axis)
        if size is None:
            raise TypeCheckError("vmap needs at least one argument with a mapped axis "
                                 "(in_axes is None everywhere)", user_frame_info())
        example_avals = [aval if d is NOT_MAPPED else
                         ShapedArray(aval.shape[:d] + aval.shape[d + 1:], aval.dtype,
                                     aval.weak_type)
                         for aval, d in zip(avals, dims)]
        watch = Watch(fun).keep_states()
        if axis_name is not None:
            return _staged_with_axis_name(fun, args_tree, example_avals, dims, size, axis_name,
                                          out_axes)
        mark = staging_mark()
        with watch:
            # Decisions on data are made on lane 0's values; the batched graph's guards then
            # ask every lane for the same outcome.
            graph, captured, out_tree = stage_function(fun, args_tree, example_avals,
                                                       _lane(known, dims, 0))
        out_axes_leaves = _out_axes_leaves(out_axes, out_tree)
        drew = watch.drew()
        if not directions and (drew or graph_has_effects(graph)):
            # Draws per element, as a Python loop over the elements would make them.
            if drew:
                watch.rewind()
            forget_after(mark)
            return _staged_per_element(fun, args_tree, avals, dims, size, out_tree,
                                       out_axes_leaves, known)
        batched = batch_graph(graph, dims + [NOT_MAPPED] * len(captured), size,
                                out_axes_leaves)
        if known is not None and not captured and has_guards(graph) \
                and not _lanes_agree(batched, known.values):
            # Lanes that decide differently: each lane staged on its own values, with its
            # own guards (what `[fun(x) for x in xs]` computes, lane by lane).
            forget_after(mark)
            return _staged_per_element(fun, args_tree, avals, dims, size, out_tree,
                                       out_axes_leaves, known)
        return batched, captured, lambda outs: tree_unflatten(out_tree, outs)

    def static(n_args):
        if isinstance(in_axes, (tuple, list)) and len(in_axes) == n_args:
            return (), tuple(i for i, axis in enumerate(in_axes) if axis is None)
        return (), ()

    return transformed(fun, "vmap", build,
                       (_freeze(in_axes), _freeze(out_axes), axis_name, directions),
                       static=static, keywords_automatic=False, backend=backend)


def _staged_with_axis_name(fun, args_tree, example_avals, dims, size, axis_name, out_axes):
    """vmap with a named axis: `fun` is staged with the axis's lane index as one more input,
    bound to `axis_name` for the collectives (xform.api.collectives); batched, that input is
    the constant arange(size)."""
    n = len(example_avals)

    def with_index(*leaves):
        with bound_axis(axis_name, leaves[n], size):
            return fun(*tree_unflatten(args_tree, leaves[:n]))

    flat = tree_structure(tuple(range(n + 1)))
    graph, captured, out_tree = stage_function(
        with_index, flat, list(example_avals) + [ShapedArray((), np.dtype(np.int64))])
    out_axes_leaves = _out_axes_leaves(out_axes, out_tree)
    if graph_has_effects(graph):
        raise UnsupportedError("vmap with an axis_name of a function that draws random "
                               "numbers", user_frame_info(), "draw outside and pass the "
                               "draws in as a mapped argument, or drop axis_name")
    batched = batch_graph(graph, list(dims) + [0] + [NOT_MAPPED] * len(captured), size,
                          out_axes_leaves)
    lanes = batched.inputs[n]
    batched = Graph(batched.inputs[:n] + batched.inputs[n + 1:],
                    batched.consts + ((lanes, np.arange(size, dtype=np.int64)),),
                    batched.equations, batched.outputs)
    return batched, captured, lambda outs: tree_unflatten(out_tree, outs)


def _lane(known, dims, i):
    """The KnownValues of lane `i` of a call's leaves (None stays None)."""
    if known is None:
        return None
    values = [v if d is NOT_MAPPED or v is NO_VALUE else np.take(v, i, axis=d)
              for v, d in zip(known.values, dims)]
    return KnownValues(values, known.perturbed)


def _lanes_agree(batched, values) -> bool:
    """Whether every lane of this call takes lane 0's path through `batched`'s guards."""
    if any(v is NO_VALUE for v in values):
        return True     # (nothing to ask: its guards decide when it runs)
    try:
        run_concrete(batched, values)
    except GuardFailure:
        return False
    return True


def _staged_per_element(fun, args_tree, avals, dims, size, out_tree, out_axes_leaves,
                        known=None):
    """vmap of a function that draws random numbers: `fun` staged once per element, in
    element order, so that every element draws its own values (what `[fun(x) for x in xs]`
    draws, bit for bit: element 0's draws, in program order, then element 1's, ...); the
    outputs stacked along `out_axes`. The draws are `random_draw` equations, so the graph
    is built once; a draw staging could not stage makes it staged on every call."""
    def per_element(*args):
        leaves = tree_flatten(args)[0]
        outs = []
        for i in range(size):
            element = [leaf if d is NOT_MAPPED else np.take(leaf, i, axis=d)
                       for leaf, d in zip(leaves, dims)]
            leaves_i, tree_i = tree_flatten(fun(*tree_unflatten(args_tree, element)),
                                            texts_static=True)
            if tree_i != out_tree:  # (a string result that differs between lanes)
                raise TypeCheckError(f"vmap: element {i} returns {tree_i}, element 0 "
                                     f"{out_tree}", user_frame_info(), "a string among the "
                                     "results must be the same for every element")
            outs.append(leaves_i)
        return [outs[0][k] if axis is None else np.stack([o[k] for o in outs], axis=axis)
                for k, axis in enumerate(out_axes_leaves)]

    graph, captured, _ = stage_function(per_element, args_tree, avals, known)
    return graph, captured, lambda outs: tree_unflatten(out_tree, outs)


def _freeze(tree):
    leaves, treedef = tree_flatten(tree)
    return (treedef, tuple(leaves))


def _in_axes_leaves(in_axes, args_tree):
    n_args = len(args_tree.children)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if isinstance(in_axes, tuple) and len(in_axes) != n_args:
        raise TreeMismatchError(f"vmap in_axes has {len(in_axes)} entries for {n_args} "
                                "arguments", user_frame_info())
    if not isinstance(in_axes, tuple):
        in_axes = (in_axes,) * n_args
    # floats as the leaves: an object of the user's class takes ints as static attributes
    dummy_args = tree_unflatten(args_tree, [0.0] * args_tree.num_leaves)
    try:
        return broadcast_prefix(in_axes, dummy_args)
    except TreeMismatchError as err:
        raise TreeMismatchError(f"vmap in_axes: {err.cause}", user_frame_info()) from None


def _out_axes_leaves(out_axes, out_tree):
    dummy_out = tree_unflatten(out_tree, [0.0] * out_tree.num_leaves)
    try:
        return broadcast_prefix(out_axes, dummy_out, texts_static=True)
    except TreeMismatchError as err:
        raise TreeMismatchError(f"vmap out_axes: {err.cause}", user_frame_info()) from None
