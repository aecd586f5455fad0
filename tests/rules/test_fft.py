"""The fft family: the rule battery on real and complex inputs (every kind, with cropping and
zero-padding lengths and each norm; derivatives in the complex plane), derivatives against
autograd, numpy.fft's functions staged bit for bit, and their errors."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.rules import fft
from xform.testing import check_grads, check_primitive
from xform.testing import strategies as xst

NORMS = ["backward", "ortho", "forward"]


@st.composite
def transform_args(draw, kind, dtype):
    """(x, params) for `fft_p`: 1-3 dims, a few distinct axes, lengths that crop or pad."""
    shape = draw(xst.shapes(min_dims=1, max_dims=3, max_side=4))
    x = draw(xst.arrays(shape, np.float64, -2, 2))
    if dtype == "complex":
        x = x + 1j * draw(xst.arrays(shape, np.float64, -2, 2))
    axes = tuple(draw(st.permutations(range(len(shape))))[:draw(st.integers(1, len(shape)))])
    lengths = tuple(draw(st.integers(1, 6)) for _ in axes)
    return x, {"kind": kind, "axes": axes, "lengths": lengths,
               "norm": draw(st.sampled_from(NORMS))}


# numpy allows: rfft on real input only, the others on either
KIND_DTYPES = [("fft", "complex"), ("fft", "real"), ("ifft", "complex"), ("ifft", "real"),
               ("rfft", "real"), ("irfft", "complex"), ("irfft", "real")]


@pytest.mark.parametrize("kind, dtype", KIND_DTYPES)
@given(data=st.data())
def test_primitive_battery(kind, dtype, data):
    x, params = data.draw(transform_args(kind, dtype))
    check_primitive(fft.fft_p, x, params=params, order=2)


def test_every_primitive_has_a_case():
    prims = {v for v in vars(fft).values() if isinstance(v, xform.Primitive)}
    assert prims == {fft.fft_p}


# -- numpy.fft, staged bit for bit --------------------------------------------------------

FUNCTIONS = [
    ("fft", np.fft.fft), ("ifft", np.fft.ifft), ("rfft", np.fft.rfft),
    ("irfft", np.fft.irfft), ("fft2", np.fft.fft2), ("ifft2", np.fft.ifft2),
    ("rfft2", np.fft.rfft2), ("irfft2", np.fft.irfft2), ("fftn", np.fft.fftn),
    ("ifftn", np.fft.ifftn), ("rfftn", np.fft.rfftn), ("irfftn", np.fft.irfftn),
    ("fft_n_axis_norm", lambda a: np.fft.fft(a, 7, axis=0, norm="ortho")),
    ("ifft_crop", lambda a: np.fft.ifft(a, n=2, norm="forward")),
    ("rfft_odd", lambda a: np.fft.rfft(a, 5, 1)),
    ("irfft_n", lambda a: np.fft.irfft(a, 7, axis=-2, norm="ortho")),
    ("fft2_s", lambda a: np.fft.fft2(a, s=(3, 5))),
    ("rfft2_axes", lambda a: np.fft.rfft2(a, axes=(2, 0))),
    ("irfft2_s", lambda a: np.fft.irfft2(a, s=(2, 5), norm="forward")),
    ("fftn_axes", lambda a: np.fft.fftn(a, axes=(1,))),
    ("rfftn_s_axes", lambda a: np.fft.rfftn(a, s=(4, 3), axes=(0, 2))),
    ("irfftn_s_axes", lambda a: np.fft.irfftn(a, s=(6, 2), axes=(-1, 0), norm="ortho")),
    ("fftshift", np.fft.fftshift), ("ifftshift", np.fft.ifftshift),
    ("fftshift_axis", lambda a: np.fft.fftshift(a, axes=1)),
    ("ifftshift_axes", lambda a: np.fft.ifftshift(a, axes=(0, -1))),
    ("hfft", np.fft.hfft), ("ihfft", np.fft.ihfft),
    ("hfft_n_axis", lambda a: np.fft.hfft(a, 5, axis=1, norm="ortho")),
    ("ihfft_n_norm", lambda a: np.fft.ihfft(a, n=3, axis=0, norm="forward")),
]


def _example(dtype):
    x = np.linspace(-1.5, 2.0, 2 * 3 * 4).reshape(2, 3, 4)
    if dtype == "complex128":
        return x + 1j * np.cos(3 * x)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128", "int64"])
@pytest.mark.parametrize("name, fn", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_staged_matches_numpy(name, fn, dtype):
    a = _example(dtype)
    if dtype == "complex128" and name.startswith(("rfft", "ihfft")):
        pytest.raises(xform.ShapeError, xform.jit(fn), a)
        return
    expected = fn(a)
    staged = xform.jit(fn)(a)
    out_aval = xform.make_graph(fn)(a).out_avals[0]
    assert (out_aval.shape, out_aval.dtype) == (expected.shape, expected.dtype)
    assert staged.dtype == expected.dtype
    np.testing.assert_array_equal(staged, expected)


@pytest.mark.parametrize("name, fn", FUNCTIONS[:12], ids=[f[0] for f in FUNCTIONS[:12]])
def test_numpy_functions_reach_the_table(name, fn):
    assert fn in xform.numpy.FUNCTIONS
    graph = xform.make_graph(fn)(_example("complex128" if "irfft" in name else "float64"))
    assert [e.primitive for e in graph.equations][-1] is fft.fft_p


# -- derivatives of the numpy functions, against autograd --------------------------------

AUTOGRAD = [
    ("fft", lambda m: m.fft.fft, "complex"), ("ifft", lambda m: m.fft.ifft, "complex"),
    ("fft_real", lambda m: m.fft.fft, "real"),
    ("rfft", lambda m: m.fft.rfft, "real"), ("irfft", lambda m: m.fft.irfft, "complex"),
    ("fft2", lambda m: m.fft.fft2, "complex"), ("ifftn", lambda m: m.fft.ifftn, "complex"),
    ("rfft2", lambda m: m.fft.rfft2, "real"), ("rfftn", lambda m: m.fft.rfftn, "real"),
    ("irfft2", lambda m: m.fft.irfft2, "complex"),
    ("irfftn", lambda m: m.fft.irfftn, "complex"),
    ("fft_n", lambda m: lambda a: m.fft.fft(a, 6, axis=0), "complex"),
    ("rfft_n_ortho", lambda m: lambda a: m.fft.rfft(a, 8, axis=1, norm="ortho"), "real"),
    ("irfft_n", lambda m: lambda a: m.fft.irfft(a, 6), "complex"),
    ("fftshift", lambda m: m.fft.fftshift, "complex"),
    ("ifftshift", lambda m: m.fft.ifftshift, "real"),
]


@pytest.mark.parametrize("name, make, dtype", AUTOGRAD, ids=[c[0] for c in AUTOGRAD])
@given(data=st.data())
def test_derivatives_match_autograd(name, make, dtype, data):
    # autograd's real transforms need an even last axis; xform's take any (test_primitive_*)
    shape = data.draw(st.tuples(st.integers(1, 4), st.sampled_from([2, 4, 6])))
    x = data.draw(xst.arrays(shape, np.float64, -2, 2))
    if dtype == "complex":
        x = x + 1j * data.draw(xst.arrays(shape, np.float64, -2, 2))
    check_grads(make(np), (x,), subject=name)
    out, pullback = xform.vjp(make(np), x)
    rng = np.random.default_rng(0)
    ct = rng.standard_normal(out.shape) + 1j * rng.standard_normal(out.shape)
    ct = ct if np.iscomplexobj(out) else ct.real
    expected = autograd.make_vjp(make(anp))(x)[0](ct)
    np.testing.assert_allclose(pullback(ct)[0], expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("fn, dtype", [
    (np.fft.hfft, "complex"), (lambda a: np.fft.hfft(a, 7, axis=0, norm="ortho"), "real"),
    (np.fft.ihfft, "real"), (lambda a: np.fft.ihfft(a, 5, norm="forward"), "real")],
    ids=["hfft", "hfft_n", "ihfft", "ihfft_n"])
def test_hfft_derivatives(fn, dtype):
    x = np.random.default_rng(2).standard_normal((3, 4))
    if dtype == "complex":
        x = x + 1j * np.random.default_rng(3).standard_normal((3, 4))
    check_grads(fn, (x,), order=2)


def test_fftfreq_with_a_traced_spacing():
    def f(d):
        return np.sum(np.fft.fftfreq(6, d) ** 2) + np.sum(np.fft.rfftfreq(5, d))
    np.testing.assert_allclose(xform.jit(f)(0.3), f(0.3), rtol=1e-15)
    check_grads(f, (0.3,), order=2)


def test_vmap_of_a_transform():
    x = np.arange(24.0).reshape(2, 3, 4) ** 1.5
    got = xform.vmap(lambda a: np.fft.rfft(a, 6, axis=0), in_axes=2)(x)
    np.testing.assert_allclose(got, np.stack([np.fft.rfft(x[..., i], 6, axis=0)
                                              for i in range(4)]), atol=1e-12)


# -- errors name the user's line ---------------------------------------------------------

@pytest.mark.parametrize("fn, error", [
    (lambda a: np.fft.fft(a, 0), xform.ShapeError),
    (lambda a: np.fft.fft(a, norm="sideways"), xform.ShapeError),
    (lambda a: np.fft.fft2(a, s=(2, 2, 2)), xform.ShapeError),
    (lambda a: np.fft.fft(a, axis=3), xform.ShapeError),
    (lambda a: np.fft.rfft(a + 1j), xform.ShapeError),
    (lambda a: np.fft.fftn(a, axes=(0, 0)), xform.UnsupportedError),
])
def test_errors(fn, error):
    with pytest.raises(error, match="test_fft.py"):
        xform.jit(fn)(np.ones((2, 3)))
