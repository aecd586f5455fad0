"""JAX's `lax.map` (a sequential map, optionally vmapped in chunks) and `associative_scan`
(a parallel prefix by odd/even recursion). Both are compositions of staged constructs (scan,
vmap, numpy slicing), so every transform differentiates and batches them with no new rule."""
from __future__ import annotations

import numpy as np

from xform.api.mapping import vmap
from xform.errors import ShapeError, TypeCheckError
from xform.ir.ad import aval
from xform.rules.control_flow import scan
from xform.source_info import user_frame_info
from xform.tree import tree_flatten, tree_unflatten


def map(f, xs, batch_size=None):  # noqa: A001  (JAX's name: lax.map)
    """`f` applied to each slice of the leading axis of the pytree `xs`, one after the other
    (a `scan`), results stacked as `vmap` would. With `batch_size`, chunks of that many slices
    are vmapped inside the scan and the remainder is vmapped after it, as in JAX.

    >>> xform.map(lambda x: np.sum(x * x), np.arange(6.0).reshape(3, 2))
    array([ 1., 13., 41.])
    """
    leaves, xs_tree = tree_flatten(xs)
    length = _leading_length(leaves, "map")
    if batch_size is None:
        return scan(lambda _, x: ((), f(x)), (), xs)[1]
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise TypeCheckError(f"map batch_size must be a positive int, got {batch_size!r}",
                             user_frame_info())
    n_batches = length // batch_size
    split = n_batches * batch_size
    parts = []
    if n_batches:
        chunked = tree_unflatten(xs_tree, [
            np.reshape(leaf[:split], (n_batches, batch_size) + aval(leaf).shape[1:])
            for leaf in leaves])
        ys = scan(lambda _, x: ((), vmap(f)(x)), (), chunked)[1]
        ys_leaves, ys_tree = tree_flatten(ys)
        parts.append(([np.reshape(y, (split,) + aval(y).shape[2:]) for y in ys_leaves],
                      ys_tree))
    if split < length:
        ys = vmap(f)(tree_unflatten(xs_tree, [leaf[split:] for leaf in leaves]))
        parts.append(tree_flatten(ys))
    if len(parts) == 1:
        return tree_unflatten(parts[0][1], parts[0][0])
    (scanned, ys_tree), (rest, _) = parts
    return tree_unflatten(ys_tree, [np.concatenate([a, b]) for a, b in zip(scanned, rest)])


def _leading_length(leaves, name):
    if not leaves:
        raise TypeCheckError(f"{name} needs at least one array to map over",
                             user_frame_info())
    lengths = {aval(leaf).shape[0] if aval(leaf).shape else None for leaf in leaves}
    if None in lengths:
        raise ShapeError(f"{name}'s xs must have a leading axis to map over",
                         user_frame_info())
    if len(lengths) != 1:
        raise ShapeError(f"{name} got leading axes of different lengths {sorted(lengths)}",
                         user_frame_info())
    return lengths.pop()


def associative_scan(fn, elems, reverse=False, axis=0):
    """All prefix combinations of `elems` (a pytree of arrays sharing the length of `axis`)
    under the associative `fn`, which combines two such pytrees elementwise along `axis`:
    out[i] = fn(... fn(elems[0], elems[1]) ..., elems[i]). `reverse` combines suffixes, as
    JAX's: out[i] = elems[n-1] o ... o elems[i]. Depth is logarithmic in the length.

    >>> xform.associative_scan(np.add, np.arange(1.0, 6.0))
    array([ 1.,  3.,  6., 10., 15.])
    """
    leaves, tree = tree_flatten(elems)
    if not leaves:
        raise TypeCheckError("associative_scan needs at least one array", user_frame_info())
    ndims = {aval(leaf).ndim for leaf in leaves}
    if min(ndims) == 0 or not -min(ndims) <= axis < min(ndims):
        raise ShapeError(f"associative_scan axis={axis} is out of range for elements of "
                         f"{min(ndims)} dimensions", user_frame_info())
    axes = [axis % aval(leaf).ndim for leaf in leaves]
    lengths = {aval(leaf).shape[a] for leaf, a in zip(leaves, axes)}
    if len(lengths) != 1:
        raise ShapeError(f"associative_scan got elements of different lengths "
                         f"{sorted(lengths)} along axis {axis}", user_frame_info())

    def cut(xs, start, stop=None, step=None):
        return [x[(slice(None),) * a + (slice(start, stop, step),)] for x, a in zip(xs, axes)]

    def combine(a, b):
        out_leaves, out_tree = tree_flatten(fn(tree_unflatten(tree, a), tree_unflatten(tree, b)))
        if out_tree != tree:
            raise TypeCheckError(f"associative_scan's fn must return the structure of its "
                                 f"arguments, {tree}, got {out_tree}", user_frame_info())
        return out_leaves

    def interleave(evens, odds):
        # evens has as many entries along the axis as odds, or one more.
        out = []
        for e, o, a in zip(evens, odds, axes):
            n_odd = aval(o).shape[a]
            head = e[(slice(None),) * a + (slice(0, n_odd),)]
            pairs = np.stack([head, o], axis=a + 1)
            shape = aval(head).shape
            merged = np.reshape(pairs, shape[:a] + (2 * n_odd,) + shape[a + 1:])
            if aval(e).shape[a] > n_odd:
                merged = np.concatenate([merged, e[(slice(None),) * a + (slice(n_odd, None),)]],
                                        axis=a)
            out.append(merged)
        return out

    def prefix(xs):
        n = aval(xs[0]).shape[axes[0]]
        if n < 2:
            return xs
        odds = prefix(combine(cut(xs, 0, -1, 2), cut(xs, 1, None, 2)))
        if n % 2 == 0:
            evens = combine(cut(odds, 0, -1), cut(xs, 2, None, 2))
        else:
            evens = combine(odds, cut(xs, 2, None, 2))
        evens = [np.concatenate([first, rest], axis=a)
                 for first, rest, a in zip(cut(xs, 0, 1), evens, axes)]
        return interleave(evens, odds)

    if reverse:
        leaves = cut(leaves, None, None, -1)
    scanned = prefix(leaves)
    if reverse:
        scanned = cut(scanned, None, None, -1)
    return tree_unflatten(tree, scanned)


__all__ = ["associative_scan", "map"]
