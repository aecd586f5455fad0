"""SciPy on tracers, unmodified imports: xform's own versions of SciPy functions (as
jax.scipy sits over jax.numpy), stood in for the originals while staging
(xform/numpy/stand_ins.py). SciPy is imported by the user, never by xform: each module here
registers its stand-ins the first time something is staged after the user imported the SciPy
module it covers (`stand_in_when_imported`), or at `import xform` when that module was imported
before, so `import xform` costs nothing for SciPy the user does not use.
"""
import importlib

import numpy as np

from xform.ir.tracer import Tracer
from xform.numpy.stand_ins import define_group, stand_in, stand_in_when_imported

SCIPY_GROUP = "SciPy"


def _reaches_scipy(names) -> bool:
    """Whether code spelling `names` can call SciPy: it names SciPy's package or imports one
    of its modules (`from scipy.special import logsumexp` spells "scipy.special"). (A SciPy
    function or module the code holds is opaque to the walk that asks, xform.runtime.reads:
    code reaching SciPy so gets every group's stand-ins anyway.)"""
    return any(name == "scipy" or name.startswith("scipy.") for name in names)


# SciPy's ~100 stand-ins are set and reset around the stagings of code that can reach SciPy
# only: once SciPy was imported, every staging paid for them (~8 us)
define_group(SCIPY_GROUP, _reaches_scipy)


def _installer(module_name):
    def install():
        importlib.import_module(module_name)   # registers its tables and stand-ins
    return install


def _tracers_as_numpy_arrays():
    """SciPy's array-API code writes in place (`xpx.at(z, zero).set(nan)`, in zscore, iqr,
    ...) only into an array its `is_writeable_array` accepts, and refused a Tracer ("Can't
    update read-only array"); a Tracer takes writes as an array made inside the function
    does. Its `array_namespace` (asked again inside the compat `clip`, which pearsonr calls)
    refused a Tracer too: a Tracer's namespace is a numpy array's."""
    from scipy._lib.array_api_compat.common import _helpers
    stand_in(_helpers.is_writeable_array, lambda x: True)

    def numpy_namespace(*xs, **kwargs):
        return _helpers.array_namespace(
            *(np.empty(0) if type(x) is Tracer else x for x in xs), **kwargs)
    stand_in(_helpers.array_namespace, numpy_namespace)


stand_in_when_imported("scipy._lib.array_api_compat.common._helpers",
                       _tracers_as_numpy_arrays, SCIPY_GROUP)
def _compat_clip_of_tracers():
    """The array-API compat `clip` (pearsonr's `xp.clip(r, -1., 1.)`) writes its argument
    into an array numpy's `empty` made (`out[()] = x`), which cannot hold a Tracer; for a
    Tracer it is numpy's clip in the argument's dtype."""
    from scipy._lib.array_api_compat.common import _aliases

    def clip(x, /, min=None, max=None, *, xp, out=None):
        if out is not None or type(x) is not Tracer:
            return _aliases.clip(x, min, max, xp=xp, out=out)   # inside: the original
        return np.clip(x, min, max).astype(x.dtype)
    stand_in(_aliases.clip, clip)


stand_in_when_imported("scipy._lib.array_api_compat.common._aliases",
                       _compat_clip_of_tracers, SCIPY_GROUP)
stand_in_when_imported("scipy.special", _installer("xform.scipy.special"), SCIPY_GROUP)
stand_in_when_imported("scipy.stats", _installer("xform.scipy.stats"), SCIPY_GROUP)
stand_in_when_imported("scipy.stats._kde", _installer("xform.scipy.kde"), SCIPY_GROUP)
stand_in_when_imported("scipy.spatial.distance", _installer("xform.scipy.spatial"), SCIPY_GROUP)
stand_in_when_imported("scipy.ndimage", _installer("xform.scipy.ndimage"), SCIPY_GROUP)

# These register their own installers (stand_in_when_imported) when imported here.
from xform.scipy import (fft, integrate, interpolate, linalg, optimize, riccati,  # noqa: F401,E402
                         signal)
