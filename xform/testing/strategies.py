"""Hypothesis strategies for xform tests: shapes, dtypes and arrays within a domain."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp


def shapes(min_dims=0, max_dims=3, min_side=1, max_side=4):
    """Array shapes, e.g. (), (3,), (2, 4)."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def arrays(shape, dtype=np.float64, low=-2.0, high=2.0):
    """Arrays of `shape` and `dtype` with elements in [low, high] (integers: rounded;
    complex: real and imaginary parts each in [low, high])."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        elements = st.floats(low, high, allow_nan=False, allow_infinity=False,
                             width=dtype.itemsize * 8)
    elif dtype.kind == "c":
        part = st.floats(low, high, allow_nan=False, allow_infinity=False,
                         width=dtype.itemsize * 4)
        elements = st.builds(complex, part, part)
    elif dtype.kind == "b":
        elements = st.booleans()
    else:
        elements = st.integers(int(np.ceil(low)), int(np.floor(high)))
    return hnp.arrays(dtype, shape, elements=elements)


def broadcastable_shapes(shape, min_dims=0, max_dims=3):
    """Shapes that broadcast with `shape`."""
    return hnp.broadcastable_shapes(shape, min_dims=min_dims, max_dims=max_dims, max_side=4)


float_dtypes = st.sampled_from([np.float32, np.float64])
complex_dtypes = st.sampled_from([np.complex64, np.complex128])
