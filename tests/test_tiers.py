"""The tiers of a transform's first call (xform.runtime.tiers, xform.config.tier): the first
call interprets, the second compiles once, threads racing share one compile, and the tiers'
values agree with each other and with autograd on a representative set of programs."""
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import xform
from xform.runtime.tiers import FirstTier
from xform.tree import tree_leaves

autograd = pytest.importorskip("autograd")
anp = pytest.importorskip("autograd.numpy")


@pytest.fixture
def tier():
    """Set xform.config.tier for one test, restored after it."""
    previous = xform.config.tier

    def set_tier(value):
        xform.config.update("tier", value)
    yield set_tier
    xform.config.update("tier", previous)


def _compiles():
    return xform.cache_info()["compiles"]


def _relax(xp, occ, n):
    p, o = xp.ones_like(occ), 1 - occ
    for _ in range(n):
        num = xp.roll(p, 1, 0) * xp.roll(o, 1, 0) + xp.roll(p, -1, 1) * xp.roll(o, -1, 1)
        p = p * o + (1 - o) * num / 2.0
    return xp.sum(p ** 2)


def _block(xp, x):
    y = x[0]
    for _ in range(30):
        y = y * x[1]
    return y


def _mlp(xp, x):
    w = xp.reshape(x[:6], (2, 3))
    hidden = w @ xp.reshape(x[6:12], (3, 2))
    return xp.sum((hidden * (hidden > 0)) ** 2)


def _gp(xp, x):
    k = xp.exp(-0.5 * (x[:, None] - x[None, :]) ** 2) + 2.0 * xp.eye(x.shape[0])
    chol = xp.linalg.cholesky(k)
    alpha = xp.linalg.solve(chol, xp.sin(x))
    return -0.5 * xp.sum(alpha * alpha) - xp.sum(xp.log(xp.diagonal(chol, 0, -1, -2)))


# name -> function of (numpy-like namespace, x of shape (12,)): each a kind of program the
# bench rows hold (reductions, Python loops over elements, matmuls, linalg, rolls, where).
PROGRAMS = {
    "sum": lambda xp, x: xp.sum(x),
    "sum_sin": lambda xp, x: xp.sum(xp.sin(x)),
    "loop_sum_sin": lambda xp, x: sum(xp.sin(x[i]) for i in range(x.shape[0])),
    "map_sin_cos_exp": lambda xp, x: xp.sum(xp.stack([xp.sin(xp.cos(xp.exp(x[i])))
                                                      for i in range(x.shape[0])])),
    "broadcast_sin_cos_exp": lambda xp, x: xp.sum(xp.sin(xp.cos(xp.exp(x)))),
    "kron": lambda xp, x: xp.sum(xp.kron(x[:4], xp.reshape(x[4:], (2, 4)))),
    "where": lambda xp, x: xp.sum(xp.where(x > 0, xp.sin(x), x ** 2)),
    "mlp": _mlp,
    "gp": _gp,
    "block": _block,
    "relax": lambda xp, x: _relax(xp, xp.reshape(x[:9], (3, 3)) * 0.1, 5),
    "tiny_scalar": lambda xp, x: xp.sin(x[0]) * x[0] + 1.0,
}

_values = hnp.arrays(np.float64, 12, elements=st.floats(-1.5, 1.5))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@given(x=_values)
def test_the_tiers_agree_with_each_other_and_with_autograd(name, x):
    program = PROGRAMS[name]
    expected = autograd.grad(lambda v: program(anp, v))(x)
    results = {}
    for mode in ("interpret", "compile", "auto"):
        xform.config.update("tier", mode)
        try:
            grad = xform.grad(lambda v: program(np, v))
            results[mode] = [grad(x), grad(x), grad(x)]   # auto: interpreted, then compiled
        finally:
            xform.config.update("tier", "auto")
    compiled = results["compile"][0]
    np.testing.assert_allclose(compiled, expected, rtol=1e-9, atol=1e-12)
    for mode, values in results.items():
        for value in values:
            # the same bits in every tier: calling twice gives the same gradient twice
            np.testing.assert_array_equal(value, compiled, strict=True, err_msg=mode)


def test_the_first_call_interprets_and_the_second_compiles_once():
    grad = xform.grad(lambda x: np.sum(np.sin(x) * x))
    x = np.linspace(0.0, 1.0, 5)
    before = _compiles()
    first = grad(x)
    assert _compiles() == before
    second = grad(x)
    assert _compiles() == before + 1
    for _ in range(3):
        np.testing.assert_array_equal(grad(x), second)
    assert _compiles() == before + 1
    np.testing.assert_allclose(first, np.cos(x) * x + np.sin(x), rtol=1e-15)


def test_after_the_second_call_the_cached_path_holds_the_compiled_code():
    grad = xform.grad(lambda x: x * x)
    grad(1.0)
    entry = grad._entries[float]
    assert type(entry.value[0]) is FirstTier
    grad(2.0)
    assert type(entry.value[0]) is not FirstTier and grad(3.0) == 6.0


def test_the_compiled_code_of_a_single_result_returns_it_with_no_list():
    grad = xform.grad(lambda x: np.sin(x) * x)
    grad(1.0)
    entry = grad._entries[float]
    tier = entry.value[0]
    grad(2.0)
    code, finish = entry.value
    assert finish is None and code(2.0) == np.cos(2.0) * 2.0 + np.sin(2.0)
    # what still holds the first tier gets the list of results, as before the promotion
    assert tier(2.0) == [code(2.0)]


def test_each_signature_has_its_own_first_call():
    grad = xform.grad(lambda x: np.sum(x ** 3))
    before = _compiles()
    grad(np.ones(2)), grad(np.ones(3))
    assert _compiles() == before
    grad(np.ones(3))
    assert _compiles() == before + 1


def test_a_new_transform_of_the_same_function_reuses_the_tier(tier):
    def f(x):
        return np.sum(np.exp(x))
    x = np.arange(3.0)
    before = _compiles()
    xform.grad(f)(x)
    xform.grad(f)(x)   # the same entry, in the cache: its second call compiles
    assert _compiles() == before + 1


def test_tier_compile_compiles_on_the_first_call(tier):
    tier("compile")
    grad = xform.grad(lambda x: np.sum(np.cos(x)))
    before = _compiles()
    grad(np.ones(4))
    assert _compiles() == before + 1


def test_tier_interpret_never_compiles(tier):
    tier("interpret")
    grad = xform.grad(lambda x: np.sum(np.cos(x) * x))
    before = _compiles()
    values = [grad(np.full(4, v)) for v in (0.1, 0.2, 0.3)]
    assert _compiles() == before
    np.testing.assert_allclose(values[2], -np.sin(0.3) * 0.3 + np.cos(0.3), rtol=1e-15)


def test_debug_mode_compiles_on_the_first_call():
    grad = xform.grad(lambda x: np.sum(np.tanh(x)))
    before = _compiles()
    with xform.config.debug_mode():
        grad(np.ones(2))
        assert _compiles() == before + 1


def test_an_unknown_tier_is_refused():
    with pytest.raises(ValueError, match="'auto', 'interpret', 'compile'"):
        xform.config.update("tier", "eager")


@pytest.mark.parametrize("mode", ["interpret", "auto"])
def test_interpreted_outputs_are_the_callers_own(tier, mode):
    tier(mode)
    x = np.arange(4.0)
    x_before = x.copy()
    grad = xform.grad(lambda v: np.sum(v))    # its gradient is a broadcast constant
    first = grad(x)
    assert first.flags.writeable
    first[0] = 99.0
    np.testing.assert_array_equal(grad(x), np.ones(4))
    np.testing.assert_array_equal(x, x_before)


def _race(fn, args, n_threads=6):
    barrier = threading.Barrier(n_threads)
    results, errors = [None] * n_threads, []

    def work(i):
        try:
            barrier.wait()
            results[i] = fn(*args)
        except BaseException as err:  # reported by the test below
            errors.append(err)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return results


def test_threads_racing_on_the_first_calls_get_right_values_and_one_compile():
    def make():
        return xform.grad(lambda x: np.sum(np.sin(x) ** 2 * x))
    x = np.linspace(-1.0, 1.0, 7)
    expected = 2 * np.sin(x) * np.cos(x) * x + np.sin(x) ** 2

    alone = make()
    before = _compiles()
    alone(x), alone(x)
    compiles_alone = _compiles() - before   # what one thread compiles for this program

    raced = make()
    before = _compiles()
    for _ in range(3):   # the first call, the promotion, the compiled code: all raced
        for value in _race(raced, (x,)):
            np.testing.assert_allclose(value, expected, rtol=1e-14)
    assert _compiles() - before == compiles_alone


def test_an_interpreted_first_call_inside_a_staging_reemits_its_graph():
    inner = xform.grad(lambda x: x ** 3)
    inner(2.0)   # its first call: interpreted
    np.testing.assert_allclose(xform.grad(inner)(2.0), 12.0)
    np.testing.assert_allclose(xform.jit(inner)(2.0), 12.0)


def test_redefinition_before_and_after_the_compile_restages():
    namespace = {"np": np}
    exec("def helper(x):\n    return x * x\n", namespace)
    exec("def f(x):\n    return np.sum(helper(x))\n", namespace)
    grad = xform.grad(namespace["f"])
    x = np.arange(3.0)
    np.testing.assert_array_equal(grad(x), 2 * x)
    exec("def helper(x):\n    return x * x * x\n", namespace)
    np.testing.assert_array_equal(grad(x), 3 * x ** 2)   # interpreted: the general check
    np.testing.assert_array_equal(grad(x), 3 * x ** 2)   # compiled: the generated check
    exec("def helper(x):\n    return 2.0 * x\n", namespace)
    np.testing.assert_array_equal(grad(x), np.full(3, 2.0))


@pytest.mark.parametrize("mode", ["interpret", "compile"])
def test_other_transforms_run_in_both_tiers(tier, mode):
    tier(mode)
    x = np.array([0.3, -0.7, 1.1])

    def f(v):
        return np.sin(v) * v

    def loss(v):
        return np.sum(f(v))
    for _ in range(2):
        np.testing.assert_allclose(xform.jacfwd(f)(x), np.diag(np.cos(x) * x + np.sin(x)))
        np.testing.assert_allclose(xform.hessian(loss)(x),
                                   autograd.hessian(lambda v: anp.sum(anp.sin(v) * v))(x))
        np.testing.assert_allclose(xform.vmap(f)(x), f(x))
        value, aux = xform.value_and_grad(lambda v: (loss(v), v[0]), has_aux=True)(x)
        assert value[1] == x[0]
        out, f_vjp = xform.vjp(f, x)
        np.testing.assert_allclose(f_vjp(np.ones(3))[0], np.cos(x) * x + np.sin(x))
        primal, tangent = xform.jvp(f, (x,), (np.ones(3),))
        np.testing.assert_allclose(tangent, np.cos(x) * x + np.sin(x))


@pytest.mark.parametrize("mode", ["interpret", "compile"])
def test_control_flow_in_both_tiers(tier, mode):
    tier(mode)

    def f(x):
        y = xform.fori_loop(0, 4, lambda i, c: c * x + 1.0, 0.5)
        return xform.cond(x > 0, lambda v: v * y, lambda v: v - y, x)
    for x in (0.4, -0.4):
        grad = xform.grad(f)
        eps = 1e-6
        numeric = (f(x + eps) - f(x - eps)) / (2 * eps)
        np.testing.assert_allclose([grad(x), grad(x)], [numeric, numeric], rtol=1e-6)


def test_a_discarded_entry_stays_invalid_when_its_check_is_generated():
    from xform.runtime.cache import Entry
    from xform.runtime.dependencies import Dependencies
    discarded, kept = Entry(None, Dependencies()), Entry(None, Dependencies())
    discarded.discard()
    discarded.specialize(), kept.specialize()
    assert not discarded.valid() and kept.valid()


def test_a_first_call_keeps_an_unused_draw():
    # The first tier's dead-code sweep must keep effects: eager numpy draws the unused values
    # too, so the next draw comes from further along the generator.
    def f(x, rs):
        rs.standard_normal(3)                    # drawn, never read
        return np.sum(x * rs.standard_normal(3))

    ours, twin = np.random.RandomState(4), np.random.RandomState(4)
    grad = xform.grad(lambda x: f(x, ours))
    for _ in range(2):                           # the interpreted call, then the compiled one
        twin.standard_normal(3)                  # the unused draw
        expected = twin.standard_normal(3)
        np.testing.assert_array_equal(grad(np.ones(3)), expected)


# -- a gradient's first call: computed at once, no reverse-mode graph built -------------------

def test_a_first_gradient_call_builds_no_reverse_graph_and_the_second_does(monkeypatch):
    import xform.api.reverse as reverse
    built = []
    real = reverse.vjp_graph
    monkeypatch.setattr(reverse, "vjp_graph", lambda *a, **k: built.append(1) or real(*a, **k))
    grad = xform.grad(lambda x: np.sum(np.tanh(x) * x))
    x = np.linspace(-1.0, 1.0, 4)
    first = grad(x)
    assert built == []
    second = grad(x)
    assert built == [1]
    np.testing.assert_allclose(first, second, rtol=1e-14)


@pytest.mark.parametrize("mode", ["interpret", "auto"])
def test_first_calls_of_every_gradient_form_agree_with_the_compiled_tier(tier, mode):
    def loss(w, k, x):                   # k: an int, differentiated to float0 zeros
        return np.sum(np.sin(w * x) ** 2) * k, w[0]

    w, x = np.array([0.3, -0.8, 1.4]), np.array([1.0, 2.0, -0.5])
    forms = {
        "grad": lambda: xform.grad(lambda w, x: loss(w, 3, x)[0], argnums=(0, 1)),
        "value_and_grad": lambda: xform.value_and_grad(lambda w, x: loss(w, 3, x)[0]),
        "has_aux": lambda: xform.grad(lambda w, x: loss(w, 3, x), has_aux=True),
        "allow_int": lambda: xform.grad(lambda w, k: loss(w, k, x)[0], argnums=(0, 1),
                                        allow_int=True),
    }
    for name, make in forms.items():
        args = (w, 3) if name == "allow_int" else (w, x)
        tier("compile")
        expected = make()(*args)
        tier(mode)
        got = make()(*args)
        for a, b in zip(tree_leaves(got), tree_leaves(expected)):
            a, b = np.asarray(a), np.asarray(b)
            assert (a.dtype, a.shape) == (b.dtype, b.shape), name
            np.testing.assert_array_equal(a, b, strict=True, err_msg=name)


def test_graphs_whose_reverse_mode_must_be_pruned_first_are_not_computed_at_once():
    from xform.transforms.vjp import computable_at_once
    x = np.ones(3)
    assert computable_at_once(xform.make_graph(lambda v: np.sum(np.sin(v)))(x))
    rs = np.random.RandomState(0)
    assert not computable_at_once(xform.make_graph(lambda v: np.sum(v * rs.standard_normal(3)))(x))
    mapped = xform.make_graph(lambda v: np.sum(xform.threaded_map(np.sin, v)))(x)
    assert not computable_at_once(mapped)
    opaque = xform.Primitive("opaque_for_tiers")
    opaque.def_abstract_eval(lambda a: a)
    assert not computable_at_once(xform.make_graph(lambda v: opaque.bind(v))(x))


@pytest.mark.parametrize("mode", ["interpret", "auto"])
def test_a_drawing_gradient_s_first_call_still_raises_only_when_the_draw_is_differentiated(
        tier, mode):
    tier(mode)
    rs = np.random.RandomState(1)
    # the draw's parameter is a constant: its (poisoned) cotangent is never read
    grad = xform.grad(lambda v: np.sum(v * rs.normal(np.ones(3), 2.0)))
    assert grad(np.ones(3)).shape == (3,)
    with pytest.raises(xform.UnsupportedError, match="not differentiable in their parameters"):
        xform.grad(lambda v: np.sum(rs.normal(v, 2.0)))(np.ones(3))


def test_a_first_gradient_call_differentiates_nothing_that_only_a_constant_argument_reaches():
    calls = []
    sine = xform.Primitive("sine_counting_its_derivatives")
    sine.def_impl(np.sin)
    sine.def_abstract_eval(lambda a: a)
    sine.def_jvp(lambda primals, tangents: (sine.bind(primals[0]),
                                            calls.append(1) or np.cos(primals[0]) * tangents[0]))
    w, x = np.array([0.5, -1.0]), np.array([0.3, 0.7])
    grad = xform.grad(lambda w, x: np.sum(w * sine.bind(x) + sine.bind(w)))   # grad in w only
    np.testing.assert_allclose(grad(w, x), np.sin(x) + np.cos(w), rtol=1e-15)
    assert len(calls) == 1          # sine(w)'s derivative; sine(x) reaches no gradient


def _first_and_second_calls(transform, fun, *args):
    transformed = transform(fun)
    return tree_leaves(transformed(*args)), tree_leaves(transformed(*args))


def test_a_fused_region_with_a_constant_input_has_the_same_gradient_in_both_tiers():
    # Three traced inputs and one constant: the graph's NDual vjp takes three directions; on
    # concrete values the constant must not become a fourth (past NDUAL_MAX_WIDTH, the
    # per-equation rules would round differently).
    weights = np.tanh(np.linspace(0.1, 1.0, 2000))
    x = np.linspace(0.0, 1.0, 2000)

    def loss(x, y, z):
        return np.sum(np.sin(x) * np.cos(y) * np.exp(z) * weights)
    first, second = _first_and_second_calls(lambda f: xform.grad(f, argnums=(0, 1, 2)),
                                            loss, x, x + 0.5, x * 0.3)
    assert "elementwise" in str(xform.make_graph(xform.grad(loss))(x, x + 0.5, x * 0.3))
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b, strict=True)


@pytest.mark.parametrize("transposed", [False, True])
def test_solve_with_a_cholesky_factor_is_differentiated_alike_in_both_tiers(monkeypatch,
                                                                           transposed):
    # The jvp of solve reads its matrix's triangle from the solve's params (the simplify pass
    # states it): on concrete values, at once, as on tracers (triangular solves, not LU).
    import xform.rules.linalg as linalg
    triangles = []
    substitution = linalg.triangular_solve
    monkeypatch.setattr(linalg, "triangular_solve", lambda a, b, lower, **rest: triangles.append(
        "lower" if lower else "upper") or substitution(a, b, lower=lower, **rest))

    def lml(x, noise):
        k = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2) + (noise * noise + 1e-3) * np.eye(8)
        chol = np.linalg.cholesky(k)
        alpha = np.linalg.solve(chol.T if transposed else chol, np.sin(x))
        return -0.5 * np.sum(alpha * alpha) - np.sum(np.log(np.diagonal(chol)))
    x = np.linspace(-1.0, 1.0, 8)
    first, second = _first_and_second_calls(lambda f: xform.value_and_grad(f, (0, 1)),
                                            lml, x, 0.3)
    assert triangles == ["upper" if transposed else "lower"] * 2    # first call, then graph
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b, strict=True)
