"""scipy.fft staged unmodified (xform/scipy/fft.py): values against SciPy under hypothesis,
gradients against autograd and finite differences, both import orders of `from scipy.fft
import fft` (before xform: in a fresh interpreter), SciPy untouched outside staging, errors."""
import subprocess
import sys
import textwrap

import autograd
import autograd.numpy as anp
import numpy as np
import pytest
import scipy.fft
from hypothesis import given
from hypothesis import strategies as st
from scipy.fft import fft, fftshift, irfft, rfft

import xform
from xform.errors import UnsupportedError
from xform.scipy.fft import SAME_AS_NUMPY, StagingBackend
from xform.testing import check_grads
from xform.testing import strategies as xst

ONE_AXIS = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftshift", "ifftshift")
REAL_INPUT_ONLY = ("rfft", "ihfft", "rfft2", "rfftn")


def _input(draw, name, ndim):
    shape = draw(xst.shapes(min_dims=ndim, max_dims=ndim, min_side=2, max_side=5))
    x = draw(xst.arrays(shape, np.float64, -2, 2))
    if name not in REAL_INPUT_ONLY and draw(st.booleans()):
        x = x + 1j * draw(xst.arrays(shape, np.float64, -2, 2))
    return x


@pytest.mark.parametrize("name", SAME_AS_NUMPY)
@given(data=st.data())
def test_values_match_scipy(name, data):
    x = _input(data.draw, name, 1 if name in ONE_AXIS else 2)
    ours = xform.jit(lambda v: getattr(scipy.fft, name)(v))(x)
    theirs = getattr(scipy.fft, name)(x)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name, theirs", [
    ("fft", anp.fft.fft), ("ifft", anp.fft.ifft), ("rfft", anp.fft.rfft),
    ("irfft", anp.fft.irfft), ("fft2", anp.fft.fft2), ("fftn", anp.fft.fftn),
    ("fftshift", anp.fft.fftshift)])
@given(data=st.data())
def test_gradients_match_autograd_and_finite_differences(name, theirs, data):
    ndim = 1 if name in ONE_AXIS else 2
    shape = data.draw(xst.shapes(min_dims=ndim, max_dims=ndim, min_side=2, max_side=5))
    if name in ("rfft", "irfft"):   # autograd's real FFTs differentiate even lengths only
        shape = tuple(side + side % 2 for side in shape)
    x = data.draw(xst.arrays(shape, np.float64, -2, 2))
    weights = np.cos(np.arange(x.size, dtype=float)).reshape(x.shape)

    def loss(fn, lib):
        def f(v):
            w = fn(v * weights)   # |w|^2 as w conj(w): smooth at 0, to second order
            return lib.sum(lib.real(w * lib.conj(w)) * (1 + lib.real(fn(v))))
        return f
    ours = loss(getattr(scipy.fft, name), np)
    np.testing.assert_allclose(xform.grad(ours)(x), autograd.grad(loss(theirs, anp))(x),
                               rtol=1e-10, atol=1e-10)
    check_grads(ours, (x,), order=2)


def test_names_imported_from_scipy_fft_stage():
    """`from scipy.fft import fft` (here after `import xform`) binds SciPy's multimethod,
    which dispatches to xform's backend on traced values, with SciPy's extra keywords."""
    x = np.array([1.0, 2.0, 0.0, 4.0])

    def f(v):
        return np.sum(np.abs(fft(v, workers=2)) ** 2) + np.sum(irfft(rfft(v), n=4) * v) \
            + np.sum(fftshift(v) * v[::-1])
    np.testing.assert_allclose(xform.jit(f)(x), f(x), rtol=1e-12)
    check_grads(f, (x,), order=1)


_BEFORE_XFORM = textwrap.dedent("""
    from scipy.fft import fft, rfft
    import numpy as np
    import xform
    x = np.array([1.0, 2.0, 0.0, 4.0])
    f = lambda v: np.sum(np.abs(fft(v)) ** 2) + np.sum(np.imag(rfft(v)) * v[:3])
    print(repr(float(xform.jit(f)(x))), repr(xform.grad(f)(x).tolist()))
""")


def test_names_imported_from_scipy_fft_before_xform_stage():
    """The same, with the import done before xform is (a fresh interpreter)."""
    out = subprocess.run([sys.executable, "-c", _BEFORE_XFORM], capture_output=True,
                         text=True, check=True).stdout.split(" ", 1)
    x = np.array([1.0, 2.0, 0.0, 4.0])

    def f(v):
        return np.sum(np.abs(fft(v)) ** 2) + np.sum(np.imag(rfft(v)) * v[:3])
    np.testing.assert_allclose(float(out[0]), f(x), rtol=1e-12)
    np.testing.assert_allclose(eval(out[1]), xform.grad(f)(x), rtol=1e-12)  # noqa: S307


def test_scipy_fft_untouched_outside_staging():
    """Once xform's backend is registered, eager calls still run SciPy's own backend: the
    same values, bit for bit, and types as with xform's backend skipped."""
    xform.jit(lambda v: fft(v))(np.ones(3))          # registers the backend
    rng = np.random.default_rng(0)
    for x in (rng.standard_normal(8), [1.0, 2.0, 3.0], rng.standard_normal((3, 4)) + 1j):
        for name in ("fft", "rfft", "fftn", "dct", "fftshift"):
            if name == "rfft" and np.iscomplexobj(x):
                continue
            ours = getattr(scipy.fft, name)(x)
            with scipy.fft.skip_backend(StagingBackend):
                theirs = getattr(scipy.fft, name)(x)
            assert type(ours) is type(theirs) and ours.dtype == theirs.dtype
            np.testing.assert_array_equal(ours, theirs)
    with scipy.fft.set_backend("scipy", only=True):    # SciPy's own backend control still works
        np.testing.assert_array_equal(fft(np.ones(2)), np.array([2.0, 0.0]))


def test_unsupported_scipy_fft_names_the_function_and_line():
    def f(v):
        return scipy.fft.dct(v)   # no xform version
    with pytest.raises(UnsupportedError) as info:
        xform.jit(f)(np.ones(4))
    assert "scipy.fft.dct" in str(info.value)
    assert "return scipy.fft.dct(v)" in str(info.value)
    with pytest.raises(UnsupportedError, match="plan"):
        xform.jit(lambda v: fft(v, plan=object()))(np.ones(4))
