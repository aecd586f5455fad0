"""Collectives inside `vmap(..., axis_name=)`, as JAX's under vmap: `psum`, `pmean`, `pmax`,
`pmin` and `all_gather` over the lanes of the named axis (the result is the same in every
lane). The name is bound while the mapped function is staged (`bound_axis`), to the axis's
lane index, a hidden input the batch rules of xform.rules.collectives recognise."""
from __future__ import annotations

import contextlib
import contextvars

import numpy as np

from xform.errors import TypeCheckError
from xform.rules.collectives import all_gather_p, pmax_p, psum_p
from xform.source_info import user_frame_info

_AXES: contextvars.ContextVar[dict] = contextvars.ContextVar("xform_vmap_axes", default={})


@contextlib.contextmanager
def bound_axis(name, index, size):
    """Within: `name` denotes the vmap axis whose lane index is `index` (`size` lanes)."""
    token = _AXES.set({**_AXES.get(), name: (index, size)})
    try:
        yield
    finally:
        _AXES.reset(token)


def _axis(name, what):
    axes = _AXES.get()
    if name not in axes:
        raise TypeCheckError(f"{what}: unbound axis name {name!r}", user_frame_info(),
                             f"call it inside xform.vmap(..., axis_name={name!r})")
    return axes[name]


def psum(x, axis_name):
    """The sum of `x` over the lanes of the vmap axis `axis_name`.

    >>> xform.vmap(lambda x: x / xform.psum(x, "i"), axis_name="i")(np.array([1.0, 3.0]))
    array([0.25, 0.75])
    """
    index, _ = _axis(axis_name, "psum")
    return psum_p.bind(x, index)


def pmean(x, axis_name):
    """The mean of `x` over the lanes of the vmap axis `axis_name`."""
    _, size = _axis(axis_name, "pmean")
    return psum(x, axis_name) / size


def pmax(x, axis_name):
    """The maximum of `x` over the lanes of the vmap axis `axis_name`."""
    index, _ = _axis(axis_name, "pmax")
    return pmax_p.bind(x, index)


def pmin(x, axis_name):
    """The minimum of `x` over the lanes of the vmap axis `axis_name`."""
    return -pmax(np.negative(x), axis_name)


def all_gather(x, axis_name):
    """`x` of every lane of the vmap axis `axis_name`, stacked along a new leading axis."""
    index, size = _axis(axis_name, "all_gather")
    return all_gather_p.bind(x, index, size=size)


__all__ = ["all_gather", "bound_axis", "pmax", "pmean", "pmin", "psum"]
