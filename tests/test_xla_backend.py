"""The XLA backend (xform.codegen.xla, `backend="xla"`) against the numpy backend: the
composition matrix and random whole programs compute the same values within tolerances (XLA
computes its own bits), what XLA cannot run stays on the host, and jax's configuration and
arrays are left as the user has them."""
import contextlib
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import xform
from tests.transforms import test_matrix as matrix
from xform.codegen import xla
from xform.testing import programs
from xform.testing.programs import NOT_DIFFERENTIABLE_TO_FLOAT64


@contextlib.contextmanager
def option(name, value):
    previous = getattr(xform.config, name)
    xform.config.update(name, value)
    try:
        yield
    finally:
        xform.config.update(name, previous)


def backend(name):
    return option("backend", name)


@pytest.fixture(autouse=True)
def xla_wherever_it_can():
    """XLA runs everything it can: these tests are about its code, which the cost model would
    keep off most of their small graphs (its own tests choose "auto" again)."""
    with option("xla_placement", "always"):
        yield


def _on_both(compute):
    """`compute()` under the numpy backend and under the XLA backend, as numpy arrays."""
    with backend("numpy"):
        want = compute()
    with backend("xla"):
        got = compute()
    return np.asarray(got), np.asarray(want)


# == the composition matrix ======================================================================

def _cell(chain, construct_name):
    construct = {c.name: c for c in matrix.constructs()}[construct_name]
    return np.ravel(matrix._build(chain, construct.fun)(matrix.X0))


# Each cell compiles several XLA programs (a tenth of a second to a second each on a loaded
# 2-core machine), so the normal run takes every fifth cell, in a pattern that gives every
# pair of transforms and every triple several constructs and every construct a fifth of the
# chains; `XFORM_HYPOTHESIS=long` runs every cell (1092 of them, all passing when written).
LONG = os.environ.get("XFORM_HYPOTHESIS") == "long"
CELLS = [cell for k, cell in enumerate(matrix.cells()) if LONG or k % 5 == 0]


@pytest.mark.parametrize("chain,construct_name", [
    pytest.param(chain, name, id=f"{'-'.join(chain)}-{name}") for chain, name in CELLS])
def test_matrix_cell_agrees_with_numpy(chain, construct_name):
    got, want = _on_both(lambda: _cell(chain, construct_name))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11,
                               err_msg=f"{' o '.join(chain)} over {construct_name}")


# == random programs =============================================================================

def _described(program):
    note(str(program))
    return program


@settings(max_examples=6)
@given(programs(6).map(_described))
def test_random_programs_jit_and_derivatives_agree_with_numpy(program):
    x = program.input()
    got, want = _on_both(lambda: xform.jit(program.fun)(x))
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    if program.features & NOT_DIFFERENTIABLE_TO_FLOAT64:
        return
    weights = np.random.default_rng(program.seed + 1).uniform(0.5, 1.5, program.out_shape)

    def loss(y):
        return np.sum(program.fun(y) * weights)
    got, want = _on_both(lambda: xform.grad(loss)(x))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)
    got, want = _on_both(lambda: xform.hessian(loss)(x))
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)


@settings(max_examples=4)
@given(programs(6).map(_described), st.integers(1, 3))
def test_random_programs_vmap_agrees_with_numpy(program, batch):
    xs = program.input(batch=batch)
    got, want = _on_both(lambda: xform.vmap(program.fun)(xs))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


# == the split, the keyword, the configuration ==================================================

def _segments(graph):
    return [eqn for eqn in graph.equations if eqn.primitive is xla.xla_call_p]


def test_what_xla_cannot_run_stays_on_the_host_between_segments():
    rng = np.random.default_rng(0)

    def f(x):
        y = np.tanh(x) @ x
        return np.sin(y * rng.standard_normal(3)) + y

    split = xform.split_graph(f)(np.ones((3, 3)))
    # the draw, which reads nothing XLA computes, runs first: one segment for the rest
    assert xform.describe_split(split).splitlines() == ["host: random_draw", "xla: 5 equations"]
    # every call draws anew, as eager numpy does
    jitted = xform.jit(f, backend="xla")
    first, second = np.asarray(jitted(np.ones((3, 3)))), np.asarray(jitted(np.ones((3, 3))))
    assert not np.array_equal(first, second)
    reference_rng = np.random.default_rng(0)
    y = np.tanh(np.ones((3, 3))) @ np.ones((3, 3))
    np.testing.assert_allclose(first, np.sin(y * reference_rng.standard_normal(3)) + y,
                               rtol=1e-12)


def test_describe_split_names_the_host_equation_and_its_line():
    rng = np.random.default_rng(0)

    def f(x):
        return np.sin(x) * rng.standard_normal(3)
    text = xform.describe_split(xform.split_graph(f)(np.ones(3)), lines=True)
    assert f"host: random_draw at {__file__}:" in text
    assert "xla: " in text


def test_reverse_mode_through_a_run_time_while_loop_keeps_xforms_scheme_on_the_host():
    def f(x):
        return np.sum(xform.while_loop(lambda c: np.sum(c * c) < 6.0, lambda c: c * 1.3, x))
    split = xform.split_graph(xform.grad(f))(np.array([0.3, 0.5, 0.7]))
    host = [line for line in xform.describe_split(split).splitlines() if line[:4] == "host"]
    assert host == ["host: while_loop_grad"]
    got, want = _on_both(lambda: xform.grad(f)(np.array([0.3, 0.5, 0.7])))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_control_flow_becomes_one_xla_segment():
    def f(x):
        a = xform.cond(np.sum(x) > 0, np.sin, np.cos, x)
        b = xform.while_loop(lambda c: np.sum(c * c) < 6.0, lambda c: c * 1.3, a)
        c, ys = xform.scan(lambda c, s: (c + s, c * s), b, np.arange(3.0))
        return np.sum(xform.fori_loop(0, 3, lambda i, c: c * 1.1, c)) + np.sum(ys)
    split = xform.split_graph(f)(np.ones(3))
    assert xform.describe_split(split) == "xla: 10 equations"
    got, want = _on_both(lambda: xform.jit(f)(np.array([0.3, -0.5, 0.7])))
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_results_are_float64_numpy_arrays_without_changing_jaxs_configuration():
    assert not jax.config.jax_enable_x64
    out = xform.jit(lambda x: np.sin(x) * 1e-300, backend="xla")(np.full(2, 0.5))
    assert type(out) is np.ndarray and out.dtype == np.float64
    np.testing.assert_allclose(out, np.sin(0.5) * 1e-300, rtol=1e-14)  # 0 in float32
    assert not jax.config.jax_enable_x64


def test_jax_arrays_are_taken_and_results_stay_jax_arrays_on_their_device():
    with jax.enable_x64(True):
        x = jnp.linspace(0.0, 1.0, 4)
    out = xform.grad(lambda v: np.sum(np.sin(v) ** 2), backend="xla")(x)
    assert isinstance(out, jax.Array) and out.devices() == x.devices()
    np.testing.assert_allclose(out, np.sin(2 * np.asarray(x)), rtol=1e-12)
    # the next call of the signature takes the cached path, jax arrays as they are
    gradient = xform.grad(lambda v: np.sum(np.sin(v) ** 2), backend="xla")
    gradient(x)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gradient, "_build_and_call", None)   # the uncached path: not reached
        np.testing.assert_allclose(gradient(x), np.sin(2 * np.asarray(x)), rtol=1e-12)
    # a float32 jax array is computed in float32, as jax computes it
    out32 = xform.jit(lambda v: v * 2.0, backend="xla")(jnp.ones(3, jnp.float32))
    assert out32.dtype == np.float32


def test_a_jax_array_on_the_numpy_backend_is_read_as_numpy():
    with jax.enable_x64(True):
        x = jnp.arange(3.0)
    jitted = xform.jit(lambda v: np.cumsum(v) * 1e-300)
    for _ in range(2):     # never filed for the cached path, which would skip the reading
        out = jitted(x)
        assert type(out) is np.ndarray and out.dtype == np.float64
        np.testing.assert_array_equal(out, np.array([0.0, 1.0, 3.0]) * 1e-300)


def test_first_call_is_xlas_and_the_keyword_keys_its_own_entry():
    def f(x):
        return np.sum(np.exp(x) * x)
    x = np.linspace(0.0, 1.0, 5)
    numpy_grad, xla_grad = xform.grad(f), xform.grad(f, backend="xla")
    split = xform.split_graph(xform.grad(f))(x)
    assert _segments(split)
    calls = []
    real_call = xla.Executable.__call__
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(xla.Executable, "__call__",
                      lambda self, *args: calls.append(self) or real_call(self, *args))
        xla_grad(x)
        assert len(calls) == 1          # XLA's code from the first call, not interpreted
        numpy_grad(x), numpy_grad(x)
        assert len(calls) == 1          # each keyword has its own cache entry
        xla_grad(x)
        assert len(calls) == 2


def test_every_transform_takes_the_keyword():
    def f(x):
        return np.sin(x) * x
    x = np.array([0.2, 0.4])
    for transform in (lambda g: xform.jit(g, backend="xla"),
                      lambda g: xform.vmap(g, backend="xla"),
                      lambda g: xform.jacfwd(g, backend="xla"),
                      lambda g: xform.jacrev(g, backend="xla"),
                      lambda g: xform.hessian(lambda v: np.sum(g(v)), backend="xla"),
                      lambda g: xform.grad(lambda v: np.sum(g(v)), backend="xla"),
                      lambda g: xform.value_and_grad(lambda v: np.sum(g(v)), backend="xla")):
        assert jax.tree_util.tree_leaves(transform(f)(x))
    out, tangent = xform.jvp(f, (x,), (np.ones(2),), backend="xla")
    np.testing.assert_allclose(tangent, np.cos(x) * x + np.sin(x), rtol=1e-12)
    out, pullback = xform.vjp(f, x, backend="xla")
    np.testing.assert_allclose(pullback(np.ones(2))[0], np.cos(x) * x + np.sin(x), rtol=1e-12)
    out, f_jvp = xform.linearize(f, x, backend="xla")
    np.testing.assert_allclose(f_jvp(np.ones(2)), np.cos(x) * x + np.sin(x), rtol=1e-12)


def test_an_unknown_backend_is_an_error_at_the_users_line():
    with pytest.raises(xform.TypeCheckError, match="backend='tpu'") as info:
        xform.jit(np.sin, backend="tpu")
    assert info.value.source.filename == __file__
    with pytest.raises(ValueError, match="backend"):
        xform.config.update("backend", "tpu")


def test_huge_unrolled_graphs_stay_on_numpy(monkeypatch):
    monkeypatch.setattr(xla, "MAX_EQUATIONS", 50)

    def unrolled(x):
        for _ in range(30):
            x = np.sin(x) * 1.01
        return x
    assert not _segments(xform.split_graph(unrolled)(np.ones(2)))
    assert _segments(xform.split_graph(lambda x: np.sin(x) * 1.01)(np.ones(2)))
    # on numpy, jax arrays in and out as on XLA, in float64 (not jax's default float32)
    with jax.enable_x64(True):
        x = jnp.full(2, 0.5)
    out = xform.jit(lambda v: unrolled(v) * 1e-300, backend="xla")(x)
    assert isinstance(out, jax.Array) and out.dtype == np.float64
    np.testing.assert_allclose(out, unrolled(np.full(2, 0.5)) * 1e-300, rtol=1e-14)


def test_a_primitive_without_a_lowering_runs_on_the_host_and_a_hook_lowers_it():
    host_p = xform.Primitive("host_only_double")
    host_p.def_impl(lambda x: x * 2.0)
    host_p.def_abstract_eval(lambda x: x)
    split = xform.split_graph(lambda x: np.sin(host_p.bind(np.cos(x))))(np.ones(2))
    assert [e.primitive.name for e in split.equations
            if e.primitive not in (xla.xla_call_p, xla.to_caller_p)] == ["host_only_double"]
    np.testing.assert_allclose(
        xform.jit(lambda x: np.sin(host_p.bind(np.cos(x))), backend="xla")(np.ones(2)),
        np.sin(2 * np.cos(np.ones(2))), rtol=1e-13)
    lowered_p = xform.Primitive("lowered_double")
    xform.extend.register(lowered_p, impl=lambda x: x * 2.0, abstract_eval=lambda x: x,
                          hooks={"xla": lambda x: x * 2.0})
    split = xform.split_graph(lambda x: np.sin(lowered_p.bind(np.cos(x))))(np.ones(2))
    assert xform.describe_split(split) == "xla: 3 equations"


def test_a_lowering_that_fails_sends_its_equation_to_the_host():
    def broken(x):
        raise RuntimeError("no such XLA operation")
    odd_p = xform.Primitive("odd_double")
    xform.extend.register(odd_p, impl=lambda x: x * 2.0, abstract_eval=lambda x: x,
                          hooks={"xla": broken})
    split = xform.split_graph(lambda x: np.sin(odd_p.bind(np.cos(x))))(np.ones(2))
    assert xform.describe_split(split).splitlines() == [
        "xla: 1 equations", "host: odd_double", "xla: 1 equations"]


@pytest.mark.parametrize("loop", [
    # one scalar cotangent per element: the accumulation is a permutation of them
    lambda x: np.sum(np.stack([np.sin(np.exp(x[i])) for i in range(x.shape[0])])),
    # elements read twice and some never: their cotangents add up at repeated positions
    lambda x: sum(x[i] * x[i - 1] for i in range(1, x.shape[0] - 1)),
])
def test_python_loops_over_elements_agree_with_numpy(loop):
    x = np.linspace(-1.0, 1.0, 7)
    got, want = _on_both(lambda: xform.grad(loop)(x))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_gpu_check_runs_on_whatever_device_jax_sees():
    from bench import gpu_check
    columns, results, devices = gpu_check.run(scales=(1,), only=["tiny_scalar"], samples=1)
    [(name, scale, elements, times, notes)] = results
    assert (name, scale, notes) == ("tiny_scalar", 1, {})
    assert set(times) == set(columns) >= {"xform xla", "jax jit", "xform numpy (CPU)"}
    assert "| tiny_scalar | 1 | 1 |" in gpu_check.markdown(columns, results, devices)
    assert not jax.config.jax_enable_x64


def test_without_jax_the_backend_is_an_error_at_the_users_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)     # `import jax` raises ImportError
    xla._jax.cache_clear()
    xla._table.cache_clear()
    try:
        with pytest.raises(xform.UnsupportedError, match="needs jax") as info:
            xform.jit(lambda x: np.sin(x) * 2.0, backend="xla")(np.ones(2))
        assert info.value.source.filename == __file__
        assert "pip install" in str(info.value)
    finally:
        monkeypatch.undo()
        xla._jax.cache_clear()
        xla._table.cache_clear()
    assert isinstance(xform.jit(np.cos, backend="xla")(np.ones(2)), np.ndarray)


# == the cost model: XLA where it pays ==========================================================

def _loop_over_elements(x):
    return sum(np.sin(np.exp(x[i])) for i in range(x.shape[0]))


def _host_double():
    host_p = xform.Primitive("host_only_twice")
    host_p.def_impl(lambda x: x * 2.0)
    host_p.def_abstract_eval(lambda x: x)
    return host_p


def test_a_small_graph_stays_on_numpy_unless_xla_is_chosen_for_everything():
    def f(x):
        return np.sum(np.sin(x) * x)
    x = np.linspace(0.0, 1.0, 5)
    with option("xla_placement", "auto"):
        # a few numpy calls cost less than one call into XLA: the numpy backend's code, with
        # no conversions around it (only numpy arguments reach it)
        split = xform.split_graph(f)(x)
        assert [e.primitive.name for e in split.equations] == ["sin", "multiply", "sum"]
        assert not _segments(xform.split_graph(xform.grad(f))(x))
        got = xform.grad(f, backend="xla")(x)
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, xform.grad(f)(x))       # the numpy backend's bits
    assert xform.describe_split(xform.split_graph(f)(x)) == "xla: 3 equations"


def test_the_price_of_a_call_into_xla_decides(monkeypatch):
    x = np.linspace(0.0, 1.0, 5)
    with option("xla_placement", "auto"):
        monkeypatch.setattr(xla, "XLA_CALL_NS", 0.0)
        assert _segments(xform.split_graph(lambda v: np.sum(np.sin(v) * v))(x))
        monkeypatch.setattr(xla, "XLA_CALL_NS", float("inf"))
        assert not _segments(xform.split_graph(_loop_over_elements)(np.ones(40)))


def test_a_python_loop_over_elements_and_a_long_scan_pay_for_xla():
    def short_scan(x):
        return xform.scan(lambda c, s: (np.sin(c) * s, c), x, np.linspace(0.0, 1.0, 2))[0]

    def long_scan(x):
        return xform.scan(lambda c, s: (np.sin(c) * s, c), x, np.linspace(0.0, 1.0, 200))[0]
    with option("xla_placement", "auto"):
        for f, x, pays in [(_loop_over_elements, np.ones(40), True),
                           (_loop_over_elements, np.ones(2), False),
                           (long_scan, 0.5, True), (short_scan, 0.5, False)]:
            assert bool(_segments(xform.split_graph(f)(x))) == pays, (f.__name__, x)
            got, want = _on_both(lambda: xform.grad(f)(x))
            np.testing.assert_allclose(got, want, rtol=1e-12)


def test_each_segment_is_weighed_on_its_own():
    host_p = _host_double()

    def f(x):
        y = _loop_over_elements(x)
        return np.tanh(host_p.bind(y)) + 1.0
    x = np.linspace(0.0, 1.0, 40)
    with option("xla_placement", "auto"):
        split = xform.describe_split(xform.split_graph(f)(x)).splitlines()
        assert split[0].startswith("xla: ") and split[1:] == [
            "host: host_only_twice", "host: tanh", "host: add"]
        got = xform.jit(f, backend="xla")(x)
    np.testing.assert_allclose(got, np.tanh(2 * _loop_over_elements(x)) + 1.0, rtol=1e-12)


@pytest.mark.parametrize("on_cpu", [True, False])
def test_matrix_products_and_factorizations_stay_on_numpy_when_xla_runs_on_the_cpu(
        monkeypatch, on_cpu):
    # On a CPU, numpy's BLAS and LAPACK beat XLA's kernels: the element-wise work around
    # them does not pay for that; on another device it does.
    monkeypatch.setattr(xla, "_xla_on_cpu", lambda: on_cpu)
    a = np.random.default_rng(0).standard_normal((200, 200))

    def products(w):
        return np.sum(np.tanh(w @ a) @ a)

    def factorization(w):
        return np.sum(np.linalg.cholesky(w @ w.T + 200.0 * np.eye(200)))
    with option("xla_placement", "auto"):
        for f in (products, factorization):
            assert bool(_segments(xform.split_graph(xform.grad(f))(a))) != on_cpu


def test_jax_arrays_go_to_xla_however_small_the_graph():
    def f(v):
        return np.sum(np.sin(v) ** 2)
    gradient = xform.grad(f, backend="xla")
    with jax.enable_x64(True):
        x = jnp.linspace(0.0, 1.0, 4)
    calls = []
    real_call = xla.Executable.__call__
    with option("xla_placement", "auto"), pytest.MonkeyPatch.context() as patch:
        patch.setattr(xla.Executable, "__call__",
                      lambda self, *args: calls.append(self) or real_call(self, *args))
        for _ in range(2):      # the uncached path, then the cached one
            out = gradient(x)
            assert isinstance(out, jax.Array) and out.devices() == x.devices()
        assert len(calls) == 2
        on_host = gradient(np.asarray(x))       # numpy arguments: the cost model decides
        assert type(on_host) is np.ndarray and len(calls) == 2
        assert _segments(xform.split_graph(xform.grad(f))(x))
        assert not _segments(xform.split_graph(xform.grad(f))(np.asarray(x)))
    np.testing.assert_allclose(out, on_host, rtol=1e-12)
    np.testing.assert_allclose(on_host, np.sin(2 * np.asarray(x)), rtol=1e-12)


def test_an_unknown_placement_is_an_error():
    with pytest.raises(ValueError, match="xla_placement"):
        xform.config.update("xla_placement", "sometimes")


# == loops over elements, re-rolled =============================================================

def _compiled_operations(split):
    """How many operations jax stages for the XLA segments of `split`."""
    total = 0
    for eqn in _segments(split):
        specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in eqn.inputs]
        with jax.enable_x64(True):
            total += len(eqn.params["executable"].jitted.trace(*specs).jaxpr.eqns)
    return total


def test_a_loop_over_elements_is_compiled_as_one_chain_of_vector_operations():
    split = xform.split_graph(xform.grad(_loop_over_elements))(np.linspace(0.0, 1.0, 60))
    equations = sum(len(eqn.params["graph"].equations) for eqn in _segments(split))
    assert equations >= 300
    assert _compiled_operations(split) < 30


_W = np.array([0.5, -1.0, 2.0])


@pytest.mark.parametrize("loop", [
    # lanes read in no order a slice can take
    lambda x: sum(np.sin(x[i]) * x[j] for i, j in zip([3, 0, 5, 1], [2, 6, 0, 4])),
    # a lane times a vector every iteration shares: lanes broadcast against it
    lambda x: np.sum(sum(np.tanh(x[i] * _W) for i in range(x.shape[0]))),
    # windows of two elements (stacked), then one element of a row each
    lambda x: sum(np.sum(np.exp(x[i:i + 2])) for i in range(x.shape[0] - 1)),
    lambda x: sum(np.sin(np.reshape(x, (7, 1))[i, 0]) for i in range(0, 7, 2)),
])
def test_re_rolled_loops_agree_with_numpy(loop):
    x = np.linspace(-0.7, 1.3, 7)
    for transform in (xform.jit, xform.grad):
        got, want = _on_both(lambda: transform(loop)(x))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_a_group_xla_cannot_run_as_vectors_runs_one_equation_at_a_time():
    _, jnp_, _ = xla._jax()
    scalar_p = xform.Primitive("scalar_only_double")
    xform.extend.register(scalar_p, impl=lambda x: x * 2.0, abstract_eval=lambda x: x,
                          elementwise=True,
                          hooks={"xla": lambda x: jnp_.reshape(x, ()) * 2.0})

    def f(x):
        return sum(np.sin(scalar_p.bind(x[i])) for i in range(x.shape[0]))
    x = np.linspace(-1.0, 1.0, 5)
    split = xform.split_graph(f)(x)
    assert xform.describe_split(split).startswith("xla: ")
    np.testing.assert_allclose(xform.jit(f, backend="xla")(x), np.sum(np.sin(2 * x)),
                               rtol=1e-12)


def _primitive_names(jaxpr) -> list:
    """The primitives of `jaxpr`'s equations, those of the jaxprs in their params too."""
    names = []
    for eqn in jaxpr.eqns:
        names.append(eqn.primitive.name)
        for value in eqn.params.values():
            inner = getattr(value, "jaxpr", value)
            if hasattr(inner, "eqns"):
                names += _primitive_names(inner)
    return names


def test_a_gradient_through_solve_factors_its_matrix_once():
    y = np.linspace(-1.0, 1.0, 6)

    def f(a):
        return np.sum(y * np.linalg.solve(a @ a.T + 6.0 * np.eye(6), y))
    a = np.random.default_rng(0).standard_normal((6, 6))
    split = xform.split_graph(xform.grad(f))(a)
    assert sum(e.primitive.name == "solve" for e in _segments(split)[0].params["graph"]
               .equations) == 2
    (segment,) = _segments(split)
    with jax.enable_x64(True):
        jaxpr = segment.params["executable"].jitted.trace(
            *[jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in segment.inputs]).jaxpr
    assert _primitive_names(jaxpr).count("lu") == 1
    got, want = _on_both(lambda: xform.grad(f)(a))
    np.testing.assert_allclose(got, want, rtol=1e-10)
