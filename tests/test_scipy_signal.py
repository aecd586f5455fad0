"""scipy.signal staged unmodified (xform/scipy/signal.py): convolve, correlate, fftconvolve
and oaconvolve in every mode and method against SciPy under hypothesis; derivatives against
autograd.scipy.signal and finite differences; vmap against a loop."""
import autograd
import autograd.numpy as anp
import autograd.scipy.signal as asig
import numpy as np
import pytest
import scipy.signal
from hypothesis import given
from hypothesis import strategies as st
from scipy.signal import convolve, fftconvolve

import xform
from xform.errors import UnsupportedError
from xform.testing import check_grads
from xform.testing import strategies as xst


@st.composite
def pairs(draw):
    ndim = draw(st.integers(1, 3))
    shapes = [tuple(draw(st.integers(1, 4)) for _ in range(ndim)) for _ in range(2)]
    return tuple(draw(xst.arrays(s, np.float64, -2, 2)) for s in shapes)


def _valid_ok(a, b):
    return all(x >= y for x, y in zip(a.shape, b.shape)) or \
        all(x <= y for x, y in zip(a.shape, b.shape))


FUNCTIONS = {
    "convolve": lambda a, b, mode, method: convolve(a, b, mode=mode, method=method),
    "correlate": lambda a, b, mode, method: scipy.signal.correlate(a, b, mode, method),
    "fftconvolve": lambda a, b, mode, method: fftconvolve(a, b, mode=mode),
    "oaconvolve": lambda a, b, mode, method: scipy.signal.oaconvolve(a, b, mode=mode),
}


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@given(pairs(), st.sampled_from(["auto", "direct", "fft"]))
def test_values_match_scipy(name, mode, operands, method):
    a, b = operands
    if mode == "valid" and not _valid_ok(a, b):
        return
    fn = FUNCTIONS[name]
    want = fn(a, b, mode, method)
    got = xform.jit(lambda x, y: fn(x, y, mode, method))(a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@given(pairs())
def test_derivatives_match_finite_differences(mode, operands):
    a, b = operands
    if mode == "valid" and not _valid_ok(a, b):
        return
    for name in ("convolve", "correlate"):
        check_grads(lambda x, y: np.sum(np.sin(FUNCTIONS[name](x, y, mode, "auto"))), (a, b),
                    order=2)


@pytest.mark.parametrize("mode", ["full", "valid"])
@given(pairs())
def test_gradients_match_autograd(mode, operands):
    a, b = operands
    if not all(x >= y for x, y in zip(a.shape, b.shape)):
        return   # autograd's convolve recurses forever unless the first is the larger
    # autograd's valid-mode gradient in the kernel recurses forever too: x only there
    argnums = (0, 1) if mode == "full" else (0,)
    mine = xform.grad(lambda x, y: np.sum(np.sin(convolve(x, y, mode=mode))), argnums)(a, b)
    theirs = autograd.grad(lambda x, y: anp.sum(anp.sin(asig.convolve(x, y, mode=mode))),
                           argnums)(a, b)
    for m, t in zip(mine, theirs):
        np.testing.assert_allclose(m, t, rtol=1e-9, atol=1e-9)


@given(pairs(), st.integers(1, 3), st.sampled_from(["full", "same", "valid"]))
def test_vmap_matches_loop(operands, size, mode):
    a, b = operands
    if mode == "valid" and not _valid_ok(a, b):
        return
    stack_a = np.stack([a * (k + 1) for k in range(size)])
    stack_b = np.stack([b - k for k in range(size)])
    for in_axes, args in [((0, None), (stack_a, b)), ((None, 0), (a, stack_b)),
                          ((0, 0), (stack_a, stack_b))]:
        got = xform.vmap(lambda x, y: convolve(x, y, mode=mode), in_axes=in_axes)(*args)
        want = np.stack([convolve(stack_a[i] if in_axes[0] == 0 else a,
                                  stack_b[i] if in_axes[1] == 0 else b, mode=mode)
                         for i in range(size)])
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_fftconvolve_axes_unsupported_names_function():
    with pytest.raises(UnsupportedError, match="scipy.signal.fftconvolve"):
        xform.jit(lambda x: fftconvolve(x, x, axes=0))(np.ones(3))
