"""numpy on tracers (as jax.numpy sits over lax): the protocol tables and every numpy-facing
function, built on the primitive families in xform.rules. Importing this package fills the
tables and installs the Tracer's dispatch hooks."""
from xform.numpy import (axes, construct, contract, fft, index, inplace, join,  # noqa: F401
                         linalg, reduce, shape, stand_ins, ufuncs, views)
from xform.numpy import math, polynomial, rearrange, sequences, statistics  # noqa: F401
from xform.numpy import captured, iterate, random  # noqa: F401
from xform.numpy.index import index_add
from xform.numpy.protocol import FUNCTIONS, UFUNCS, implements, numpy_name
from xform.numpy.rearrange import put_along_axis

__all__ = ["FUNCTIONS", "UFUNCS", "implements", "index_add", "numpy_name", "put_along_axis"]
