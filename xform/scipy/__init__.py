"""SciPy on tracers, unmodified imports: xform's own versions of SciPy functions (as
jax.scipy sits over jax.numpy), stood in for the originals while staging
(xform/numpy/stand_ins.py). SciPy is imported by the user, never by xform: each module here
registers its stand-ins the first time something is staged after the user imported the SciPy
module it covers (`stand_in_when_imported`), so `import xform` stays as fast as before.
"""
from xform.scipy import fft, integrate, linalg, signal  # noqa: F401,E402
