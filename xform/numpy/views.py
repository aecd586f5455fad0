"""numpy's view semantics for traced arrays: which results are views of which base, and how a
write reaches every alias. A write rebinds the written tracer to its new value (a functional
update), then the bases it views and the live views of all of them, so that each reads what
numpy's shared memory would hold.

Views (as numpy makes them): basic indexing (ints, slices, None, Ellipsis; not a full integer
index, which numpy answers with a scalar copy), transpose/`.T`/swapaxes/moveaxis, flip,
squeeze/expand_dims, and reshape/ravel when numpy would not copy (decided from the strides
the view chain gives). diagonal and broadcast_to are read-only views, as in numpy.
"""
from __future__ import annotations

import functools
import weakref

import numpy as np
from numpy.lib.stride_tricks import as_strided

from xform.errors import TypeCheckError, UnsupportedError
from xform.ir.builder import current_builder
from xform.ir.tracer import Tracer
from xform.numpy import shape as shapes
from xform.numpy.axes import normalize_axis
from xform.numpy.protocol import FUNCTIONS
from xform.source_info import user_frame_info


class ViewKind:
    """How one kind of view relates to its base, given the view's `key` (its index, or the
    arguments of the numpy function that made it): `read(base, key)` is the view of `base`,
    `write(base, new, key)` is `base` with the view's new value written in (None for a
    read-only view), `layout(array, key)` makes the same view of a numpy array."""

    __slots__ = ("read", "write", "layout")

    def __init__(self, read, write, layout):
        self.read, self.write, self.layout = read, write, layout


class _Views:
    """A base's views, as weak references: only live ones are kept current. Dead ones are
    dropped whenever the list doubles, so reading views in a loop keeps it short."""

    __slots__ = ("refs", "limit")

    def __init__(self):
        self.refs, self.limit = [], 16

    def add(self, view):
        refs = self.refs
        refs.append(weakref.ref(view))
        if len(refs) > self.limit:
            refs[:] = [ref for ref in refs if ref() is not None]
            self.limit = max(16, 2 * len(refs))


# A view tracer's `_base` slot holds (base, kind, key); a base's `_views` slot its _Views.
# Both stay unset on tracers that are not views or have none: the common path pays nothing.


def link(view, base, kind, key):
    """Make tracer `view` a numpy view of tracer `base`, of `kind` (a ViewKind) at `key`."""
    view._base = (base, kind, key)
    if view.builder is not base.builder:
        # read inside a nested staging: never refreshed (writes through it are refused)
        return
    try:
        base._views.add(view)
    except AttributeError:
        base._views = _Views()
        base._views.add(view)


def base_of(tracer):
    """(base, kind, key) for a tracer that views `base`; None for one that owns its data."""
    return getattr(tracer, "_base", None)


@functools.lru_cache(maxsize=256)
def _owner_layout(shape):
    """A C-contiguous numpy array of `shape` with no data of its own (itemsize 1): numpy's
    stride arithmetic on it tells whether a reshape of a view would copy. Never read."""
    strides = tuple(int(np.prod(shape[i + 1:], dtype=int)) for i in range(len(shape)))
    layout = as_strided(np.empty(0, np.int8), shape, strides)
    layout.flags.writeable = False
    return layout


def _layout(tracer):
    """`_owner_layout` viewed as `tracer` views the array owning its data."""
    link_ = base_of(tracer)
    if link_ is None:
        return _owner_layout(tracer.shape)
    base, kind, key = link_
    return kind.layout(_layout(base), key)


def memory_layout(tracer):
    """A numpy array with no data of its own laid out as `tracer` would be in eager numpy
    (a transpose's strides, a reversed view's negative ones): numpy's iterators over it
    visit the elements in eager numpy's order. Never read."""
    return _layout(tracer)


def writable_builder(target, whole=False):
    """The current builder, after checking that a write into `target` can be staged with
    numpy's meaning; raises an XformError naming the reason otherwise. A `whole` array
    update (`x += v`, `np.add(x, v, out=x)`) of an argument rebinds it inside the function,
    as it did before writes were staged; the caller's array is not changed."""
    builder = current_builder()
    node = target
    while True:
        if node.builder is not builder:
            raise UnsupportedError(
                "writing into a traced array of an enclosing function from inside a nested "
                "staging (xform.cond, while_loop, scan, jit, grad, ...) is not supported",
                user_frame_info(), "return the new value from the inner function and assign "
                "it outside: x = xform.cond(...), or build the array inside")
        link_ = base_of(node)
        if link_ is None:
            break
        if link_[1].write is None:
            raise TypeCheckError("assignment destination is read-only (a view made by "
                                 "np.diagonal or np.broadcast_to, as in numpy)",
                                 user_frame_info(), "copy it first: v = v.copy()")
        node = link_[0]
    if not (whole and node is target) and node.graph_var in builder.inputs:
        raise TypeCheckError(
            "writing into an argument of the staged function (or a view of one) would "
            "mutate the caller's array, and xform never mutates its caller's arrays",
            user_frame_info(), "copy it first: x = x.copy(), then write into the copy")
    return builder


def assign(target, value, whole=False):
    """Write `value` (a tracer of `target`'s shape and dtype, all of its new value) into
    `target`: `target` is rebound to it, and the arrays it views and the live views of
    each are rebound to what they now hold. Returns `target`."""
    builder = writable_builder(target, whole)
    assert value.shape == target.shape and value.dtype == target.dtype, (value, target)
    var = builder.atom(value)
    if var in builder.inputs:
        # the target must not stand for an input Var: it would then read as an argument
        var = builder.atom(shapes.copy(value))
    target.graph_var = var
    written = {id(target)}
    node, link_ = target, base_of(target)
    while link_ is not None:
        base, kind, key = link_
        base.graph_var = builder.atom(kind.write(base, node, key))
        written.add(id(base))
        node, link_ = base, base_of(base)
    _refresh(node, written, builder)
    return target


def _refresh(node, written, builder):
    """Rebind the live views under `node` (except the `written` ones) to their base's value."""
    views = getattr(node, "_views", None)
    if views is None:
        return
    alive = []
    for ref in views.refs:
        view = ref()
        if view is None:
            continue
        alive.append(ref)
        if id(view) not in written:
            _, kind, key = view._base
            view.graph_var = builder.atom(kind.read(node, key))
        _refresh(view, written, builder)
    views.refs[:] = alive


# -- the numpy functions whose results are views ------------------------------------------

def _viewing(numpy_function, inverse=None, layout=None, when=None):
    """Wrap FUNCTIONS[numpy_function] so that its traced result views its argument.

    `inverse(new, base, *args, **kwargs)` writes a new view value back into the base's shape
    (None: a read-only view); `layout(a, *args, **kwargs)` is the numpy call on a
    stride-only array (default: the numpy function itself); `when(result, base, *args,
    **kwargs)` says whether numpy would return a view (default: always)."""
    plain = FUNCTIONS[numpy_function]
    layout = layout or numpy_function
    kind = ViewKind(
        lambda base, key: plain(base, *key[0], **key[1]),
        None if inverse is None else
        lambda base, new, key: inverse(new, base, *key[0], **key[1]),
        lambda array, key: layout(array, *key[0], **key[1]))

    def view_function(a, *args, **kwargs):
        out = plain(a, *args, **kwargs)
        if type(a) is not Tracer or type(out) is not Tracer:
            return out
        if when is not None and not when(out, a, *args, **kwargs):
            # numpy copies; `plain` may have handed back `a` itself (a reshape to its shape)
            return shapes.copy(out) if out is a else out
        if out is not a:
            link(out, a, kind, (args, kwargs))
        return out

    view_function.__doc__ = plain.__doc__
    view_function.__wrapped__ = plain
    FUNCTIONS[numpy_function] = view_function


def _transpose_back(new, base, axes=None):
    ndim = len(base.shape)
    axes = range(ndim)[::-1] if axes is None else [normalize_axis(a, ndim) for a in axes]
    return shapes.transpose(new, tuple(np.argsort(axes)))


def _reshape_back(new, base, *args, **kwargs):
    return shapes.reshape(new, base.shape)


def _reshape_order(shape=None, order="C", **kwargs):
    return order


def _reshape_back_in_order(new, base, *args, **kwargs):
    return shapes.reshape(new, base.shape, _reshape_order(*args, **kwargs))


def _reshape_is_view(out, base, *args, **kwargs):
    order = _reshape_order(*args, **kwargs)
    if base_of(base) is None and order == "C":
        return True  # an array owning its data is C-contiguous: numpy reshapes it in place
    try:
        np.reshape(_layout(base), out.shape, order=order, copy=False)
    except ValueError:
        return False
    return True


def _ravel_is_view(out, base, order="C"):
    if order == "F":
        return _layout(base).flags.f_contiguous
    return base_of(base) is None or _layout(base).flags.c_contiguous


def _reshape_layout(array, shape=None, order="C", *, newshape=None, copy=None):
    return np.reshape(array, newshape if shape is None else shape, order=order, copy=False)


_viewing(np.transpose, inverse=_transpose_back)
_viewing(np.swapaxes, inverse=lambda new, base, i, j: shapes.swapaxes(new, i, j))
_viewing(np.moveaxis, inverse=lambda new, base, s, d: shapes.moveaxis(new, d, s))
_viewing(np.flip, inverse=lambda new, base, axis=None: shapes.flip(new, axis))
_viewing(np.fliplr, inverse=lambda new, base: shapes.fliplr(new))
_viewing(np.flipud, inverse=lambda new, base: shapes.flipud(new))
_viewing(np.squeeze, inverse=_reshape_back)
_viewing(np.expand_dims, inverse=_reshape_back)
_viewing(np.reshape, inverse=_reshape_back_in_order, layout=_reshape_layout,
         when=_reshape_is_view)
_viewing(np.ravel, inverse=lambda new, base, order="C": shapes.reshape(new, base.shape, order),
         when=_ravel_is_view,
         layout=lambda array, order="C": np.reshape(array, -1, order=order, copy=False))
_viewing(np.diagonal)        # read-only views, as in numpy
_viewing(np.broadcast_to)
# x.flatten() always copies
FUNCTIONS["flatten"] = shapes.ravel
