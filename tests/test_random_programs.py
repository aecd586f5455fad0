"""Differential tests of whole random programs (xform.testing.programs) against eager numpy,
finite differences and autograd; inputs are read-only and must come back unchanged, on
success and on failure; a failed staging leaves the cache as it was.

The ci profile runs a few programs per property (seconds); `XFORM_HYPOTHESIS=long` runs
LONG_EXAMPLES per property."""
import contextlib
import os
import sys
import warnings
import weakref

import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st

import xform
from xform.runtime.cache import CACHE
from xform.testing import check_grads, numerical_jvp, programs
from xform.testing.programs import DEFAULT_STATEMENTS, NOT_DIFFERENTIABLE_TO_FLOAT64

LONG = os.environ.get("XFORM_HYPOTHESIS") == "long"
LONG_EXAMPLES = int(os.environ.get("XFORM_PROGRAMS", "300"))
MAX_STATEMENTS = 10 if LONG else 6


def budget(ci_examples):
    """Hypothesis settings: `ci_examples` programs in the ci profile, many under long."""
    return settings(max_examples=LONG_EXAMPLES if LONG else ci_examples)


def _eager(program, x):
    """The program's eager result, as an array; a numpy warning fails the test (a generated
    program stays within its functions' domains)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return np.asarray(program.fun(x))


def _loss_weights(program):
    return np.random.default_rng(program.seed + 1).uniform(0.5, 1.5, program.out_shape)


def _loss(fun, weights, np_module=np):
    """A scalar of the program's output, for grad and hessian."""
    return lambda x: np_module.sum(fun(x) * weights)


def _assert_unchanged(x, copy):
    assert not x.flags.writeable
    np.testing.assert_array_equal(x, copy)


def _described(program):
    note(str(program))
    return program


@budget(6)
@given(programs(MAX_STATEMENTS).map(_described))
def test_jit_equals_eager_bit_for_bit(program):
    # The default scalar_math ("exact") promises numpy's bits (docs/ARCHITECTURE.md).
    x = program.input()
    copy = x.copy()
    want = _eager(program, x)
    got = xform.jit(program.fun)(x)
    assert np.asarray(got).dtype == want.dtype
    np.testing.assert_array_equal(got, want, strict=True)
    got_again = xform.jit(program.fun)(x)                       # the cached path
    np.testing.assert_array_equal(got_again, want, strict=True)
    with xform.config.debug_mode():        # every value against its abstract value
        np.testing.assert_array_equal(xform.jit(program.fun)(x), want, strict=True)
    _assert_unchanged(x, copy)


stateful_programs = programs(
    MAX_STATEMENTS, statements=(*DEFAULT_STATEMENTS, *["random_state"] * 3),
).filter(lambda p: "random_state" in p.features)


@budget(4)
@given(stateful_programs.map(_described), st.integers(1, 3))
def test_each_call_draws_as_eager_numpy_under_jit_and_vmap(program, batch):
    # Two copies of the program, each with its own generator in the same state.
    x = program.input()
    eager, compiled = program.build(), xform.jit(program.build())
    for _ in range(3):
        np.testing.assert_array_equal(compiled(x), eager(x), strict=True)
    xs = program.input(batch=batch)
    eager, mapped = program.build(), xform.vmap(program.build())
    for _ in range(2):
        np.testing.assert_allclose(mapped(xs), np.stack([eager(x) for x in xs]),
                                   rtol=1e-12, atol=1e-14)


@pytest.mark.filterwarnings("ignore:Output seems independent of input")   # autograd's
@budget(5)
@given(programs(MAX_STATEMENTS).map(_described))
def test_derivatives_agree_with_finite_differences_and_autograd(program):
    assume(not program.features & NOT_DIFFERENTIABLE_TO_FLOAT64)
    x = program.input()
    copy = x.copy()
    _eager(program, x)
    # jvp against finite differences, vjp against jvp (the dot-product identity)
    check_grads(program.fun, (x,), order=1, subject="program")
    _assert_unchanged(x, copy)
    weights = _loss_weights(program)
    loss = _loss(program.fun, weights)
    gradient = xform.grad(loss)(x)
    hessian = xform.hessian(loss)(x)
    _assert_unchanged(x, copy)
    direction = np.random.default_rng(program.seed + 2).standard_normal(x.shape)
    _assert_any_step_agrees(lambda eps: numerical_jvp(loss, (x,), (direction,), eps)[0],
                            np.sum(gradient * direction), "grad")
    np.testing.assert_allclose(xform.jacfwd(program.fun)(x), xform.jacrev(program.fun)(x),
                               rtol=1e-10, atol=1e-12)
    hvp = np.tensordot(hessian, direction, axes=x.ndim)
    _assert_any_step_agrees(
        lambda eps: numerical_jvp(xform.grad(loss), (x,), (direction,), eps)[0], hvp,
        "hessian")
    if program.autograd_ok:
        autograd_loss = _loss(program.build(anp), weights, anp)
        try:
            autograd_gradient = autograd.grad(autograd_loss)(np.array(x))
            autograd_hessian = autograd.hessian(autograd_loss)(np.array(x))
        except Exception as error:     # a rule autograd lacks: no oracle for this program
            note(f"autograd cannot differentiate it: {error!r}")
        else:
            np.testing.assert_allclose(gradient, autograd_gradient, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(hessian, autograd_hessian, rtol=1e-8, atol=1e-11)
    _assert_unchanged(x, copy)


def _assert_any_step_agrees(numeric, analytic, what, rtol=1e-5, atol=1e-5):
    errors = []
    for eps in (1e-3, 1e-4, 1e-5, 1e-6):
        estimate = numeric(eps)
        if np.allclose(analytic, estimate, rtol=rtol, atol=atol):
            return
        errors.append(float(np.max(np.abs(analytic - estimate))))
    raise AssertionError(f"{what} disagrees with finite differences: {analytic} vs "
                         f"{estimate} (max errors per step {errors})")


@budget(5)
@given(programs(MAX_STATEMENTS).map(_described), st.integers(1, 3), st.data())
def test_vmap_equals_a_python_loop(program, batch, data):
    axis = data.draw(st.integers(-len(program.shape) - 1, len(program.shape)), label="in_axes")
    xs = np.moveaxis(program.input(batch=batch), 0, axis)
    copy = xs.copy()
    want = np.stack([_eager(program, x) for x in np.moveaxis(xs, axis, 0)])
    got = xform.vmap(program.fun, in_axes=axis)(xs)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    _assert_unchanged(xs, copy)
    if program.features & NOT_DIFFERENTIABLE_TO_FLOAT64:
        return
    # per-example gradients: vmap of grad against a loop of grad
    loss = _loss(program.fun, _loss_weights(program))
    want = np.stack([xform.grad(loss)(x) for x in np.moveaxis(xs, axis, 0)])
    got = xform.vmap(xform.grad(loss), in_axes=axis)(xs)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    _assert_unchanged(xs, copy)


@budget(5)
@given(programs(MAX_STATEMENTS).map(_described))
def test_graph_restages_to_the_same_result(program):
    x = program.input()
    copy = x.copy()
    want = _eager(program, x)
    graph = xform.make_graph(program.fun)(x)
    text = str(graph)
    note(text)
    assert str(xform.make_graph(program.fun)(x)) == text         # printing is stable
    assert str(xform.make_graph(program.build())(x)) == text     # a fresh copy stages alike
    np.testing.assert_array_equal(xform.eval_graph(graph, x)[0], want, strict=True)
    restaged = xform.make_graph(lambda x: xform.eval_graph(graph, x)[0])(x)
    np.testing.assert_array_equal(xform.eval_graph(restaged, x)[0], want, strict=True)
    _assert_unchanged(x, copy)


@budget(5)
@given(programs(MAX_STATEMENTS).map(_described))
def test_optimised_graph_equals_unoptimised(program):
    x = program.input()
    copy = x.copy()
    graph = xform.make_graph(program.fun)(x)
    want = xform.eval_graph(graph, x)[0]
    for passes in (xform.passes.EXACT_PIPELINE, *((p,) for p in xform.passes.EXACT_PIPELINE)):
        optimised = xform.passes.optimize(graph, passes, checks=True)
        np.testing.assert_array_equal(xform.eval_graph(optimised, x)[0], want, strict=True,
                                      err_msg=f"passes {[p.__name__ for p in passes]}")
    reassociated = xform.passes.optimize(graph, xform.passes.PIPELINE, checks=True)
    np.testing.assert_allclose(xform.eval_graph(reassociated, x)[0], want, rtol=1e-12)
    # and the switches of the compiled path: fusion before reverse mode, on regions of any
    # size (a program's arrays are below the cost model's break-even)
    weights = _loss_weights(program)
    loss = _loss(program.fun, weights)
    with _fusing_any_size():
        fused = xform.grad(loss)(x)
        try:
            xform.config.update("fusion", False)
            unfused = xform.grad(loss)(x)
        finally:
            xform.config.update("fusion", True)
    np.testing.assert_allclose(fused, unfused, rtol=1e-12, atol=1e-14)
    _assert_unchanged(x, copy)


@budget(5)
@given(programs(MAX_STATEMENTS).map(_described), st.booleans())
def test_first_calls_compute_what_compiled_calls_compute_bit_for_bit(program, fuse_small):
    # A signature's first call is interpreted (gradients by their rules on concrete values),
    # later calls run compiled code (xform.runtime.tiers): a user calling twice must get the
    # same bits twice.
    x = program.input()
    weights = _loss_weights(program)
    direction = np.random.default_rng(program.seed + 2).standard_normal(x.shape)
    def copy():
        return lambda x: program.fun(x)

    fresh = {   # each a new function: nothing cached for it
        "jit": lambda: xform.jit(copy()),
        "grad": lambda: xform.grad(_loss(program.fun, weights)),
        "value_and_grad": lambda: xform.value_and_grad(_loss(program.fun, weights)),
        "vjp": lambda: (lambda f: lambda x: xform.vjp(f, x)[1](weights))(copy()),
        "jvp": lambda: (lambda f: lambda x: xform.jvp(f, (x,), (direction,)))(copy()),
        "vmap": lambda: (lambda f: lambda x: xform.vmap(f)(x[None]))(copy()),
        "hessian": lambda: xform.hessian(_loss(program.fun, weights)),
    }
    if program.features & NOT_DIFFERENTIABLE_TO_FLOAT64:
        fresh = {"jit": fresh["jit"], "vmap": fresh["vmap"]}
    with _fusing_any_size() if fuse_small else contextlib.nullcontext():
        for name, make in fresh.items():
            transformed = make()
            first, second = transformed(x), transformed(x)
            for a, b in zip(xform.tree.tree_leaves(first), xform.tree.tree_leaves(second)):
                np.testing.assert_array_equal(a, b, strict=True, err_msg=name)


@contextlib.contextmanager
def _fusing_any_size():
    fuse = sys.modules["xform.passes.fuse"]
    size = fuse.FUSION_MIN_SIZE
    fuse.FUSION_MIN_SIZE = 0
    xform.clear_cache()            # graphs built under the other threshold
    try:
        yield
    finally:
        fuse.FUSION_MIN_SIZE = size
        xform.clear_cache()


def _cache_keys():
    return list(CACHE._entries)


def _living(keys):
    """`keys` but those of functions that have died (their entries leave by design)."""
    return [key for key in keys if not isinstance(key[0], weakref.ref) or key[0]() is not None]


@budget(5)
@given(programs(MAX_STATEMENTS).map(_described), st.sampled_from(("if", "write")), st.data())
def test_a_failed_staging_changes_neither_the_cache_nor_the_input(program, kind, data):
    xform.clear_cache()        # no eviction (a full cache) mistaken for a lost entry
    x = program.input()
    copy = x.copy()
    position = data.draw(st.integers(0, program.statements - 1), label="position")
    failing, where = program.failing(position, kind)
    note(f"failing at {where}")
    weights = _loss_weights(program)
    transforms = {"jit": xform.jit(failing), "grad": xform.grad(_loss(failing, weights)),
                  "vmap": lambda x: xform.vmap(failing)(x[None]),
                  "jvp": lambda x: xform.jvp(failing, (x,), (np.ones_like(x),)),
                  "make_graph": xform.make_graph(failing)}
    error = xform.ConcretizationError if kind == "if" else xform.TypeCheckError
    for name, transformed in transforms.items():
        before = _cache_keys()
        with pytest.raises(error) as caught:
            transformed(x)
        assert where in str(caught.value), name
        after = _living(_cache_keys())
        before = _living(before)
        assert after == before, name           # nothing dropped, nothing added
        _assert_unchanged(x, copy)


# threaded_map's f must be element-wise: no reductions, control flow or custom rules
scalar_programs = programs(input_shapes=st.just(()),
                           statements=("elementwise", "binary", "where", "call"),
                           ).filter(lambda p: p.out_shape == ())


@budget(5)
@given(scalar_programs.map(_described), st.integers(1, 40))
def test_threaded_map_equals_a_loop_and_a_failed_one_leaves_out_unchanged(program, n):
    xs = np.random.default_rng(program.seed).uniform(-1.0, 1.0, n)
    xs.flags.writeable = False
    want = np.array([_eager(program, x) for x in xs])
    np.testing.assert_array_equal(
        xform.threaded_map(program.fun, xs, num_threads=2, chunk_size=7), want)
    out = np.full(n, 7.0)
    failing, _ = program.failing()
    with pytest.raises(xform.XformError):
        xform.threaded_map(failing, xs, out=out, num_threads=2, chunk_size=7)
    np.testing.assert_array_equal(out, np.full(n, 7.0))
    assert xform.threaded_map(program.fun, xs, out=out, num_threads=2, chunk_size=7) is out
    np.testing.assert_array_equal(out, want)
