"""Complex values end to end: every rule that can see a complex value, against autograd (the
shared JAX/autograd convention: cotangents pair with tangents by Re(sum(ct * t)), so `grad` of
a real function is d/dx - 1j d/dy) and against finite differences in the complex plane (the
real and the imaginary part perturbed separately), with values against numpy."""
import sys
import warnings
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.rules import compare as C
from xform.rules import reduce as R
from xform.rules import unary as U
from xform.rules.contract import dot_p, einsum_p, matmul_p
from xform.rules.binary import BINARY_PRIMITIVES
from xform.testing import check_grads, check_primitive
from xform.testing import strategies as xst

autograd = pytest.importorskip("autograd")
anp = pytest.importorskip("autograd.numpy")

COMPLEX = (np.complex64, np.complex128)


@pytest.fixture(scope="module", autouse=True)
def debug_mode():
    # each value is checked against its abstract value, each rule's outputs against the
    # transform's expectation (as in tests/rules)
    with xform.config.debug_mode():
        yield


def off_axes(draw, shape, dtype=np.complex128, low=0.25, high=2.0):
    """Complex arrays with |real| and |imag| in [low, high], in a drawn quadrant: away from
    every branch cut (they lie on the axes) and from the kinks of abs, sign and angle."""
    z = draw(xst.arrays(shape, dtype, low, high), label="z")
    quarter = draw(st.integers(0, 3), label="quadrant")
    return (z * np.asarray(1j ** quarter, dtype)).astype(dtype)   # a rotation is exact


def finite_difference(f, z, direction, eps=1e-6):
    """(f(z + eps d) - f(z - eps d)) / 2 eps in complex128."""
    z = np.asarray(z, np.complex128)
    plus, minus = np.asarray(f(z + eps * direction)), np.asarray(f(z - eps * direction))
    return (plus.astype(np.complex128) - minus) / (2 * eps)


# -- the convention, pinned (values from the definition, worked by hand) ---------------------

def test_grad_of_a_real_function_is_d_dx_minus_i_d_dy():
    # |z|^2 = x^2 + y^2: (2x, 2y) at (3, 4); Re(z^2) = x^2 - y^2: (2x, -2y)
    assert xform.grad(lambda z: np.abs(z) ** 2)(3 + 4j) == 6 - 8j
    assert xform.grad(lambda z: np.real(z * z))(3 + 4j) == 6 + 8j
    assert autograd.grad(lambda z: anp.abs(z) ** 2)(3 + 4j) == 6 - 8j


def test_jvp_of_abs_is_the_real_directional_derivative():
    z, t = 1.5 + 0.5j, 1j
    _, tangent = xform.jvp(np.abs, (z,), (t,))
    # Re(conj(z) t) / |z| = 0.5 / sqrt(2.5)
    np.testing.assert_allclose(tangent, 0.5 / np.sqrt(2.5), rtol=1e-15)
    np.testing.assert_allclose(tangent, finite_difference(np.abs, z, t).real, rtol=1e-8)
    assert np.asarray(tangent).dtype == np.float64


def test_vjp_of_a_holomorphic_function_multiplies_by_its_derivative():
    z, ct = 0.3 + 0.7j, 0.2 - 1.1j
    _, pullback = xform.vjp(np.sin, z)
    np.testing.assert_allclose(pullback(ct)[0], ct * np.cos(z), rtol=1e-14)
    _, autograd_pullback = autograd.make_vjp(anp.sin)(z)[0], autograd.make_vjp(anp.sin)(z)[0]
    np.testing.assert_allclose(pullback(ct)[0], autograd_pullback(ct), rtol=1e-14)


# -- one-input functions: a case table ---------------------------------------------------------

# fn: the numpy function; ours: its name in autograd.numpy; primitive: what check_primitive
# runs (None: a composition); autograd_ok: where autograd's rule is right (see the notes).
Case = namedtuple("Case", "name fn primitive autograd_ok", defaults=(None, "always"))

UNARY = [
    Case("sin", np.sin, U.sin_p), Case("cos", np.cos, U.cos_p), Case("tan", np.tan, U.tan_p),
    Case("arcsin", np.arcsin, U.arcsin_p), Case("arccos", np.arccos, U.arccos_p),
    Case("arctan", np.arctan, U.arctan_p), Case("sinh", np.sinh, U.sinh_p),
    Case("cosh", np.cosh, U.cosh_p), Case("tanh", np.tanh, U.tanh_p),
    Case("arcsinh", np.arcsinh, U.arcsinh_p),
    # autograd's 1/sqrt(z^2 - 1) has the wrong sign where Re(z) < 0
    Case("arccosh", np.arccosh, U.arccosh_p, "right half-plane"),
    Case("arctanh", np.arctanh, U.arctanh_p), Case("exp", np.exp, U.exp_p),
    Case("exp2", np.exp2, U.exp2_p), Case("expm1", np.expm1, U.expm1_p),
    Case("log", np.log, U.log_p), Case("log2", np.log2, U.log2_p),
    Case("log10", np.log10, U.log10_p), Case("log1p", np.log1p, U.log1p_p),
    Case("sqrt", np.sqrt, U.sqrt_p), Case("square", np.square, U.square_p),
    Case("reciprocal", np.reciprocal, U.reciprocal_p),
    Case("negative", np.negative, U.negative_p),
    Case("positive", np.positive, U.positive_p, "never"),   # autograd has no rule
    Case("conjugate", np.conjugate, U.conjugate_p), Case("absolute", np.abs, U.absolute_p),
    # numpy 2's sign(z) = z / |z| varies along the circle; autograd's rule is zero
    Case("sign", np.sign, U.sign_p, "never"),
    Case("real", np.real, U.real_p), Case("imag", np.imag, U.imag_p),
    Case("angle", np.angle), Case("angle_deg", lambda z: np.angle(z, deg=True)),
]
AUTOGRAD_NAMES = {"absolute": "abs", "angle_deg": None}


def autograd_fn(case):
    if case.name == "angle_deg":   # autograd's angle takes no deg through its vjp
        return lambda z: anp.angle(z) * (180 / np.pi)
    return getattr(anp, AUTOGRAD_NAMES.get(case.name, case.name))


def test_every_complex_capable_unary_primitive_is_in_the_table():
    z = np.array([0.5 + 0.5j])
    capable = set()
    for name, prim in U.UNARY_PRIMITIVES.items():
        try:
            with np.errstate(all="ignore"):
                getattr(np, name)(z)
        except TypeError:
            continue
        if prim not in {U.rint_p, U.isnan_p, U.isfinite_p, U.isinf_p, U.logical_not_p}:
            capable.add(prim)   # (those have integer or boolean results, or a zero derivative)
    assert capable <= {case.primitive for case in UNARY}


@pytest.mark.parametrize("case", UNARY, ids=lambda c: c.name)
@given(data=st.data())
def test_unary_values_and_derivatives(case, data):
    dtype = data.draw(st.sampled_from(COMPLEX), label="dtype")
    z = off_axes(data.draw, data.draw(xst.shapes(max_dims=2), label="shape"), dtype)
    with np.errstate(all="ignore"):
        expected = case.fn(z)
    got = xform.jit(case.fn)(z)
    assert np.asarray(got).dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(got, expected)
    wide = z.astype(np.complex128)
    for direction in (1, 1j):   # the real part and the imaginary part, separately
        _, tangent = xform.jvp(case.fn, (wide,), (np.full(z.shape, direction),))
        np.testing.assert_allclose(tangent, finite_difference(case.fn, wide, direction),
                                   rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", UNARY, ids=lambda c: c.name)
@given(data=st.data())
def test_unary_vjp_agrees_with_autograd(case, data):
    z = off_axes(data.draw, data.draw(xst.shapes(max_dims=2), label="shape"))
    if case.autograd_ok == "never":
        return
    if case.autograd_ok == "right half-plane":
        z = np.abs(z.real) + 1j * z.imag
    out = case.fn(z)
    ct = data.draw(xst.arrays(np.shape(out), np.asarray(out).dtype, -2, 2), label="ct")
    ours = xform.vjp(case.fn, z)[1](ct)[0]
    theirs = autograd.make_vjp(autograd_fn(case))(z)[0](ct)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", [c for c in UNARY if c.primitive is not None],
                         ids=lambda c: c.name)
@given(data=st.data())
def test_unary_primitive_battery(case, data):
    dtype = data.draw(st.sampled_from(COMPLEX), label="dtype")
    z = off_axes(data.draw, data.draw(xst.shapes(max_dims=2), label="shape"), dtype)
    check_primitive(case.primitive, z, order=2)


def test_sign_derivative_is_the_circle_tangent():
    # sign(z) = z/|z|: moving along z changes nothing, moving across turns it by 1/|z|
    z = 3 + 4j
    _, along = xform.jvp(np.sign, (z,), (z,))
    _, across = xform.jvp(np.sign, (z,), (1j * z,))
    np.testing.assert_allclose(along, 0, atol=1e-15)
    np.testing.assert_allclose(across, 1j * z / abs(z), rtol=1e-15)


def test_arccosh_derivative_in_the_left_half_plane():
    z = -3 + 4j
    _, tangent = xform.jvp(np.arccosh, (z,), (1.0,))
    np.testing.assert_allclose(tangent, finite_difference(np.arccosh, z, 1.0), rtol=1e-8)


def test_abs_and_sign_have_zero_derivative_at_zero():
    # no derivative exists there; 0 (JAX's and autograd's choice for abs) rather than nan
    for fn in (np.abs, np.sign):
        _, tangent = xform.jvp(fn, (0j,), (1 + 1j,))
        assert tangent == 0
        assert xform.vjp(fn, 0j)[1](np.ones((), np.asarray(fn(0j)).dtype))[0] == 0
    assert xform.grad(np.abs)(0j) == autograd.grad(anp.abs)(0j) == 0


# -- two inputs, real and complex mixed -----------------------------------------------------------

BINARY = ["add", "subtract", "multiply", "divide", "power", "float_power", "maximum", "minimum"]
LINEAR_IN = {"add": None, "subtract": None, "multiply": None, "divide": (0,), "power": (),
             "float_power": (), "maximum": (), "minimum": ()}
MIXES = {"cc": (np.complex128, np.complex128), "cr": (np.complex128, np.float64),
         "rc": (np.float64, np.complex128), "c64": (np.complex64, np.complex64)}


def binary_operands(data, mix):
    shape = data.draw(xst.shapes(max_dims=2), label="shape")
    other = data.draw(xst.broadcastable_shapes(shape, max_dims=2), label="other shape")
    operands = []
    for dtype, s in zip(MIXES[mix], (shape, other)):
        if np.dtype(dtype).kind == "c":
            operands.append(off_axes(data.draw, s, dtype))
        else:   # positive: a real base of a complex power stays off its cut
            operands.append(data.draw(xst.arrays(s, dtype, 0.25, 2.0), label="real"))
    return operands


@pytest.mark.parametrize("mix", sorted(MIXES))
@pytest.mark.parametrize("name", BINARY)
@given(data=st.data())
def test_binary_battery(name, mix, data):
    x, y = binary_operands(data, mix)
    if name in ("maximum", "minimum"):
        y = y + np.asarray(0.125, y.dtype)   # no ties: the derivative is one-sided there
    check_primitive(BINARY_PRIMITIVES[name], x, y, order=2, linear_argnums=LINEAR_IN[name])


@pytest.mark.parametrize("mix", ["cc", "cr", "rc"])
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "power"])
@given(data=st.data())
def test_binary_vjp_agrees_with_autograd(name, mix, data):
    x, y = binary_operands(data, mix)
    fn, afn = getattr(np, name), getattr(anp, name)
    out = fn(x, y)
    ct = data.draw(xst.arrays(out.shape, out.dtype, -2, 2), label="ct")
    ours = xform.vjp(fn, x, y)[1](ct)
    theirs = autograd.make_vjp(afn, argnum=0)(x, y)[0](ct), \
        autograd.make_vjp(afn, argnum=1)(x, y)[0](ct)
    for o, t, operand in zip(ours, theirs, (x, y)):
        assert o.dtype == operand.dtype     # a real operand's cotangent is real
        np.testing.assert_allclose(o, t, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fn", [np.power, np.float_power])
def test_power_of_a_negative_real_base_to_a_complex_exponent(fn):
    # the base's log is complex there (autograd takes the real log: nan)
    x, y = np.array([-2.0, 1.5, -0.5]), np.array([0.5 + 1j, -0.3 + 0.2j, 2 - 1j])
    check_grads(fn, (x, y), order=2)
    _, tangent = xform.jvp(lambda y: fn(x, y), (y,), (np.ones(3),))
    np.testing.assert_allclose(tangent, fn(x, y) * np.log(x.astype(complex)), rtol=1e-14)


# -- reductions, contractions, where, shapes ----------------------------------------------------

def c(rng, *shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


# name: (function of numpy module `m`, operand shapes, which operands are real, autograd
# agrees); each function returns a complex or real array.
COMPOSITIONS = {
    "sum": (lambda m, a: m.sum(a, axis=0), [(3, 4)], ()),
    "prod": (lambda m, a: m.prod(a, axis=1), [(3, 4)], ()),
    "mean": (lambda m, a: m.mean(a, axis=1), [(3, 4)], ()),
    "cumsum": (lambda m, a: m.cumsum(a, axis=1), [(3, 4)], ()),
    "cumprod": (lambda m, a: m.cumprod(a, axis=1), [(3, 4)], ()),
    "var": (lambda m, a: m.var(a, axis=0), [(3, 4)], ()),
    "std": (lambda m, a: m.std(a, axis=1), [(3, 4)], ()),
    "matmul": (lambda m, a, b: m.matmul(a, b), [(3, 4), (4, 2)], ()),
    "matmul_real_right": (lambda m, a, b: m.matmul(a, b), [(3, 4), (4, 2)], (1,)),
    "dot_3d": (lambda m, a, b: m.dot(a, b), [(2, 3, 4), (3, 4, 2)], ()),
    "einsum": (lambda m, a, b: m.einsum("ij,jk->ik", a, b), [(3, 4), (4, 2)], ()),
    "vdot": (lambda m, a, b: m.vdot(a, b), [(4,), (4,)], ()),
    "inner": (lambda m, a, b: m.inner(a, b), [(4,), (4,)], ()),
    "outer": (lambda m, a, b: m.outer(a, b), [(3,), (4,)], ()),
    "outer_real_left": (lambda m, a, b: m.outer(a, b), [(3,), (4,)], (0,)),
    "where": (lambda m, a, b: m.where(m.real(a) > 0, a, b), [(5,), (5,)], ()),
    "where_real_branch": (lambda m, a, b: m.where(m.real(a) > 0, a, b), [(5,), (5,)], (1,)),
    "max": (lambda m, a: m.max(a, axis=0), [(3, 4)], ()),
    "min": (lambda m, a: m.min(a), [(3, 4)], ()),
    "hermitian_gram": (lambda m, a: m.matmul(m.conj(a).T, a), [(3, 2)], ()),
    "transpose_slice": (lambda m, a: m.reshape(a.T[1:, ::2], (-1,)), [(3, 4)], ()),
    "concatenate_mixed": (lambda m, a, b: m.concatenate([a, b]), [(3,), (2,)], (1,)),
    "astype_complex": (lambda m, a: m.abs(a.astype(np.complex128) * (1 + 2j)), [(4,)], (0,)),
    "real_imag_mix": (lambda m, a: m.real(a) * m.imag(a) + m.abs(m.sin(a)), [(4,)], ()),
}
# autograd has no complex rule for these (it raises), or a wrong one (var, std)
NOT_IN_AUTOGRAD = {"cumprod", "vdot", "var", "std"}


def operands(rng, shapes, real):
    return [rng.standard_normal(s) if i in real else c(rng, *s) for i, s in enumerate(shapes)]


@pytest.mark.parametrize("name", sorted(COMPOSITIONS))
@given(seed=st.integers(0, 2 ** 16))
def test_composition_derivatives(name, seed):
    fn, shapes, real = COMPOSITIONS[name]
    args = operands(np.random.default_rng(seed), shapes, real)
    check_grads(lambda *xs: fn(np, *xs), args, order=2)


@pytest.mark.parametrize("name", sorted(set(COMPOSITIONS) - NOT_IN_AUTOGRAD))
@given(seed=st.integers(0, 2 ** 16))
def test_composition_vjp_agrees_with_autograd(name, seed):
    fn, shapes, real = COMPOSITIONS[name]
    rng = np.random.default_rng(seed)
    args = operands(rng, shapes, real)
    out = np.asarray(fn(np, *args))
    ct = c(rng, *out.shape) if out.dtype.kind == "c" else rng.standard_normal(out.shape)
    ours = xform.vjp(lambda *xs: fn(np, *xs), *args)[1](ct)
    for i, arg in enumerate(args):
        with warnings.catch_warnings():   # autograd's astype casts complex to real
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            theirs = autograd.make_vjp(lambda *xs: fn(anp, *xs), argnum=i)(*args)[0](ct)
        assert ours[i].dtype == arg.dtype
        if arg.dtype.kind == "f":
            # autograd's where and concatenate leave a real input a complex cotangent; only
            # its real part pairs with a real tangent (JAX, and autograd's arithmetic, keep it)
            theirs = np.real(theirs)
        np.testing.assert_allclose(ours[i], theirs, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(COMPOSITIONS))
def test_composition_values(name):
    fn, shapes, real = COMPOSITIONS[name]
    args = operands(np.random.default_rng(0), shapes, real)
    expected = fn(np, *args)
    got = xform.jit(lambda *xs: fn(np, *xs))(*args)
    assert np.asarray(got).dtype == np.asarray(expected).dtype
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-14)


PrimCase = namedtuple("PrimCase", "name primitive shapes real params linear_argnums",
                      defaults=({}, None))

PRIMITIVES = [
    PrimCase("sum", R.sum_p, [(3, 4)], (), {"axes": (0,), "dtype": None}),
    PrimCase("prod", R.prod_p, [(3, 4)], (), {"axes": (1,), "dtype": None}),
    PrimCase("cumsum", R.cumsum_p, [(3, 4)], (),
             {"axis": 1, "reverse": True, "exclusive": False}),
    PrimCase("cumprod", R.cumprod_p, [(3, 4)], (),
             {"axis": 0, "reverse": False, "exclusive": True}),
    PrimCase("reduce_max", R.reduce_max_p, [(3, 4)], (), {"axes": (1,)}),
    PrimCase("reduce_min", R.reduce_min_p, [(3, 4)], (), {"axes": (0, 1)}),
    PrimCase("matmul", matmul_p, [(3, 4), (4, 2)], ()),
    PrimCase("matmul_real_left", matmul_p, [(3, 4), (4,)], (0,)),
    PrimCase("dot", dot_p, [(2, 3, 4), (3, 4, 2)], ()),
    PrimCase("einsum", einsum_p, [(3, 4), (4, 2)], (1,), {"subscripts": "ij,jk->ik"}),
    PrimCase("convert_to_real", U.convert_p, [(3,)], (), {"dtype": np.dtype(np.float64)}),
    PrimCase("convert_from_real", U.convert_p, [(3,)], (0,),
             {"dtype": np.dtype(np.complex128)}),
    PrimCase("convert_to_complex64", U.convert_p, [(3,)], (),
             {"dtype": np.dtype(np.complex64)}),
]


@pytest.mark.parametrize("case", PRIMITIVES, ids=lambda c: c.name)
@given(seed=st.integers(0, 2 ** 16))
def test_primitive_battery(case, seed):
    args = operands(np.random.default_rng(seed), case.shapes, case.real)
    with warnings.catch_warnings():   # convert's impl warns as numpy's astype does
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        check_primitive(case.primitive, *args, params=case.params, order=2,
                        linear_argnums=case.linear_argnums)


@given(seed=st.integers(0, 2 ** 16))
def test_where_battery_with_mixed_branches(seed):
    rng = np.random.default_rng(seed)
    check_primitive(C.where_p, rng.standard_normal(5) > 0, c(rng, 5), rng.standard_normal(5),
                    order=2, linear_argnums=(1, 2))


def test_var_of_complex_is_the_mean_squared_distance():
    z = c(np.random.default_rng(3), 5, 3)
    grad = xform.grad(lambda z: np.sum(np.var(z, axis=0)))(z)
    # d/dx - 1j d/dy of mean |z - mean|^2: 2 conj(z - mean) / n (the mean's share sums to 0)
    np.testing.assert_allclose(grad, 2 * np.conj(z - z.mean(axis=0)) / 5, rtol=1e-12)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("fn", [lambda z: np.var(z, axis=0), lambda z: np.std(z, ddof=1),
                                lambda z: np.mean(z, axis=1),
                                lambda z: np.var(z, axis=1, keepdims=True)])
@given(seed=st.integers(0, 2 ** 16))
def test_mean_var_std_match_numpy_bit_for_bit(dtype, fn, seed):
    z = c(np.random.default_rng(seed), 5, 3).astype(dtype)
    expected, got = fn(z), xform.jit(fn)(z)
    assert np.asarray(got).dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(got, expected)


# -- the fused region's reverse mode with complex inputs (not one real seed per input) ---------

def test_fused_region_vjp_with_complex_inputs_agrees_with_autograd():
    def f(m, z):
        return m.sum(m.abs(z) ** 2 + m.real(z) * m.imag(z) + m.abs(m.sin(z)))
    z = c(np.random.default_rng(4), 6)
    theirs = autograd.grad(lambda z: f(anp, z))(z)
    np.testing.assert_allclose(xform.grad(lambda z: f(np, z))(z), theirs, rtol=1e-12)
    np.testing.assert_allclose(xform.grad(xform.jit(lambda z: f(np, z)))(z), theirs,
                               rtol=1e-12)


def test_fused_region_vjp_of_a_real_input_through_complex_values(monkeypatch):
    monkeypatch.setattr(sys.modules["xform.passes.fuse"], "FUSION_MIN_SIZE", 0)  # small too
    # one real seed per real input is enough even when the region holds conj, real and imag:
    # the partial of a complex output is complex, and the cotangent keeps the real part
    def f(m, x):
        z = x * (1 + 2j) + 0.5j
        w = m.conj(z) * m.exp(1j * x) + m.imag(z * m.conj(z + x)) + m.real(z) * m.abs(z)
        return m.real(m.sum(w) * (0.3 - 0.4j))
    x = np.random.default_rng(6).standard_normal(5)
    assert "elementwise" in str(xform.make_graph(xform.grad(lambda x: f(np, x)))(x))
    theirs = autograd.grad(lambda x: f(anp, x))(x)
    np.testing.assert_allclose(xform.grad(lambda x: f(np, x))(x), theirs, rtol=1e-12)


def test_vmap_of_a_gradient_of_a_complex_function():
    zs = c(np.random.default_rng(5), 4, 3)
    fn = xform.grad(lambda z: np.sum(np.abs(np.exp(z)) * np.angle(z)))
    expected = np.stack([autograd.grad(lambda z: anp.sum(anp.abs(anp.exp(z)) * anp.angle(z)))(z)
                         for z in zs])
    np.testing.assert_allclose(xform.vmap(fn)(zs), expected, rtol=1e-12)


# -- dtype conversion -------------------------------------------------------------------------

def test_astype_complex_to_real_warns_as_numpy_and_drops_the_imaginary_part():
    z = np.array([1 + 2j, 3 - 1j])
    with pytest.warns(np.exceptions.ComplexWarning):
        expected = z.astype(np.float64)
    with pytest.warns(np.exceptions.ComplexWarning):
        got = xform.jit(lambda z: z.astype(np.float64))(z)
    np.testing.assert_array_equal(got, expected)


def test_astype_derivatives_embed_and_project():
    # real -> complex: the tangent embeds; complex -> real: the cotangent keeps the real part
    x = np.array([0.3, -1.2])
    _, tangent = xform.jvp(lambda x: x.astype(np.complex128), (x,), (np.ones(2),))
    np.testing.assert_array_equal(tangent, np.ones(2, np.complex128))
    ct = np.array([1 - 2j, 3 + 1j])
    assert xform.vjp(lambda x: x.astype(np.complex128), x)[1](ct)[0].tolist() == [1.0, 3.0]
    z = np.array([1 + 2j, 3 - 1j])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        _, tangent = xform.jvp(lambda z: z.astype(np.float64), (z,), (np.array([1j, 2 + 1j]),))
        cotangent = xform.vjp(lambda z: z.astype(np.float64), z)[1](np.array([2.0, 5.0]))[0]
    np.testing.assert_array_equal(tangent, [0.0, 2.0])
    np.testing.assert_array_equal(cotangent, np.array([2.0, 5.0], np.complex128))


def test_real_functions_through_complex_intermediates_agree_with_autograd():
    def f(m, x):
        return m.sum(m.real(m.exp(1j * x) * (x + 2j)) + m.abs(x * (1 - 1j)))
    x = np.array([0.3, -1.2, 2.0])
    ours = xform.grad(lambda x: f(np, x))(x)
    assert ours.dtype == np.float64
    np.testing.assert_allclose(ours, autograd.grad(lambda x: f(anp, x))(x), rtol=1e-12)


# -- real_if_close, iscomplex, isreal -------------------------------------------------------

def test_real_if_close_of_a_traced_complex_value_names_the_fix():
    with pytest.raises(xform.ConcretizationError, match="np.real") as info:
        xform.jit(lambda z: np.real_if_close(z))(np.array([1 + 0j]))
    assert "test_complex.py" in str(info.value)


def test_real_if_close_of_a_real_value_is_the_value():
    x = np.array([0.5, 2.0])
    np.testing.assert_array_equal(xform.jit(lambda x: np.real_if_close(x) * 2)(x), 2 * x)


@pytest.mark.parametrize("value", [np.array([1 + 0j, 2 - 1j, 0j]), np.array([1.5, -2.0])])
def test_iscomplex_and_isreal_match_numpy(value):
    for fn in (np.iscomplex, np.isreal):
        got = xform.jit(lambda x: fn(x) & (x == x))(value)
        np.testing.assert_array_equal(got, fn(value))
