"""Random programs that decide on their data in Python (`if`, `while`, `range` of a traced int,
builtins, preallocate-and-fill), each transform called on several inputs in turn so that one
transformed object switches paths between calls: every call agrees with eager numpy (bit for
bit under jit), with finite differences, with autograd where it runs the program, and no lane
of a vmap whose lanes decide apart is wrong."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import xform
from xform.testing.programs import PYTHON_CONTROL_FLOW, programs
from tests.test_values import central_difference

STATEMENTS = PYTHON_CONTROL_FLOW + ("elementwise", "binary", "reduction", "where")
CALLS = 4   # inputs per program, each a new draw: paths change between calls


def _inputs(program):
    return [program.input(seed_offset=k) for k in range(CALLS)]


def _loss(program):
    return lambda x: np.sum(np.sin(program.fun(x)))


@pytest.fixture(autouse=True)
def fresh_cache():
    xform.clear_cache()
    yield
    xform.clear_cache()


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(programs(max_statements=5, statements=STATEMENTS))
def test_jit_switches_paths_and_keeps_numpys_bits(program):
    jitted = xform.jit(program.fun)
    for x in _inputs(program) * 2:   # every input twice: the second time, compiled
        expected = program.fun(x)
        got = jitted(x)
        np.testing.assert_array_equal(got, expected)
        assert np.result_type(got) == np.result_type(expected)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(programs(max_statements=4, statements=STATEMENTS))
def test_grad_switches_paths_and_matches_finite_differences(program):
    loss = _loss(program)
    grad = xform.grad(loss)
    for x in _inputs(program) * 2:
        np.testing.assert_allclose(grad(x), central_difference(loss, x), rtol=2e-5,
                                   atol=2e-6)
        if program.autograd_ok:
            expected = _autograd_gradient(program, x)
            if expected is not None:
                np.testing.assert_allclose(grad(x), expected, rtol=1e-10, atol=1e-12)


def _autograd_gradient(program, x):
    """autograd's gradient of the loss, which runs Python's control flow on its own values;
    None where autograd cannot run the program (no rule for cbrt, no broadcasting in
    np.where's gradient: its own errors)."""
    import autograd
    import autograd.numpy as anp
    reference = program.build(anp)
    try:
        return autograd.grad(lambda y: anp.sum(anp.sin(reference(y))))(x)
    except (NotImplementedError, ValueError):
        return None


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(programs(max_statements=4, statements=STATEMENTS))
def test_jvp_of_grad_switches_paths(program):
    loss = _loss(program)
    gradient = xform.grad(loss)
    for x in _inputs(program):
        direction = np.ones_like(x)
        _, hvp = xform.jvp(gradient, (x,), (direction,))

        def difference(eps):
            return (gradient(x + eps * direction) - gradient(x - eps * direction)) / (2 * eps)
        # Richardson's extrapolation of two central differences: their eps**2 error term
        # cancels (sin of a product of sums is steep enough for it to reach 2e-3 at 1e-5)
        expected = (4 * difference(5e-6) - difference(1e-5)) / 3
        np.testing.assert_allclose(hvp, expected, rtol=1e-4, atol=1e-5)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(programs(max_statements=4, statements=STATEMENTS))
def test_vmap_lanes_that_decide_apart_are_each_right(program):
    mapped = xform.vmap(program.fun)
    mapped_grad = xform.vmap(xform.grad(_loss(program)))
    for offset in range(2):
        xs = program.input(seed_offset=10 * offset, batch=3)
        expected = np.stack([program.fun(x) for x in xs])
        np.testing.assert_allclose(mapped(xs), expected, rtol=1e-14, atol=1e-14)
        grads = np.stack([xform.grad(_loss(program))(x) for x in xs])
        np.testing.assert_allclose(mapped_grad(xs), grads, rtol=1e-12, atol=1e-14)
