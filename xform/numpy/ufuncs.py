"""The ufuncs: each unary, binary and comparison ufunc stages its family's primitive; plus
`x.astype`, `np.where` and `np.clip`."""
import numpy as np

from xform.errors import TypeCheckError, concretization_error, unsupported_error
from xform.ir.ad import aval
from xform.numpy.protocol import implements
from xform.rules.binary import BINARY_PRIMITIVES
from xform.rules.compare import COMPARE_PRIMITIVES, clip_p, where_p
from xform.rules.unary import UNARY_PRIMITIVES, astype
from xform.source_info import user_frame_info

# Each family names its primitives by their ufunc's __name__.
for _primitives in (UNARY_PRIMITIVES, BINARY_PRIMITIVES, COMPARE_PRIMITIVES):
    for _name, _prim in _primitives.items():
        implements(getattr(np, _name))(_prim.bind)
# numpy's aliases are distinct ufunc objects with the same loops.
implements(np.radians)(UNARY_PRIMITIVES["deg2rad"].bind)
implements(np.degrees)(UNARY_PRIMITIVES["rad2deg"].bind)
implements("astype")(astype)


@implements(np.where)
def where(condition, x=None, y=None):
    """`np.where(c, x, y)`; the one-argument form needs concrete values."""
    if (x is None) != (y is None):
        raise TypeCheckError("np.where: either both or neither of x and y should be given",
                             user_frame_info())
    if x is None:
        raise concretization_error(
            "np.where(condition) with one argument (its size depends on data)")
    return where_p.bind(condition, x, y)


@implements(np.clip)
def clip(a, a_min=None, a_max=None, out=None, **kwargs):
    """`np.clip`; a missing bound is a plain maximum/minimum, no bound np.positive, as in
    numpy."""
    if out is not None:
        raise unsupported_error("numpy.clip(..., out=...)")
    a_min = kwargs.pop("min", a_min)
    a_max = kwargs.pop("max", a_max)
    if kwargs:
        raise unsupported_error(f"numpy.clip(..., {', '.join(kwargs)}=...)")
    # numpy takes `a` as an array: a Python scalar is not weakly typed there
    a = astype(a, aval(a).dtype)
    if a_min is None and a_max is None:
        return np.positive(a)
    if a_min is None:
        return np.minimum(a, a_max)
    if a_max is None:
        return np.maximum(a, a_min)
    return clip_p.bind(a, a_min, a_max)
