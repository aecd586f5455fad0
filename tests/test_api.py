"""jit: one staging per abstract signature (observed through `xform.cache_info()`), results
bit-equal to numpy, pytree arguments and outputs, static arguments; vjp and linearize cached
per signature too."""
import dataclasses
import sys
from collections import namedtuple

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.testing import strategies as xst


def bits(value):
    """The exact bytes, dtype and shape of a result (so -0.0 differs from 0.0)."""
    array = np.asarray(value)
    return array.dtype, array.shape, array.tobytes()


def assert_bit_equal(got, want):
    assert type(got) is type(want) or np.ndim(want) == 0
    assert bits(got) == bits(want)


class Counting:
    """Wraps a function and counts how often its Python body runs (= how often it is staged)."""

    def __init__(self, fun):
        self.fun = fun
        self.calls = 0

    def __call__(self, *args):
        self.calls += 1
        return self.fun(*args)


def delta(before):
    after = xform.cache_info()
    return {k: after[k] - before[k] for k in ("hits", "misses", "compiles")}


# -- staging once per abstract signature -----------------------------------------------------

def test_staged_once_per_signature():
    body = Counting(lambda x, y: np.sin(x) * y)
    fun = xform.jit(body)
    before = xform.cache_info()
    for value in (1.0, 2.0, 3.0):
        fun(np.full(3, value), np.ones(3))
    assert body.calls == 1
    assert delta(before) == {"hits": 2, "misses": 1, "compiles": 1}


def test_new_shape_or_dtype_is_a_new_signature():
    body = Counting(lambda x: x * 2)
    fun = xform.jit(body)
    before = xform.cache_info()
    fun(np.ones(3))
    fun(np.ones(4))
    fun(np.ones(3, np.float32))
    fun(np.ones((3, 1)))
    fun(np.ones(4))
    assert body.calls == 4
    # (a signature's first call runs the values its staging computed; its second compiles)
    assert delta(before) == {"hits": 1, "misses": 4, "compiles": 1}


def test_python_float_numpy_float64_and_float32_are_different_signatures():
    body = Counting(lambda s, x: s * x)
    fun = xform.jit(body)
    x32 = np.ones(2, np.float32)
    before = xform.cache_info()
    results = [fun(2.0, x32), fun(np.float64(2.0), x32), fun(np.float32(2.0), x32),
               fun(np.full((), 2.0, np.float32), x32), fun(3.0, x32)]
    assert body.calls == 3                        # a 0-d float32 array is a float32 scalar
    # (compiled on a signature's second call: the f32 and the float ones)
    assert delta(before)["misses"] == 3 and delta(before)["compiles"] == 2
    # the signatures matter: a Python float is weak and keeps float32, np.float64 does not
    assert [r.dtype for r in results] == [np.float32, np.float64, np.float32, np.float32,
                                          np.float32]
    for (s, got) in zip((2.0, np.float64(2.0), np.float32(2.0)), results):
        assert_bit_equal(got, s * x32)


def test_python_int_and_bool_signatures():
    body = Counting(lambda s, x: s + x)
    fun = xform.jit(body)
    x8 = np.arange(3, dtype=np.int8)
    assert fun(1, x8).dtype == (1 + x8).dtype == np.int8
    assert fun(True, x8).dtype == (True + x8).dtype
    assert fun(np.int64(1), x8).dtype == np.int64
    assert body.calls == 3


ONE_ARGUMENT_SCALARS = [2.0, np.float64(2.0), np.float32(2.0), 2, np.int64(2), np.int32(2),
                        True, np.bool_(True), 2 + 1j, np.complex128(2 + 1j)]


def test_one_argument_signatures_of_every_scalar_type():
    """The cached path keys one argument by its type: each type must get numpy's result."""
    body = Counting(lambda s: s * np.float32(3.0))
    fun = xform.jit(body)
    for _ in range(2):                           # the staging calls, then the cached calls
        for s in ONE_ARGUMENT_SCALARS:
            assert_bit_equal(fun(s), s * np.float32(3.0))
    # bool and np.bool_ have the same signature: one staging for both
    assert body.calls == len(ONE_ARGUMENT_SCALARS) - 1


def test_one_argument_arrays_key_shape_and_dtype():
    body = Counting(lambda x: x * 2.0)
    fun = xform.jit(body)
    arrays = [np.ones(3), np.ones(3, np.float32), np.ones((3, 1)), np.ones(()),
              np.ones(3, np.dtype(">f8")), np.arange(3)]
    before = xform.cache_info()
    for _ in range(3):
        for x in arrays:
            assert_bit_equal(fun(x), x * 2.0)
    assert body.calls == len(arrays)
    assert delta(before) == {"hits": 2 * len(arrays), "misses": len(arrays),
                             "compiles": len(arrays)}


def test_calls_without_arguments_and_with_pytrees_are_cached():
    body = Counting(lambda: np.float64(1.5) * 2.0)
    fun = xform.jit(body)
    tree_body = Counting(lambda p: p["a"] * p["b"][0])
    tree_fun = xform.jit(tree_body)
    before = xform.cache_info()
    for _ in range(3):
        assert_bit_equal(fun(), np.float64(1.5) * 2.0)
        assert_bit_equal(tree_fun({"a": 2.0, "b": [np.ones(2)]}), 2.0 * np.ones(2))
    assert body.calls == tree_body.calls == 1
    assert delta(before) == {"hits": 4, "misses": 2, "compiles": 2}


def test_static_arguments_key_the_cache():
    body = Counting(lambda x, n: x.reshape(n, -1).sum(axis=1))
    fun = xform.jit(body, static_argnums=1)
    x = np.arange(6.0)
    assert_bit_equal(fun(x, 2), x.reshape(2, -1).sum(axis=1))
    assert_bit_equal(fun(x, 3), x.reshape(3, -1).sum(axis=1))
    assert_bit_equal(fun(x + 1, 2), (x + 1).reshape(2, -1).sum(axis=1))
    assert body.calls == 2


def test_jit_keeps_the_function_name_and_doc():
    def my_function(x):
        """Docstring."""
        return x
    jitted = xform.jit(my_function)
    assert jitted.__name__ == "my_function" and jitted.__doc__ == "Docstring."


def test_each_jitted_function_has_its_own_entries():
    a, b = Counting(lambda x: x + 1), Counting(lambda x: x + 1)
    xform.jit(a)(1.0)
    xform.jit(b)(1.0)
    assert a.calls == b.calls == 1


def test_jit_inside_jit_is_inlined():
    inner_body = Counting(lambda x: np.cos(x) * 2.0)
    inner = xform.jit(inner_body)
    outer = xform.jit(lambda x: inner(x) + inner(x * 2.0))
    before = xform.cache_info()
    for _ in range(2):      # (the second call compiles)
        assert_bit_equal(outer(np.ones(3)),
                         np.cos(np.ones(3)) * 2.0 + np.cos(np.ones(3) * 2.0) * 2.0)
    assert delta(before)["compiles"] == 1         # only the outer function is compiled
    graph = xform.make_graph(lambda x: inner(x))(1.0)
    assert [e.primitive.name for e in graph.equations] == ["cos", "multiply"]


def test_clear_cache_forgets_entries():
    body = Counting(lambda x: x - 1.0)
    fun = xform.jit(body)
    fun(1.0)
    xform.clear_cache()
    fun(1.0)
    assert body.calls == 2


def test_changing_an_option_forgets_compiled_code():
    body = Counting(lambda x: x - 1.0)
    fun = xform.jit(body)
    fun(1.0)
    fusion = xform.config.fusion
    xform.config.update("fusion", fusion)  # the same value: nothing to forget
    fun(1.0)
    assert body.calls == 1
    xform.config.update("fusion", not fusion)
    try:
        fun(1.0)
    finally:
        xform.config.update("fusion", fusion)
    assert body.calls == 2


def test_staged_user_code_is_watched_only_while_a_build_records():
    from xform.runtime.dependencies import hook
    if sys.getprofile() is not None:
        pytest.skip("another profiler is active; recording then leaves it alone")
    seen = []

    def fun(x):
        seen.append(sys.getprofile())
        return x * 2.0
    xform.make_graph(fun)(1.0)   # staged without recording
    xform.jit(fun)(1.0)          # staged while its cache entry records
    assert seen == [None, hook]
    assert sys.getprofile() is None


def test_xform_entry_points_pause_the_installed_hook():
    from xform.ir.execute import unwatched
    from xform.runtime.dependencies import hook, recording
    if sys.getprofile() is not None:
        pytest.skip("another profiler is active")
    seen = []
    entry_point = unwatched(lambda: seen.append(sys.getprofile()))
    with recording(entry_point):
        sys.setprofile(hook)
        try:
            entry_point()
            seen.append(sys.getprofile())
        finally:
            sys.setprofile(None)
    assert seen == [None, hook]


# -- vjp and linearize: cached like the other transforms --------------------------------------

def _scaled(x):
    return x * 3.0


def _uses_scaled(x, y):
    return np.sin(_scaled(x)) * y


def test_vjp_is_staged_and_compiled_once_per_signature():
    body = Counting(lambda x, y: np.sin(x) * y + np.exp(x * y))
    x1, y1 = np.linspace(0.1, 1.0, 4), np.full(4, 2.0)
    out1, vjp1 = xform.vjp(body, x1, y1)
    first = vjp1(np.ones(4))
    xform.vjp(body, x1, y1)   # the first call interprets, the second compiles
    before = xform.cache_info()
    x2, y2 = x1 * 2.0, y1 - 1.0
    out2, vjp2 = xform.vjp(body, x2, y2)
    second = vjp2(np.ones(4))
    assert body.calls == 1
    assert delta(before) == {"hits": 1, "misses": 0, "compiles": 0}
    # each call's vjp_fn keeps its own residuals: the second call changed no array of the first
    for got, want in zip(vjp1(np.ones(4)), first):
        assert_bit_equal(got, want)
    assert_bit_equal(out2, np.sin(x2) * y2 + np.exp(x2 * y2))
    xform.clear_cache()
    fresh_out, fresh_vjp = xform.vjp(body, x2, y2)   # restaged: the same results
    assert_bit_equal(out2, fresh_out)
    for got, want in zip(second, fresh_vjp(np.ones(4))):
        assert_bit_equal(got, want)


def test_vjp_with_aux_and_integer_input_is_cached():
    def fun(x, n):
        return np.sum(x * n), {"n": n * 2}
    x, n = np.ones(3), np.arange(3)
    xform.vjp(fun, x, n, has_aux=True)
    xform.vjp(fun, x, n, has_aux=True)   # the first call interprets, the second compiles
    before = xform.cache_info()
    out, vjp_fn, aux = xform.vjp(fun, x * 2.0, n + 1, has_aux=True)
    assert delta(before) == {"hits": 1, "misses": 0, "compiles": 0}
    grad_x, grad_n = vjp_fn(1.0)
    assert_bit_equal(out, np.sum(x * 2.0 * (n + 1)))
    assert_bit_equal(aux["n"], (n + 1) * 2)
    assert_bit_equal(grad_x, (n + 1).astype(np.float64))
    assert grad_n.dtype == xform.float0 and grad_n.shape == (3,)


def test_linearize_is_staged_and_compiled_once_per_signature():
    body = Counting(lambda p: np.sum(np.sin(p["a"]) * p["b"]))
    p1 = {"a": np.linspace(0.1, 1.0, 4), "b": np.full(4, 2.0)}
    out1, jvp1 = xform.linearize(body, p1)
    first = jvp1(p1)
    xform.linearize(body, p1)   # the first call interprets, the second compiles
    before = xform.cache_info()
    p2 = {"a": p1["a"] + 1.0, "b": p1["b"] * 3.0}
    out2, jvp2 = xform.linearize(body, p2)
    second = jvp2(p1)
    assert body.calls == 1
    assert delta(before) == {"hits": 1, "misses": 0, "compiles": 0}
    assert_bit_equal(jvp1(p1), first)
    xform.clear_cache()
    fresh_out, fresh_jvp = xform.linearize(body, p2)
    assert_bit_equal(out2, fresh_out)
    assert_bit_equal(second, fresh_jvp(p1))


def test_vjp_and_linearize_restage_when_a_callee_is_redefined(monkeypatch):
    x, y = np.linspace(0.1, 1.0, 3), np.ones(3)
    assert_bit_equal(xform.vjp(_uses_scaled, x, y)[1](y)[0], np.cos(x * 3.0) * 3.0)
    assert_bit_equal(xform.linearize(_uses_scaled, x, y)[1](y, x * 0.0),
                     np.cos(x * 3.0) * 3.0)
    monkeypatch.setitem(globals(), "_scaled", lambda x: x * 5.0)
    assert_bit_equal(xform.vjp(_uses_scaled, x, y)[1](y)[0], np.cos(x * 5.0) * 5.0)
    assert_bit_equal(xform.linearize(_uses_scaled, x, y)[1](y, x * 0.0),
                     np.cos(x * 5.0) * 5.0)


# -- bit-equal to numpy ------------------------------------------------------------------------

NUMPY_FUNCTIONS = [
    ("poly", lambda x: 3.0 * x ** 3 - 2.0 * x * x + x / 7.0),
    ("softplus", lambda x: np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0.0)),
    ("normalize", lambda x: (x - x.sum(axis=-1, keepdims=True)) / (np.sqrt(x * x) + 1.0)),
    ("trig", lambda x: np.sin(x) * np.cos(x.T).T - np.tanh(x)),
    ("where", lambda x: np.where(x > 0.5, x, np.exp2(x)).reshape(-1)),
    ("cast", lambda x: (x.astype(np.float32) * np.float32(1.5)).astype(np.float64) - x),
    ("tuple", lambda x: (x.sum(), np.clip(x, -1.0, 1.0), x >= 0)),
]


@pytest.mark.parametrize("name, fun", NUMPY_FUNCTIONS, ids=[n for n, _ in NUMPY_FUNCTIONS])
@given(data=st.data())
def test_results_bit_equal_numpy(name, fun, data):
    dtype = data.draw(xst.float_dtypes)
    x = data.draw(xst.arrays(data.draw(xst.shapes(min_dims=1, max_dims=2)), dtype))
    want = fun(x)
    jitted = xform.jit(fun)
    for _ in range(2):                           # the staging call and the cached call
        got = jitted(x)
        if isinstance(want, tuple):
            assert type(got) is tuple and len(got) == len(want)
            for g, w in zip(got, want):
                assert_bit_equal(g, w)
        else:
            assert_bit_equal(got, want)


def test_adding_zero_keeps_numpy_signed_zero():
    x = np.array([-0.0, 1.0])
    assert_bit_equal(xform.jit(lambda a: a + 0.0)(x), x + 0.0)
    assert_bit_equal(xform.jit(lambda a: a + -0.0)(x), x + -0.0)


def test_results_never_alias_arguments_numpy_would_copy():
    x = np.array([1.0, 2.0])
    for fun in (lambda a: a * 1.0, lambda a: a * 1.0 + -0.0, lambda a: a - 0.0):
        out = xform.jit(fun)(x)
        assert out is not x and not np.shares_memory(out, x)
        out[0] = 99.0
        assert x[0] == 1.0


def test_integer_and_bool_results_bit_equal():
    x = np.arange(-3, 4)
    fun = lambda a: (a * 3 - 1, a // 2, a % 3, a > 0, -a)   # noqa: E731
    for got, want in zip(xform.jit(fun)(x), fun(x)):
        assert_bit_equal(got, want)


def test_scalar_outputs_follow_numpy_types():
    got = xform.jit(lambda x: np.sum(x * 2.0))(np.arange(3.0))
    assert got == 6.0 and np.ndim(got) == 0 and np.asarray(got).dtype == np.float64


# -- pytrees ------------------------------------------------------------------------------------

Layer = namedtuple("Layer", "w b")


@dataclasses.dataclass
class Model:
    layers: list
    scale: object


@attrs.frozen
class Optim:
    lr: object
    momentum: object


def predict(model, x):
    for layer in model.layers:
        x = np.tanh(x * layer.w + layer.b)
    return {"out": x * model.scale, "layers": len(model.layers), "first": model.layers[0]}


def test_pytree_arguments_and_outputs():
    model = Model([Layer(np.ones(3), np.zeros(3)), Layer(np.full(3, 0.5), np.ones(3))], 2.0)
    x = np.linspace(-1.0, 1.0, 3)
    got, want = xform.jit(predict)(model, x), predict(model, x)
    assert set(got) == {"out", "layers", "first"}
    assert_bit_equal(got["out"], want["out"])
    assert got["layers"] == 2
    assert type(got["first"]) is Layer
    assert_bit_equal(got["first"].w, model.layers[0].w)


def test_pytree_structure_is_part_of_the_signature():
    body = Counting(lambda p: sum(np.sum(v) for v in p.values()))
    fun = xform.jit(body)
    fun({"a": np.ones(2)})
    fun({"a": np.zeros(2)})
    fun({"a": np.ones(2), "b": np.ones(2)})
    fun({"b": np.ones(2)})
    assert body.calls == 3


def test_attrs_and_namedtuple_outputs():
    def step(opt, grads):
        return Optim(opt.lr * 0.5, opt.momentum + grads), Layer(grads, -grads)
    opt, grads = Optim(0.1, np.zeros(2)), np.arange(2.0)
    new_opt, layer = xform.jit(step)(opt, grads)
    assert type(new_opt) is Optim and type(layer) is Layer
    assert new_opt.lr == 0.05
    assert_bit_equal(new_opt.momentum, np.zeros(2) + grads)
    assert_bit_equal(layer.b, -grads)


def test_none_leaves_and_empty_containers():
    fun = xform.jit(lambda p: (p["x"] * 2.0, None, [], {}))
    out = fun({"x": np.ones(2), "unused": None})
    assert out[1:] == (None, [], {})
    assert_bit_equal(out[0], np.full(2, 2.0))


def test_grad_of_a_pytree_argument_has_its_structure():
    params = {"w": np.array([1.0, 2.0]), "layer": Layer(np.array(3.0), np.array(0.5))}
    grads = xform.jit(xform.grad(
        lambda p: np.sum(p["w"] ** 2) * p["layer"].w + p["layer"].b))(params)
    assert set(grads) == {"w", "layer"} and type(grads["layer"]) is Layer
    np.testing.assert_allclose(grads["w"], 2 * params["w"] * 3.0)
    np.testing.assert_allclose(grads["layer"].w, 5.0)
    np.testing.assert_allclose(grads["layer"].b, 1.0)


@pytest.mark.parametrize("argnums", [(0,), (1, 0), (0, 1, 2)])
def test_grad_of_array_and_scalar_arguments_is_a_tuple_in_argnums_order(argnums):
    """The all-leaves gradient (no containers, no integer argument) is the outputs as a tuple
    (reverse._grads_unflattener), in the order argnums names them, also when cached."""
    def f(x, y, s):
        return np.sum(np.sin(x) * y) * s
    args = (np.array([0.5, -1.0]), np.array([2.0, 3.0]), 1.5)
    grad_f = xform.grad(f, argnums=argnums)
    for _ in range(3):       # the first call interprets, the next ones run compiled code
        grads = grad_f(*args)
        assert type(grads) is tuple and len(grads) == len(argnums)
        for n, got in zip(argnums, grads):
            assert_bit_equal(got, xform.grad(f, argnums=n)(*args))
    assert type(xform.value_and_grad(f, argnums=argnums)(*args)[1]) is tuple
