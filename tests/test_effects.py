"""Random draws are not frozen by the cache: each call of jit/grad/jvp/... draws anew, draw
for draw what eager numpy draws from the same generator in the same order (staged as
`random_draw` equations, tests/test_random_draws.py; or, where a draw cannot be staged, by
staging again on every call); functions that do not draw stay cached; vmap draws per element,
as a Python loop would; threaded_map, whose elements run concurrently, refuses such
functions. Clocks and files are read anew on every call too."""
import warnings
import weakref

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.runtime.cache import CACHE
from tests.source_lines import assert_points_at

# (method, keyword arguments for `size` draws): on RandomState and Generator alike unless noted
DRAWS = [
    ("standard_normal", lambda n: {"size": n}),
    ("normal", lambda n: {"loc": 0.5, "scale": 2.0, "size": n}),
    ("uniform", lambda n: {"low": -1.0, "high": 3.0, "size": n}),
    ("exponential", lambda n: {"scale": 1.5, "size": n}),
    ("gamma", lambda n: {"shape": 2.0, "size": n}),
    ("beta", lambda n: {"a": 2.0, "b": 3.0, "size": n}),
    ("laplace", lambda n: {"size": n}),
    ("logistic", lambda n: {"size": n}),
    ("poisson", lambda n: {"lam": 3.0, "size": n}),
    ("binomial", lambda n: {"n": 10, "p": 0.3, "size": n}),
    ("choice", lambda n: {"a": 7, "size": n}),
    ("permutation", lambda n: {"x": n}),
    ("dirichlet", lambda n: {"alpha": np.ones(n)}),
    ("multivariate_normal", lambda n: {"mean": np.zeros(n), "cov": np.eye(n)}),
]
GENERATORS = {"RandomState": np.random.RandomState, "Generator": np.random.default_rng}
TRANSFORMS = {
    "jit": lambda f: xform.jit(f),
    "grad": lambda f: xform.grad(f),
    "value_and_grad": lambda f: xform.value_and_grad(f),
    "jvp": lambda f: lambda x: xform.jvp(f, (x,), (1.0,)),
}


def estimator(draw):
    """A reparameterised estimate: differentiable in w, the draw a constant of each call."""
    def f(w):
        eps = np.asarray(draw(), dtype=np.float64)
        return np.sum(np.sin(w * eps) + w * np.mean(eps))
    return f


@pytest.mark.parametrize("kind", sorted(GENERATORS))
@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
@pytest.mark.parametrize("method, kwargs", DRAWS, ids=[d[0] for d in DRAWS])
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 4), w=st.floats(-2.0, 2.0))
def test_each_call_draws_what_eager_numpy_draws(kind, transform, method, kwargs, seed, n, w):
    staged_generator = GENERATORS[kind](seed)
    draw = lambda: getattr(staged_generator, method)(**kwargs(n))  # noqa: E731
    fun = TRANSFORMS[transform](estimator(draw))
    reference = GENERATORS[kind](seed)
    for _ in range(3):
        got = fun(w)
        eps = np.asarray(getattr(reference, method)(**kwargs(n)), dtype=np.float64)
        value = np.sum(np.sin(w * eps) + w * np.mean(eps))
        derivative = np.sum(np.cos(w * eps) * eps + np.mean(eps))
        want = {"jit": value, "grad": derivative, "value_and_grad": (value, derivative),
                "jvp": (value, derivative)}[transform]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # the generators stand at the same place: exactly as many draws, in the same order
    assert position(staged_generator) == position(reference)


def position(generator):
    if isinstance(generator, np.random.RandomState):
        _, key, pos, has_gauss, gauss = generator.get_state()
        return key.tobytes(), pos, has_gauss, gauss
    return repr(generator.bit_generator.state)


LEGACY = [("randn", (3,)), ("rand", (2, 2)), ("normal", (1.0, 2.0, 3)), ("randint", (0, 9, 4)),
          ("random", (3,)), ("uniform", (0.0, 1.0, 2)), ("choice", (5, 3))]


@pytest.mark.parametrize("name, args", LEGACY, ids=[d[0] for d in LEGACY])
def test_numpys_global_generator_is_not_frozen(name, args):
    fun = xform.jit(lambda x: x + np.asarray(getattr(np.random, name)(*args), np.float64))
    np.random.seed(3)
    got = [fun(0.5) for _ in range(3)]
    np.random.seed(3)
    want = [0.5 + np.asarray(getattr(np.random, name)(*args), np.float64) for _ in range(3)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert not np.array_equal(got[0], got[1])


class Model:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.scale = 2.0

    def loss(self, w):
        return np.sum((w - self.scale * self.rng.standard_normal(3)) ** 2)


_HELPER_RNG = np.random.default_rng(11)


def _noise():
    return _HELPER_RNG.standard_normal(2)


def test_generators_reached_through_an_attribute_or_a_helper_function():
    model, reference = Model(4), np.random.default_rng(4)
    grad = xform.grad(model.loss)
    for _ in range(3):
        eps = 2.0 * reference.standard_normal(3)
        np.testing.assert_allclose(grad(np.ones(3)), 2 * (np.ones(3) - eps), rtol=1e-13)

    fun = xform.jit(lambda x: x * _noise())
    state = _HELPER_RNG.bit_generator.state
    got = [fun(1.0) for _ in range(3)]
    _HELPER_RNG.bit_generator.state = state      # replay the same stream eagerly
    np.testing.assert_array_equal(got, [1.0 * _noise() for _ in range(3)])


def test_a_generator_made_inside_draws_anew_or_repeats_as_eagerly():
    fresh = xform.jit(lambda x: x + np.random.default_rng().standard_normal(2))
    assert not np.array_equal(fresh(0.0), fresh(0.0))        # OS entropy each call
    seeded = xform.jit(lambda x: x + np.random.default_rng(7).standard_normal(2))
    want = np.random.default_rng(7).standard_normal(2)
    np.testing.assert_array_equal(seeded(0.0), want)
    np.testing.assert_array_equal(seeded(0.0), want)


def test_a_callee_that_draws_makes_its_caller_draw_on_every_call():
    rng = np.random.RandomState(9)

    @xform.function
    def noisy(x):
        return x + rng.randn()

    outer = xform.jit(lambda x: noisy(x) * 2.0)
    got = [outer(1.0) for _ in range(3)]
    reference = np.random.RandomState(9)
    np.testing.assert_array_equal(got, [(1.0 + reference.randn()) * 2.0 for _ in range(3)])


def test_functions_that_do_not_draw_stay_cached():
    rng = np.random.default_rng(0)
    weights = rng.standard_normal(3)     # drawn once, outside: a constant, as eagerly
    fun = xform.grad(lambda w: np.sum(np.sin(w * weights)))
    fun(np.ones(3))
    before = xform.cache_info()
    fun(np.ones(3))
    after = xform.cache_info()
    assert after["builds"] == before["builds"] and after["hits"] == before["hits"] + 1


def test_a_function_that_draws_from_a_generator_no_proxy_can_replace_builds_on_every_call():
    # Counted on the function itself, not on the global cache counters: other tests' entries
    # may leave the cache meanwhile (their functions die, the LRU evicts).
    rng = (np.random.default_rng(1),)      # a tuple: its generator is watched, not staged
    stagings = []

    def scaled(x):
        stagings.append(x)                 # runs only while xform stages
        return x * rng[0].random()

    fun = xform.jit(scaled)
    got = [fun(1.0) for _ in range(3)]
    twin = np.random.default_rng(1)
    assert got == [twin.random() for _ in range(3)]
    assert len(stagings) == 3              # staged anew by every call: no draw is a constant
    owned = [key for key in CACHE._entries
             if isinstance(key[0], weakref.ref) and key[0]() is scaled]
    assert len(owned) == 1                 # each call's entry replaced the last one


@pytest.mark.parametrize("kind", sorted(GENERATORS))
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 4))
def test_vmap_draws_per_element_as_a_python_loop_does(kind, seed, n):
    def noisy(x, scale):
        eps = staged_generator.standard_normal(2)
        return x * eps[0] + scale * eps[1] + staged_generator.random()

    staged_generator = GENERATORS[kind](seed)
    xs, scale = np.linspace(-1.0, 1.0, n), 0.5
    mapped = xform.vmap(noisy, in_axes=(0, None))
    got = [mapped(xs, scale) for _ in range(2)]
    staged_generator = GENERATORS[kind](seed)      # the same stream, drawn eagerly
    want = [np.stack([noisy(x, scale) for x in xs]) for _ in range(2)]
    np.testing.assert_array_equal(got, want)


def test_gradients_of_a_vmapped_estimator_follow_each_elements_draws():
    rng, reference = np.random.RandomState(3), np.random.RandomState(3)
    loss = lambda w: np.sum(xform.vmap(lambda x: np.sin(w * x * rng.randn()))(np.ones(3)))  # noqa: E731
    for _ in range(2):
        eps = reference.randn(3)
        np.testing.assert_allclose(xform.grad(loss)(0.7), np.sum(np.cos(0.7 * eps) * eps),
                                   rtol=1e-13)


def test_threaded_map_refuses_a_function_that_draws():
    rng = np.random.default_rng(2)
    with pytest.raises(xform.UnsupportedError, match="same draws") as info:
        xform.threaded_map(lambda x: x * rng.random(), np.ones(3))  # line: map draws
    assert_points_at(info.value, __file__, "map draws")
    assert "pass the draws in" in str(info.value)


def test_pythons_random_module_is_not_frozen():
    import random
    fun = xform.jit(lambda x: x + random.random())
    random.seed(4)
    got = [fun(0.0) for _ in range(3)]
    random.seed(4)
    assert got == [random.random() for _ in range(3)]
    gauss = random.gauss
    fun = xform.grad(lambda x: x * gauss(0.0, 1.0))
    random.seed(5)
    got = [fun(1.0) for _ in range(2)]
    random.seed(5)
    assert got == [gauss(0.0, 1.0) for _ in range(2)]


def test_clocks_and_files_are_read_on_every_call(tmp_path):
    import time
    clock = xform.jit(lambda x: x + time.perf_counter())
    assert clock(0.0) < clock(0.0)
    path = tmp_path / "value.txt"

    def from_file(x):
        with open(path) as f:
            return x * float(f.read())
    fun = xform.grad(from_file)
    path.write_text("2.0")
    assert fun(1.0) == 2.0
    path.write_text("3.0")
    assert fun(1.0) == 3.0


def test_scipys_draws_from_numpys_global_generator_are_not_frozen():
    from scipy import stats
    fun = xform.jit(lambda x: x + stats.norm.rvs(size=2))
    np.random.seed(5)
    got = [fun(0.0) for _ in range(2)]
    np.random.seed(5)
    np.testing.assert_array_equal(got, [stats.norm.rvs(size=2) for _ in range(2)])


# The search for generators is remembered per code object when it found nothing; a function
# of the same code must be searched again when anything it reads holds something else.
def _adds(sample):
    def noisy(x):
        return x + sample()
    return noisy


def _draws_like_eager(transformed, seed, calls=3):
    twin = np.random.default_rng(seed)
    return [transformed(0.0) for _ in range(calls)] == [twin.standard_normal()
                                                         for _ in range(calls)]


def test_a_closure_of_remembered_code_over_a_generator_draws_on_every_call():
    assert xform.jit(_adds(lambda: 1.0))(0.0) == 1.0       # remembered: nothing to find
    rng = np.random.default_rng(11)
    assert _draws_like_eager(xform.jit(_adds(rng.standard_normal)), 11)


def _deeper():
    return DEEPER_SOURCE()


DEEPER_SOURCE = lambda: 2.0  # noqa: E731


def _adds_deeper():
    return lambda x: x + _deeper()      # one code object, a new function each call


def test_a_global_read_deeper_than_the_root_rebound_to_a_generator_is_found():
    global DEEPER_SOURCE
    assert xform.jit(_adds_deeper())(0.0) == 2.0           # remembered: nothing to find
    rng = np.random.default_rng(12)
    DEEPER_SOURCE = rng.standard_normal
    try:
        assert _draws_like_eager(xform.jit(_adds_deeper()), 12)
    finally:
        DEEPER_SOURCE = lambda: 2.0  # noqa: E731


_DRAWING_CALLEE = xform.function(lambda y: y - np.random.normal())

# where the draw sits -> the function staged, and whether its graph has an effect
_DRAW_PLACES = {
    "nowhere": (lambda x: xform.cond(x > 0, lambda y: y * 2.0, lambda y: y, x), False),
    "at top level": (lambda x: x + np.random.normal(), True),
    "in a cond branch": (lambda x: xform.cond(x > 0, lambda y: y + np.random.normal(),
                                              lambda y: y, x), True),
    "in a switch branch": (lambda x: xform.switch(np.where(x > 0, 1, 0), [
        lambda y: y, lambda y: y * np.random.rand()], x), True),   # (a traced index)
    "in a while body": (lambda x: xform.while_loop(lambda c: c[0] < 3, lambda c: (
        c[0] + 1, c[1] + np.random.normal()), (0, x))[1], True),
    "in a fori body": (lambda x: xform.fori_loop(0, 3, lambda i, c: c * np.random.rand(), x),
                       True),
    "in a jitted callee, inlined": (lambda x: xform.jit(lambda y: y - np.random.normal())(x)
                                    * 2.0, True),
    "in a called function": (lambda x: _DRAWING_CALLEE(x) * 2.0, True),    # a `call` equation
    "in a loop inside a branch": (lambda x: xform.cond(x > 0, lambda y: xform.fori_loop(
        0, 2, lambda i, c: c + np.random.rand(), y), lambda y: y, x), True),
}


@pytest.mark.parametrize("place", list(_DRAW_PLACES))
def test_a_draw_is_found_as_an_effect_at_any_depth(place):
    from xform.ir.registry import graph_has_effects
    fun, draws = _DRAW_PLACES[place]
    graph = xform.make_graph(fun)(0.5)
    at_top = any(e.primitive.name == "random_draw" for e in graph.equations)
    assert at_top is (place in ("at top level", "in a jitted callee, inlined"))
    assert graph_has_effects(graph) is draws
    assert graph_has_effects(graph) is draws    # asked again (a graph with sub-graphs: memo)


_NOISE_RNG = np.random.default_rng(13)


def _step_noise():
    return _NOISE_RNG.standard_normal()


class _Stepper:
    def step(self, x):
        return x + _step_noise()


_STEPPER = _Stepper()


def _steps(x):
    return _STEPPER.step(x)


def test_a_generator_named_by_a_callee_of_a_method_is_staged_and_compiled():
    """Function levels and data levels are counted apart: the method reached through an
    object, and the function it calls, are followed as a plain callee would be, so the
    generator is found and its draws compiled (before, the walk stopped at the method's
    callee: a second staging, a warning and a staging on every call)."""
    jitted = xform.jit(_steps)
    before = xform.cache_info()["builds"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _draws_like_eager(jitted, 13, calls=4)
    assert not [w for w in caught if issubclass(w.category, xform.UnstagedEffectWarning)]
    assert xform.cache_info()["builds"] - before == 1
    _NOISE_RNG.bit_generator.state = np.random.default_rng(13).bit_generator.state
