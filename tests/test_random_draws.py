"""numpy's random draws staged as `random_draw` equations: every call of the compiled function
draws from the generator itself, draw for draw what eager numpy draws (checked against a
second generator with the same seed), without staging again; no pass drops, merges or
reorders a draw; derivatives never draw twice; generators are found however deep they sit,
and what cannot be staged falls back to staging on every call (never a frozen draw)."""
import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xform
from tests.source_lines import assert_points_at

# method -> (arguments for RandomState, for Generator (None: same), for the legacy module
# function (None: same as RandomState; False: no such function)), each a function of n.
METHODS = {
    "standard_normal": (lambda n: ((n,), {}), None, None),
    "normal": (lambda n: ((0.5, 2.0, n), {}), None, None),
    "randn": (lambda n: ((n, 2), {}), False, None),
    "rand": (lambda n: ((n,), {}), False, None),
    "random": (lambda n: ((), {"size": n}), None, None),
    "uniform": (lambda n: ((-1.0, 3.0), {"size": n}), None, None),
    "randint": (lambda n: ((0, 9), {"size": n}), False, None),
    "integers": (False, lambda n: ((0, 9), {"size": n}), False),
    "choice": (lambda n: ((7,), {"size": n}), None, None),
    "choice_p": (lambda n: ((np.arange(3.0),), {"size": n, "p": [0.2, 0.5, 0.3]}),
                 None, None),
    "permutation": (lambda n: ((n + 1,), {}), None, None),
    "multivariate_normal": (lambda n: ((np.zeros(n), np.eye(n) * 2.0), {}), None, None),
    "gamma": (lambda n: ((2.0,), {"size": n}), None, None),
    "beta": (lambda n: ((2.0, 3.0), {"size": n}), None, None),
    "dirichlet": (lambda n: ((np.ones(n + 1),), {}), None, None),
    "binomial": (lambda n: ((10, 0.3), {"size": n}), None, None),
    "poisson": (lambda n: ((3.0,), {"size": n}), None, None),
    "exponential": (lambda n: ((1.5,), {"size": n}), None, None),
    "laplace": (lambda n: ((), {"size": n}), None, None),
    "logistic": (lambda n: ((0.0, 2.0), {"size": n}), None, None),
    "standard_t": (lambda n: ((3.0,), {"size": n}), None, None),
    "triangular": (lambda n: ((0.0, 1.0, 2.0), {"size": n}), None, None),
}
KINDS = ("RandomState", "Generator", "legacy")


def _arguments(method, kind, n):
    rs_args, gen_args, legacy_args = METHODS[method]
    chosen = {"RandomState": rs_args, "Generator": rs_args if gen_args is None else gen_args,
              "legacy": rs_args if legacy_args is None else legacy_args}[kind]
    if chosen is False:
        return None
    return chosen(n)


def _generator(kind, seed):
    if kind == "Generator":
        return np.random.default_rng(seed)
    if kind == "RandomState":
        return np.random.RandomState(seed)
    np.random.seed(seed)
    return np.random     # the legacy module functions draw from numpy's global generator


def _cases():
    return [(m, k) for m in METHODS for k in KINDS if _arguments(m, k, 1) is not None]


def _estimator(draw):
    def f(w):
        eps = np.asarray(draw(), dtype=np.float64)
        return np.sum(np.sin(w * eps)) + w * np.mean(eps)
    return f


def _value(w, eps):
    return np.sum(np.sin(w * eps)) + w * np.mean(eps)


def _derivative(w, eps):
    return np.sum(np.cos(w * eps) * eps) + np.mean(eps)


def _second(w, eps):
    return np.sum(-np.sin(w * eps) * eps * eps)


TRANSFORMS = {
    "jit": (lambda f: xform.jit(f), _value),
    "grad": (lambda f: xform.grad(f), _derivative),
    "value_and_grad": (lambda f: xform.value_and_grad(f),
                       lambda w, eps: (_value(w, eps), _derivative(w, eps))),
    "jvp": (lambda f: lambda w: xform.jvp(f, (w,), (1.0,)),
            lambda w, eps: (_value(w, eps), _derivative(w, eps))),
    "hessian": (lambda f: xform.hessian(f), _second),
    "jvp_of_grad": (lambda f: _jvp_of(xform.grad(f)), _second),
}


def _jvp_of(g):
    return lambda w: xform.jvp(g, (w,), (1.0,))[1]


def _method_name(method):
    return "choice" if method == "choice_p" else method


def _stage_counts():
    info = xform.cache_info()
    return info["builds"], info["invalidations"]


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
@pytest.mark.parametrize("method, kind", _cases(), ids=[f"{m}-{k}" for m, k in _cases()])
@settings(max_examples=2)     # 366 cases, each staging a transform per example
@given(seed=st.integers(0, 2 ** 31 - 1), n=st.integers(1, 3), w=st.floats(-2.0, 2.0))
def test_each_call_draws_what_eager_numpy_draws_without_staging_again(
        transform, method, kind, seed, n, w):
    args, kwargs = _arguments(method, kind, n)
    name = _method_name(method)
    generator = _generator(kind, seed) if kind != "legacy" else None
    if kind == "legacy":
        draw = lambda: getattr(np.random, name)(*args, **kwargs)  # noqa: E731
    else:
        draw = lambda: getattr(generator, name)(*args, **kwargs)  # noqa: E731
    make, want = TRANSFORMS[transform]
    fun = make(_estimator(draw))
    if kind == "legacy":
        np.random.seed(seed)
    got = []
    for i in range(4):
        got.append(fun(w))
        if i == 1:  # (a function the walk cannot see through, getattr's, is checked then)
            stages = _stage_counts()
    assert _stage_counts() == stages        # the later calls ran the cached graph
    staged_state = _position(generator if kind != "legacy" else np.random.mtrand._rand)
    reference = _generator(kind, seed)
    if kind == "legacy":
        reference = np.random.mtrand._rand
    for value in got:
        eps = np.asarray(getattr(reference, name)(*args, **kwargs), dtype=np.float64)
        np.testing.assert_allclose(value, want(w, eps), rtol=1e-12, atol=1e-12)
    assert staged_state == _position(reference)   # as many draws: none twice, none dropped


def _position(generator):
    if isinstance(generator, np.random.RandomState):
        _, key, pos, has_gauss, gauss = generator.get_state()
        return key.tobytes(), pos, has_gauss, gauss
    return repr(generator.bit_generator.state)


@pytest.mark.parametrize("method, kind", _cases(), ids=[f"{m}-{k}" for m, k in _cases()])
def test_jit_returns_the_draws_bit_for_bit(method, kind):
    args, kwargs = _arguments(method, kind, 3)
    name = _method_name(method)
    owner = _generator(kind, 5) if kind != "legacy" else np.random
    fun = xform.jit(lambda x: (x, getattr(owner, name)(*args, **kwargs)))
    if kind == "legacy":
        np.random.seed(5)
    got = [fun(1.0)[1] for _ in range(3)]
    reference = _generator(kind, 5)
    want = [getattr(reference, name)(*args, **kwargs) for _ in range(3)]
    for g, v in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(v).dtype
        np.testing.assert_array_equal(g, v)


@pytest.mark.parametrize("kind", KINDS)
@given(seed=st.integers(0, 2 ** 31 - 1), n=st.integers(1, 4))
def test_vmap_draws_each_elements_draws_in_element_order_staged_once(kind, seed, n):
    def noisy(x):
        eps = generator.standard_normal(2)
        return x * eps[0] + eps[1] * generator.uniform()

    generator = _generator(kind, seed)
    mapped = xform.vmap(noisy)
    xs = np.linspace(-1.0, 1.0, n)
    got = [mapped(xs)]
    stages = _stage_counts()
    got.append(mapped(xs))
    assert _stage_counts() == stages
    generator = _generator(kind, seed)         # the same stream, by a Python loop
    want = [np.stack([noisy(x) for x in xs]) for _ in range(2)]
    np.testing.assert_array_equal(got, want)


def test_the_gradient_of_a_vmapped_estimator_follows_each_elements_draws():
    rng, reference = np.random.RandomState(3), np.random.RandomState(3)

    def loss(w):
        return np.sum(xform.vmap(lambda x: np.sin(w * x * rng.randn()))(np.ones(3)))
    grad = xform.grad(loss)
    grad(0.7)
    eps = reference.randn(3)
    stages = _stage_counts()
    for _ in range(2):
        eps = reference.randn(3)
        np.testing.assert_allclose(grad(0.7), np.sum(np.cos(0.7 * eps) * eps), rtol=1e-13)
    assert _stage_counts() == stages


# -- passes ------------------------------------------------------------------------------------

def test_two_identical_draws_are_two_values_and_an_unused_draw_still_draws():
    rng, reference = np.random.RandomState(0), np.random.RandomState(0)

    def f(x):
        a = rng.randn(3)
        rng.randn(2)          # unused, but it moves the generator
        b = rng.randn(3)
        return x * a + b
    fun = xform.jit(f)
    for _ in range(2):
        a, _, b = reference.randn(3), reference.randn(2), reference.randn(3)
        np.testing.assert_array_equal(fun(2.0), 2.0 * a + b)
    assert _position(rng) == _position(reference)
    for run_pass in (xform.passes.optimize, xform.passes.dce, xform.passes.cse,
                     xform.passes.fold, xform.passes.fuse):
        graph = run_pass(xform.make_graph(f)(2.0))
        assert [e.primitive.name for e in graph.equations].count("random_draw") == 3


def test_a_draw_inside_a_called_function_survives_inlining_and_dead_code_elimination():
    rng, reference = np.random.default_rng(8), np.random.default_rng(8)

    @xform.function
    def noise():
        return rng.standard_normal(2)

    def f(x):
        noise()               # its result unused: it still draws
        return x + noise()
    fun = xform.jit(f)
    for _ in range(2):
        reference.standard_normal(2)
        np.testing.assert_array_equal(fun(1.0), 1.0 + reference.standard_normal(2))


def test_the_printed_graph_shows_the_draw_and_its_generator():
    rng = np.random.RandomState(1)
    text = str(xform.make_graph(lambda mu: mu + rng.normal(0.0, 1.0, 3))(0.5))
    assert "random_draw[method='normal', generator=RandomState#" in text
    assert _position(rng) == _position(np.random.RandomState(1))   # staging drew nothing


def test_draws_inside_loop_bodies_draw_on_each_iteration():
    rng, reference = np.random.RandomState(4), np.random.RandomState(4)

    def f(x):
        return xform.fori_loop(0, 3, lambda i, c: c + rng.randn(), x)
    fun = xform.jit(f)
    for _ in range(2):
        want = 1.0 + sum(reference.randn() for _ in range(3))
        np.testing.assert_allclose(fun(1.0), want, rtol=1e-15)
    assert _position(rng) == _position(reference)


def test_forward_mode_through_a_loop_that_draws_draws_once_per_iteration():
    rng, reference = np.random.RandomState(4), np.random.RandomState(4)
    f = lambda w: xform.fori_loop(0, 3, lambda i, c: c + np.sin(w * rng.randn()), 0.0)  # noqa
    for _ in range(2):
        eps = reference.randn(3)
        value, tangent = xform.jvp(f, (0.7,), (1.0,))
        np.testing.assert_allclose([value, tangent], [np.sum(np.sin(0.7 * eps)),
                                                      np.sum(np.cos(0.7 * eps) * eps)],
                                   rtol=1e-14)
    assert _position(rng) == _position(reference)


@pytest.mark.parametrize("construct", ["fori_loop", "cond"])
def test_reverse_mode_through_a_loop_or_branch_that_draws_is_refused_at_the_users_line(
        construct):
    rng = np.random.RandomState(4)
    if construct == "fori_loop":
        f = lambda w: xform.fori_loop(0, 3, lambda i, c: c + w * rng.randn(), 0.0)  # line: rl1
    else:
        f = lambda w: xform.cond(w > 0, lambda: w * rng.randn(), lambda: w)  # line: rl2
    with pytest.raises(xform.UnsupportedError, match="draw, again") as info:
        xform.grad(f)(0.7)
    assert_points_at(info.value, __file__, "rl1" if construct == "fori_loop" else "rl2")


def test_the_gradient_through_a_called_function_that_draws_draws_once():
    rng, reference = np.random.RandomState(0), np.random.RandomState(0)

    @xform.function
    def layer(w):
        return np.sin(w * rng.randn(3))
    grad = xform.grad(lambda w: np.sum(layer(w)))
    for _ in range(2):
        eps = reference.randn(3)
        np.testing.assert_allclose(grad(0.7), np.sum(np.cos(0.7 * eps) * eps), rtol=1e-14)
    assert _position(rng) == _position(reference)


# -- derivatives ---------------------------------------------------------------------------------

def test_reparameterised_samples_have_pathwise_gradients():
    rng, reference = np.random.default_rng(2), np.random.default_rng(2)

    def elbo(params):
        mu, log_sigma = params
        z = mu + np.exp(log_sigma) * rng.standard_normal(4)
        return np.mean(-0.5 * z ** 2) + log_sigma
    grad = xform.grad(elbo)
    params = np.array([0.3, -0.2])
    for _ in range(2):
        eps = reference.standard_normal(4)
        z = params[0] + np.exp(params[1]) * eps
        want = [np.mean(-z), np.mean(-z * np.exp(params[1]) * eps) + 1.0]
        np.testing.assert_allclose(grad(params), want, rtol=1e-13)


def test_a_derivative_through_a_draws_parameters_names_the_users_line():
    rng = np.random.RandomState(0)
    grad = xform.grad(lambda mu: np.sum(rng.normal(mu, 1.0, 3)))  # line: draw param
    with pytest.raises(xform.UnsupportedError, match="not differentiable") as info:
        grad(0.5)
    assert_points_at(info.value, __file__, "draw param")
    assert "mu + sigma" in str(info.value)
    tangent = lambda mu: xform.jvp(lambda m: rng.normal(m, 1.0), (mu,), (1.0,))  # noqa: E731
    with pytest.raises(xform.UnsupportedError, match="not differentiable"):
        tangent(0.5)


def test_a_traced_parameter_that_is_not_differentiated_is_fine():
    rng, reference = np.random.RandomState(0), np.random.RandomState(0)
    grad = xform.grad(lambda w, mu: np.sum(w * rng.normal(mu, 1.0, 3)))
    for _ in range(2):
        np.testing.assert_array_equal(grad(1.0, 0.5), np.sum(reference.normal(0.5, 1.0, 3)))


def test_a_checkpointed_draw_is_drawn_once_per_call():
    rng, reference = np.random.RandomState(6), np.random.RandomState(6)
    for policy in (None, xform.checkpoint_policies.dots_saveable):
        body = xform.checkpoint(lambda w: np.sin(w * rng.randn(3)), policy=policy)
        grad = xform.grad(lambda w: np.sum(body(w)))
        for _ in range(2):
            eps = reference.randn(3)
            np.testing.assert_allclose(grad(0.5), np.sum(np.cos(0.5 * eps) * eps),
                                       rtol=1e-14)
        assert _position(rng) == _position(reference)


def test_a_shuffle_of_a_traced_array_is_a_functional_permutation():
    rng, reference = np.random.default_rng(3), np.random.default_rng(3)

    def f(x):
        y = x * 1.0
        rng.shuffle(y)
        return y
    fun = xform.jit(f)
    x = np.arange(5.0)
    for _ in range(2):
        want = x.copy()
        reference.shuffle(want)
        np.testing.assert_array_equal(fun(x), want)
    np.testing.assert_array_equal(x, np.arange(5.0))


# -- where generators sit ----------------------------------------------------------------------

class _Holder:
    pass


def _deep():
    outer = _Holder()
    outer.a = _Holder()
    outer.a.b = _Holder()
    outer.a.b.rng = np.random.default_rng(21)
    return outer


DEEP = _deep()
IN_DICT = {"noise": {"rng": np.random.RandomState(22)}}
IN_LIST = [np.random.default_rng(23)]
IN_TUPLE = (np.random.default_rng(24),)
fake_library = types.ModuleType("fake_library")
exec("import numpy as np\n_rng = np.random.default_rng(25)\n"
     "def sample(n):\n    return _rng.standard_normal(n)\n", fake_library.__dict__)
sys.modules.setdefault("fake_library", fake_library)


class Model:
    def __init__(self):
        self.layers = [{"rng": np.random.RandomState(26)}]

    def loss(self, w):
        return np.sum(w * self.layers[0]["rng"].randn(2))


WHERE = {
    "attribute chain": (lambda x: x * DEEP.a.b.rng.standard_normal(2),
                        lambda: DEEP.a.b.rng, lambda g: g.standard_normal(2)),
    "nested dict": (lambda x: x * IN_DICT["noise"]["rng"].randn(2),
                    lambda: IN_DICT["noise"]["rng"], lambda g: g.randn(2)),
    "list": (lambda x: x * IN_LIST[0].random(2), lambda: IN_LIST[0], lambda g: g.random(2)),
    "tuple (fallback)": (lambda x: x * IN_TUPLE[0].random(2),
                         lambda: IN_TUPLE[0], lambda g: g.random(2)),
    "library module": (lambda x: x * fake_library.sample(2),
                       lambda: fake_library._rng, lambda g: g.standard_normal(2)),
}


@pytest.mark.parametrize("where", sorted(WHERE))
@pytest.mark.parametrize("transform", ["jit", "grad"])
def test_generators_are_current_wherever_they_sit(where, transform):
    f, holder, draw = WHERE[where]
    generator = holder()
    fun = xform.jit(f) if transform == "jit" else xform.grad(lambda x: np.sum(f(x)))
    state = _state_of(generator)
    got = [fun(2.0) for _ in range(3)]
    after = _state_of(generator)
    _set_state(generator, state)              # replay the same stream eagerly
    for g in got:
        eps = draw(generator)
        want = 2.0 * eps if transform == "jit" else np.sum(eps)
        np.testing.assert_array_equal(g, want)
    assert _state_of(generator) == after
    assert holder() is generator              # the real generator is back in its place


def test_a_method_reaching_a_generator_in_a_list_of_dicts():
    model, reference = Model(), np.random.RandomState(26)
    grad = xform.grad(model.loss)
    grad(1.0)
    stages = _stage_counts()
    reference.randn(2)
    for _ in range(2):
        np.testing.assert_array_equal(grad(1.0), np.sum(reference.randn(2)))
    assert _stage_counts() == stages


def _state_of(generator):
    if isinstance(generator, np.random.RandomState):
        return _position(generator)
    return repr(generator.bit_generator.state)


def _set_state(generator, state):
    if isinstance(generator, np.random.RandomState):
        key, pos, has_gauss, gauss = state
        generator.set_state(("MT19937", np.frombuffer(key, np.uint32), pos, has_gauss, gauss))
    else:
        generator.bit_generator.state = eval(state, {"array": np.array, "uint64": np.uint64})


def test_seeding_inside_the_function_is_staged_and_cached():
    def f(x):
        np.random.seed(3)
        return x + np.random.randn(2)
    fun = xform.jit(f)
    np.random.seed(3)
    want = 1.0 + np.random.randn(2)
    hits = xform.cache_info()["hits"]
    for _ in range(3):
        np.testing.assert_array_equal(fun(1.0), want)
    assert xform.cache_info()["hits"] > hits      # a later call ran the cached path


def test_another_thread_drawing_while_a_function_is_staged_draws_from_the_real_generator():
    import threading
    rng, reference = np.random.RandomState(0), np.random.RandomState(0)
    seen = []

    def other():
        seen.append(rng.randn())

    def f(x):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        return x * rng.randn()
    got = xform.jit(f)(1.0)
    assert seen == [reference.randn()] and got == reference.randn()


def test_a_generator_passed_as_a_static_argument_is_current():
    rng, reference = np.random.RandomState(0), np.random.RandomState(0)
    jitted = xform.jit(lambda x, g: x + g.randn(2), static_argnums=1)
    grad = xform.grad(lambda x, g: np.sum(x * g.randn(2)))
    for _ in range(2):
        np.testing.assert_array_equal(jitted(0.0, rng), reference.randn(2))
        np.testing.assert_array_equal(grad(1.0, rng), np.sum(reference.randn(2)))
    stages = _stage_counts()
    jitted(0.0, rng), grad(1.0, rng)
    assert _stage_counts() == stages


TRACED_PARAMETERS = {
    "normal": (lambda g, a, b: g.normal(a, b, 3), (0.5, 2.0)),
    "uniform": (lambda g, a, b: g.uniform(a, a + b), (np.zeros(2), np.ones(2))),
    "gamma": (lambda g, a, b: g.gamma(a, b), (np.full(3, 2.0), 1.5)),
    "dirichlet": (lambda g, a, b: g.dirichlet(a * b), (np.ones(3), 2.0)),
    "choice": (lambda g, a, b: g.choice(a, 4, p=b), (np.arange(3.0), np.array([.2, .5, .3]))),
    "multivariate_normal": (lambda g, a, b: g.multivariate_normal(a, b),
                            (np.zeros(2), np.eye(2) * 3.0)),
    "triangular": (lambda g, a, b: g.triangular(a, a + b, a + 2 * b), (0.0, 1.0)),
    "binomial": (lambda g, a, b: g.binomial(10, b, 3), (0.0, 0.25)),
}


@pytest.mark.parametrize("kind", ["RandomState", "Generator"])
@pytest.mark.parametrize("name", sorted(TRACED_PARAMETERS))
def test_draws_with_traced_parameters_are_numpys(kind, name):
    draw, args = TRACED_PARAMETERS[name]
    rng, reference = _generator(kind, 1), _generator(kind, 1)
    jitted = xform.jit(lambda a, b: draw(rng, a, b))
    for _ in range(2):
        np.testing.assert_array_equal(jitted(*args), draw(reference, *args))


def test_the_batch_rule_draws_per_element_for_mapped_parameters_in_element_order():
    from xform.transforms.batch import batch_graph
    rng, reference = np.random.RandomState(2), np.random.RandomState(2)
    graph = xform.make_graph(lambda mu: rng.normal(mu, 1.0, 2))(0.0)
    batched = batch_graph(graph, [0], 3, [0])
    mus = np.array([0.0, 10.0, 20.0])
    got = xform.ir.interpret.eval_graph(batched, mus)[0]
    np.testing.assert_array_equal(got, np.stack([reference.normal(m, 1.0, 2) for m in mus]))
    unmapped = batch_graph(graph, [None], 3, [None])        # one draw shared by all
    np.testing.assert_array_equal(xform.ir.interpret.eval_graph(unmapped, 0.0)[0],
                                  reference.normal(0.0, 1.0, 2))


def test_a_generator_the_function_replaces_while_staged_stays_replaced():
    holder = _Holder()
    holder.rng = np.random.default_rng(0)
    fresh = np.random.default_rng(1)

    def f(x):
        out = x + holder.rng.standard_normal()
        holder.rng = fresh
        return out
    xform.jit(f)(1.0)
    assert holder.rng is fresh


def test_eval_shape_of_a_drawing_function_draws_nothing():
    rng = np.random.RandomState(3)
    shape = xform.eval_shape(lambda x: x + rng.randn(4), 1.0)
    assert shape.shape == (4,)
    assert _position(rng) == _position(np.random.RandomState(3))


def test_stagings_copy_generators_from_spares_of_earlier_stagings(monkeypatch):
    # A staging draws from a copy of each generator; after it, the copy is a spare that a
    # later staging gives the generator's state instead of deep-copying it anew (a
    # RandomState's deep copy costs ~0.3 ms). Each generator kind keeps its own spares.
    from xform.ir import values
    from xform.rules import random as random_rules
    monkeypatch.setattr(values, "_SPARE_COPIES", {})    # none left by earlier tests
    deep_copies = []
    real = random_rules.copy.deepcopy
    monkeypatch.setattr(random_rules.copy, "deepcopy",
                        lambda g: (deep_copies.append(type(g)), real(g))[1])
    generators = [np.random.RandomState(4), np.random.RandomState(np.random.PCG64(4)),
                  np.random.default_rng(4)]
    references = [np.random.RandomState(4), np.random.RandomState(np.random.PCG64(4)),
                  np.random.default_rng(4)]
    for round_ in range(3):
        for g, reference in zip(generators, references):
            grad = xform.grad(lambda w: np.sum(w * g.standard_normal(3)))   # a new function
            np.testing.assert_array_equal(grad(2.0), np.sum(reference.standard_normal(3)))
            assert g.standard_normal() == reference.standard_normal()   # in step after
    assert deep_copies == [np.random.RandomState] * 2 + [np.random.Generator]
