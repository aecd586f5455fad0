"""The ufuncs: each unary, binary and comparison ufunc stages its family's primitive; plus
`x.astype`, `np.where`, `np.clip` and the complex parts (`np.real`, `np.imag`, `np.angle`,
`np.real_if_close`, `np.iscomplex`, `np.isreal`)."""
import numpy as np

from xform.errors import ConcretizationError, TypeCheckError, unsupported_error
from xform.ir.ad import aval, zeros
from xform.ir.avals import ShapedArray
from xform.numpy.protocol import implements
from xform.rules.binary import BINARY_PRIMITIVES
from xform.rules.compare import COMPARE_PRIMITIVES, clip_p, where_p
from xform.rules.unary import UNARY_PRIMITIVES, astype, imag_p, real_p
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
    """`np.where(c, x, y)`; the one-argument form is `np.nonzero(c)`, as numpy's (its size
    read from the call's values, guarded)."""
    if (x is None) != (y is None):
        raise TypeCheckError("np.where: either both or neither of x and y should be given",
                             user_frame_info())
    if x is None:
        return np.nonzero(condition)
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


# -- complex parts: numpy's functions return a real argument itself (real) or zeros (imag) ----

def _is_complex(x) -> bool:
    return aval(x).dtype.kind == "c"


@implements(np.real)
def real(val):
    """`np.real`: the real part of a complex value; a real value as it is."""
    return real_p.bind(val) if _is_complex(val) else val


@implements(np.imag)
def imag(val):
    """`np.imag`: the imaginary part of a complex value; zeros for a real value."""
    return imag_p.bind(val) if _is_complex(val) else zeros(aval(val).strengthen())


@implements(np.angle)
def angle(z, deg=False):
    """`np.angle`: arctan2(imag, real), so its derivative is arctan2's (as numpy computes it).

    >>> xform.grad(lambda z: np.angle(z))(3 + 4j)    # d/dx - 1j d/dy, as JAX and autograd
    np.complex128(-0.16-0.12j)
    """
    if _is_complex(z):
        result = np.arctan2(imag_p.bind(z), real_p.bind(z))
    else:
        result = np.arctan2(0, z)
    return result * (180 / np.pi) if deg else result


@implements(np.real_if_close)
def real_if_close(a, tol=100):
    """`np.real_if_close`: a real value as it is; a traced complex value cannot be decided (the
    result's dtype depends on the values)."""
    if not _is_complex(a):
        return a
    raise ConcretizationError(
        "numpy.real_if_close of a traced complex value: whether the result is real depends on "
        "the values", user_frame_info(),
        "use np.real(x) when the imaginary part is known to be negligible")


@implements(np.iscomplex)
def iscomplex(x):
    """`np.iscomplex`: whether each imaginary part is nonzero."""
    if _is_complex(x):
        return imag_p.bind(x) != 0
    return zeros(ShapedArray(aval(x).shape, np.bool_))


@implements(np.isreal)
def isreal(x):
    """`np.isreal`: whether each imaginary part is zero."""
    return imag(x) == 0
