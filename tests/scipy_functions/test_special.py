"""scipy.special on tracers, imported as users import it: every primitive through the rule
battery, staged values against SciPy, derivatives against autograd.scipy and finite
differences, the Python-level functions (logsumexp, softmax, ...) through their stand-ins,
and SciPy left untouched outside staging."""
import subprocess
import sys
from collections import namedtuple

import autograd
import autograd.numpy as anp
import autograd.scipy.special as asp
import numpy as np
import pytest
import scipy.special as sp
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.special import logsumexp

import xform
from tests.source_lines import assert_points_at
from xform.rules import scipy_special
from xform.testing import check_grads, check_primitive
from xform.testing import strategies as xst

# -- the case table: one row per primitive, each argument's domain --------------------------

Case = namedtuple("Case", "name domains")
F, I = "float", "int"   # argument kinds: differentiable floats, or integers (orders, shapes)

CASES = [
    Case("gammaln", [(F, 0.2, 4)]), Case("gamma", [(F, 0.2, 4)]), Case("rgamma", [(F, 0.2, 4)]),
    Case("digamma", [(F, 0.3, 4)]), Case("polygamma", [(I, 0, 3), (F, 0.5, 4)]),
    Case("erf", [(F, -2, 2)]), Case("erfc", [(F, -2, 2)]), Case("erfinv", [(F, -0.9, 0.9)]),
    Case("erfcinv", [(F, 0.1, 1.9)]), Case("expit", [(F, -4, 4)]),
    Case("logit", [(F, 0.05, 0.95)]), Case("log_expit", [(F, -4, 4)]),
    Case("ndtr", [(F, -3, 3)]), Case("log_ndtr", [(F, -5, 3)]), Case("ndtri", [(F, 0.05, 0.95)]),
    Case("entr", [(F, 0.1, 3)]), Case("xlogy", [(F, -2, 2), (F, 0.1, 3)]),
    Case("xlog1py", [(F, -2, 2), (F, -0.9, 2)]), Case("rel_entr", [(F, 0.1, 3), (F, 0.1, 3)]),
    Case("kl_div", [(F, 0.1, 3), (F, 0.1, 3)]), Case("betaln", [(F, 0.3, 3), (F, 0.3, 3)]),
    Case("beta", [(F, 0.3, 3), (F, 0.3, 3)]), Case("zeta", [(I, 2, 4), (F, 0.3, 3)]),
    Case("riemann_zeta", [(I, 2, 5)]),
    Case("iv", [(I, 0, 3), (F, 0.1, 3)]), Case("ive", [(I, 0, 3), (F, 0.2, 3)]),
    Case("jv", [(I, 0, 3), (F, 0.1, 5)]), Case("yv", [(I, 0, 3), (F, 0.3, 5)]),
    Case("i0", [(F, -3, 3)]), Case("i1", [(F, -3, 3)]), Case("i0e", [(F, 0.2, 3)]),
    Case("i1e", [(F, 0.2, 3)]), Case("j0", [(F, -5, 5)]), Case("j1", [(F, -5, 5)]),
    Case("y0", [(F, 0.3, 5)]), Case("y1", [(F, 0.3, 5)]),
    Case("gammainc", [(I, 1, 4), (F, 0.1, 4)]), Case("gammaincc", [(I, 1, 4), (F, 0.1, 4)]),
    Case("stdtr", [(I, 1, 5), (F, -3, 3)]),
    Case("betainc", [(I, 1, 4), (I, 1, 4), (F, 0.05, 0.95)]),
    Case("betaincc", [(I, 1, 4), (I, 1, 4), (F, 0.05, 0.95)]),
]
CASE_BY_NAME = {case.name: case for case in CASES}


def primitives():
    from xform.rules.scipy_special import SCIPY_SPECIAL_PRIMITIVES
    return SCIPY_SPECIAL_PRIMITIVES


@st.composite
def arguments(draw, domains):
    """One array per domain, of mutually broadcastable shapes."""
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=len(domains), max_dims=2,
                                                    max_side=3)).input_shapes
    return [draw(xst.arrays(shape, np.float64 if kind == F else np.int64, low, high))
            for shape, (kind, low, high) in zip(shapes, domains)]


def test_every_primitive_has_a_case():
    assert set(primitives()) == set(CASE_BY_NAME)


@pytest.mark.parametrize("name", sorted(CASE_BY_NAME))
@given(data=st.data())
def test_rule_battery(name, data):
    args = data.draw(arguments(CASE_BY_NAME[name].domains))
    check_primitive(primitives()[name], *args, order=2, rtol=1e-4, atol=1e-6)


# -- staged values against SciPy, through the ufunc itself ----------------------------------

def scipy_function(name):
    return sp.zeta if name == "riemann_zeta" else getattr(sp, name)


@pytest.mark.parametrize("name", sorted(CASE_BY_NAME))
@given(data=st.data())
def test_staged_values_equal_scipy(name, data):
    args = data.draw(arguments(CASE_BY_NAME[name].domains))
    function = scipy_function(name)
    expected = function(*args)
    got = xform.jit(lambda *xs: function(*xs))(*args)
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=0)
    assert np.asarray(got).dtype == np.asarray(expected).dtype


def test_psi_is_digamma_and_float32_stays_float32():
    x = np.array([0.5, 1.5], np.float32)
    got = xform.jit(lambda x: sp.psi(x) + sp.gammaln(x))(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, sp.digamma(x) + sp.gammaln(x), rtol=1e-6)


# -- derivatives against autograd.scipy ------------------------------------------------------

AUTOGRAD = {   # name -> autograd's function, where it has a derivative
    "gammaln": asp.gammaln, "gamma": asp.gamma, "rgamma": asp.rgamma, "digamma": asp.digamma,
    "polygamma": asp.polygamma, "erf": asp.erf, "erfc": asp.erfc, "erfinv": asp.erfinv,
    "erfcinv": asp.erfcinv, "expit": asp.expit, "logit": asp.logit, "betaln": asp.betaln,
    "beta": asp.beta, "i0": asp.i0, "i1": asp.i1, "iv": asp.iv, "ive": asp.ive, "j0": asp.j0,
    "j1": asp.j1, "y0": asp.y0, "y1": asp.y1, "gammainc": asp.gammainc,
    "gammaincc": asp.gammaincc, "betainc": asp.betainc,
}


@pytest.mark.parametrize("name", sorted(AUTOGRAD))
@given(data=st.data())
def test_gradient_agrees_with_autograd(name, data):
    domains = CASE_BY_NAME[name].domains
    args = [a.copy() for a in np.broadcast_arrays(*data.draw(arguments(domains)))]
    floats = tuple(i for i, (kind, _, _) in enumerate(domains) if kind == F)
    ours = xform.grad(lambda *xs: np.sum(getattr(sp, name)(*xs)), argnums=floats)(*args)
    theirs = autograd.grad(lambda *xs: anp.sum(AUTOGRAD[name](*xs)), floats)(*args)
    for o, t in zip(ours, theirs):
        # autograd's formulas are 0/0 where a limit exists (i1'(0) = 1/2): compared elsewhere
        known = np.isfinite(t)
        np.testing.assert_allclose(np.where(known, o, 0.0), np.where(known, t, 0.0),
                                   rtol=1e-7, atol=1e-10)


def test_i1_derivative_at_zero_is_its_limit():
    assert xform.grad(sp.i1)(0.0) == 0.5


def test_multigammaln_against_autograd_and_scipy():
    a = np.array([2.5, 3.0, 7.25])
    f = xform.jit(lambda a: sp.multigammaln(a, 3))
    np.testing.assert_allclose(f(a), sp.multigammaln(a, 3), rtol=1e-13)
    np.testing.assert_allclose(
        xform.grad(lambda a: np.sum(sp.multigammaln(a, 3)))(a),
        autograd.grad(lambda a: anp.sum(asp.multigammaln(a, 3)))(a), rtol=1e-10)
    check_grads(lambda a: sp.multigammaln(a, 4), (a,), order=2)


def test_no_derivative_in_an_order_is_nan_never_an_error_or_zero():
    x, a = np.array([0.5, 1.5]), np.array([1.5, 2.5])
    assert np.all(np.isnan(xform.grad(lambda a: np.sum(sp.stdtr(a, x)))(a)))
    jacobian = xform.jacfwd(lambda a: sp.iv(a, x))(a)      # NaN only where a moves
    assert np.all(np.isnan(np.diag(jacobian))) and jacobian[0, 1] == jacobian[1, 0] == 0
    # differentiating only x, with a traced a beside it, is unaffected
    hess = xform.hessian(lambda x, a: np.sum(sp.gammainc(a, x)))(x, a)
    expected = np.diag(sp.gammainc(a, x) * 0 + np.exp(-x) * x ** (a - 2) / sp.gamma(a)
                       * (a - 1 - x))
    np.testing.assert_allclose(hess, expected, rtol=1e-10)


# -- the Python-level functions: logsumexp, softmax, log_softmax, polygamma, zeta -----------

@st.composite
def logsumexp_args(draw):
    shape = draw(xst.shapes(min_dims=1, max_dims=3, max_side=3))
    a = draw(xst.arrays(shape, np.float64, -3, 3))
    axis = draw(st.sampled_from([None, 0, -1, tuple(range(len(shape)))]))
    b = draw(st.none() | xst.arrays(shape, np.float64, 0.1, 2))
    return a, axis, b, draw(st.booleans())


@given(logsumexp_args())
def test_logsumexp_values_and_sign(args):
    a, axis, b, keepdims = args
    for return_sign in (False, True):
        expected = logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)
        got = xform.jit(lambda a, b: logsumexp(a, axis=axis, b=b, keepdims=keepdims,
                                               return_sign=return_sign))(a, b)
        got, expected = (got, expected) if return_sign else ((got,), (expected,))
        for g, e in zip(got, expected):
            # SciPy's own function, staged as one primitive: its bits
            np.testing.assert_array_equal(g, e, strict=True)


def test_logsumexp_negative_weights_give_scipy_signs_and_nan():
    a, b = np.array([0.0, 1.0, 2.0]), np.array([1.0, -3.0, 0.5])
    got = xform.jit(lambda a: logsumexp(a, b=b, return_sign=True))(a)
    expected = logsumexp(a, b=b, return_sign=True)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    with np.errstate(invalid="ignore"):
        b_neg = -np.abs(b)
        assert np.isnan(xform.jit(lambda a: logsumexp(a, b=b_neg))(a))


@given(logsumexp_args())
def test_logsumexp_derivatives(args):
    a, axis, b, keepdims = args
    check_grads(lambda a: logsumexp(a, axis=axis, keepdims=keepdims), (a,), order=2)
    if b is not None:
        check_grads(lambda a, b: logsumexp(a, axis=axis, b=b, keepdims=keepdims), (a, b),
                    order=2)
        # autograd differentiates logsumexp in `a` only
        ours = xform.grad(lambda a: np.sum(logsumexp(a, axis=axis, b=b)))(a)
        theirs = autograd.grad(lambda a: anp.sum(asp.logsumexp(a, axis=axis, b=b)))(a)
        np.testing.assert_allclose(ours, theirs, rtol=1e-10)


@given(logsumexp_args())
def test_softmax_and_log_softmax(args):
    a, axis, _, _ = args
    for function in (sp.softmax, sp.log_softmax):
        jitted = xform.jit(lambda a: function(a, axis=axis))
        for _ in range(2):                      # SciPy's bits, first call and cached
            np.testing.assert_array_equal(jitted(a), function(a, axis=axis), strict=True)
        check_grads(lambda a: function(a, axis=axis), (a,), order=2)


@pytest.mark.parametrize("prim, params", [
    (scipy_special.scipy_logsumexp_p, {"axis": None, "keepdims": False, "return_sign": False}),
    (scipy_special.scipy_logsumexp_p, {"axis": (0,), "keepdims": True, "return_sign": True}),
    (scipy_special.scipy_softmax_p, {"axis": (0,)}),
    (scipy_special.scipy_log_softmax_p, {"axis": None})])
@given(data=st.data())
def test_scipy_reduction_primitives_battery(prim, params, data):
    shape = data.draw(xst.shapes(min_dims=1, max_dims=2, max_side=3))
    a = data.draw(xst.arrays(shape, np.float64, -3, 3))
    check_primitive(prim, a, params=params, order=2)
    if prim is scipy_special.scipy_logsumexp_p:
        # with weights: negative ones (a negative sum, log|sum|) under return_sign; one
        # sign per run keeps the sums away from 0, where the derivative blows up
        low, high = (-2.0, -0.1) if params["return_sign"] else (0.1, 2.0)
        check_primitive(prim, a, data.draw(xst.arrays(shape, np.float64, low, high)),
                        params=params, order=2)


def test_vmap_of_python_level_functions_equals_a_loop():
    a = np.random.default_rng(0).standard_normal((4, 3, 2))
    for function in (lambda x: logsumexp(x, axis=0, b=x * x), lambda x: sp.softmax(x, axis=1),
                     lambda x: sp.log_softmax(x), lambda x: sp.polygamma(2, x * x + 1),
                     lambda x: sp.zeta(3.0, x * x + 0.5), lambda x: sp.multigammaln(x * x + 3, 2)):
        np.testing.assert_allclose(xform.vmap(function)(a), np.stack([function(x) for x in a]),
                                   rtol=1e-12)


def test_polygamma_and_zeta_stand_ins():
    x = np.array([0.7, 1.3, 4.0])
    n = np.array([0, 1, 3])
    np.testing.assert_allclose(xform.jit(sp.polygamma)(n, x), sp.polygamma(n, x), rtol=1e-13)
    np.testing.assert_allclose(xform.jit(lambda q: sp.zeta(2.5, q))(x), sp.zeta(2.5, x),
                               rtol=1e-13)
    np.testing.assert_allclose(xform.jit(lambda s: sp.zeta(s))(x + 1.5), sp.zeta(x + 1.5),
                               rtol=1e-13)
    check_grads(lambda x: sp.polygamma(1, x) * sp.zeta(3.0, x), (x,), order=2)
    # d/dq zeta(s, q) = -s zeta(s + 1, q)
    np.testing.assert_allclose(xform.grad(lambda q: sp.zeta(2.5, q))(1.3),
                               -2.5 * sp.zeta(3.5, 1.3), rtol=1e-12)


# -- import styles, helpers, SciPy untouched outside staging --------------------------------

def a_helper(x):
    return sp.gammaln(x) + logsumexp(x) + sp.expit(x)


def test_import_styles_and_helpers_stage():
    import scipy.special
    from scipy.special import erf as erf_imported_late

    def f(x):
        return np.sum(a_helper(x) + scipy.special.log_softmax(x) + erf_imported_late(x))
    x = np.array([0.3, 1.1, 2.0])
    np.testing.assert_allclose(xform.jit(f)(x), f(x), rtol=1e-13)
    check_grads(f, (x,), order=2)


def test_outside_staging_scipy_is_untouched():
    codes = {f: f.__code__ for f in (sp.logsumexp, sp.softmax, sp.log_softmax, sp.polygamma,
                                     sp.zeta, sp.multigammaln)}
    x = np.array([0.5, 1.5])
    before = [sp.logsumexp(x), sp.softmax(x), sp.polygamma(1, x), sp.zeta(2.0, x)]
    xform.grad(lambda x: np.sum(a_helper(x) + sp.polygamma(1, x) + sp.zeta(2.0, x)))(x)
    after = [sp.logsumexp(x), sp.softmax(x), sp.polygamma(1, x), sp.zeta(2.0, x)]
    assert all(f.__code__ is code for f, code in codes.items())
    for b, a in zip(before, after):
        assert type(b) is type(a)
        np.testing.assert_array_equal(a, b)
    assert type(sp.logsumexp(x)) is np.float64


def test_an_unsupported_scipy_function_names_itself_at_the_user_line():
    def f(x):
        return sp.hyp2f1(1.0, 2.0, 3.0, x)  # line: hyp2f1
    with pytest.raises(xform.UnsupportedError, match=r"scipy\.special\.hyp2f1 is not") as info:
        xform.jit(f)(0.5)
    assert_points_at(info.value, __file__, "hyp2f1")


def test_out_is_refused_naming_scipy():
    out = np.zeros(2)
    with pytest.raises(xform.UnsupportedError, match=r"scipy\.special\.erf\(\.\.\., out="):
        xform.jit(lambda x: sp.erf(x, out=out))(np.ones(2))


def run_fresh(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout


def test_import_xform_imports_no_scipy_and_a_module_imported_while_staging_works():
    out = run_fresh(
        "import sys, numpy as np, xform\n"
        "print(any(m.startswith('scipy') for m in sys.modules))\n"
        "def f(x):\n"
        "    import scipy.special\n"
        "    return scipy.special.gammaln(x) * 2\n"
        "print(float(xform.grad(f)(3.0)))\n")
    imported, grad = out.split()
    import scipy.special
    assert imported == "False"
    assert float(grad) == pytest.approx(2 * scipy.special.digamma(3.0), rel=1e-14)


def test_a_chosen_python_function_without_a_stand_in_names_itself_at_the_user_line():
    def f(n):
        return sp.comb(n, 2)  # line: comb
    with pytest.raises(xform.ConcretizationError,
                       match=r"^scipy\.special\.comb \(which has no xform version\)") as info:
        xform.jit(f)(5.0)
    assert_points_at(info.value, __file__, "comb")
    assert sp.comb(5.0, 2) == 10.0


def test_a_logsumexp_gradients_first_call_runs_scipys_logsumexp_once(monkeypatch):
    # its value while staging; the reverse pass reads it (no linearization computing it
    # again), and the dtype probe is made once per kind of operands
    a = np.linspace(-1.0, 2.0, 12).reshape(4, 3)
    xform.grad(lambda a: np.sum(logsumexp(a, axis=1)))(a)    # this kind's probe
    calls = []
    real = scipy_special.sc.logsumexp
    monkeypatch.setattr(scipy_special.sc, "logsumexp",
                        lambda *args, **kwargs: (calls.append(1), real(*args, **kwargs))[1])
    got = xform.grad(lambda a: np.sum(logsumexp(a, axis=1) * 2.0))(a)
    assert len(calls) == 1
    np.testing.assert_allclose(got, 2.0 * np.exp(a - real(a, axis=1, keepdims=True)),
                               rtol=1e-14)
