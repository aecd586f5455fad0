"""SciPy on tracers, unmodified imports: xform's own versions of SciPy functions (as
jax.scipy sits over jax.numpy), stood in for the originals while staging
(xform/numpy/stand_ins.py). SciPy is imported by the user, never by xform: each module here
registers its stand-ins the first time something is staged after the user imported the SciPy
module it covers (`stand_in_when_imported`), or at `import xform` when that module was imported
before, so `import xform` costs nothing for SciPy the user does not use.
"""
import importlib

from xform.numpy.stand_ins import stand_in, stand_in_when_imported


def _installer(module_name):
    def install():
        importlib.import_module(module_name)   # registers its tables and stand-ins
    return install


def _tracers_take_writes():
    """SciPy's array-API code writes in place (`xpx.at(z, zero).set(nan)`, in zscore, iqr,
    ...) only into an array its `is_writeable_array` accepts, and refused a Tracer ("Can't
    update read-only array"); a Tracer takes writes as an array made inside the function
    does."""
    from scipy._lib.array_api_compat.common import _helpers
    stand_in(_helpers.is_writeable_array, lambda x: True)


stand_in_when_imported("scipy._lib.array_api_compat.common._helpers", _tracers_take_writes)
stand_in_when_imported("scipy.special", _installer("xform.scipy.special"))
stand_in_when_imported("scipy.stats", _installer("xform.scipy.stats"))
stand_in_when_imported("scipy.spatial.distance", _installer("xform.scipy.spatial"))
stand_in_when_imported("scipy.ndimage", _installer("xform.scipy.ndimage"))

# These register their own installers (stand_in_when_imported) when imported here.
from xform.scipy import (fft, integrate, interpolate, linalg, optimize, riccati,  # noqa: F401,E402
                         signal)
