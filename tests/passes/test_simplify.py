"""xform.passes.simplify: each rule of the table matches what it says, gives numpy's values
(to rounding: every rule so far reassociates, so "exact" runs none), keeps the graph checked,
and gradients through simplified graphs agree with autograd."""
import attrs
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.passes import dce
from xform.passes.simplify import RULES, simplify
from xform.testing import strategies as xst


@pytest.fixture(autouse=True)
def reassociating():
    """The rules that change rounding run only under config.algebra = "reassociate"."""
    xform.config.update("algebra", "reassociate")
    yield
    xform.config.update("algebra", "exact")


def kron_sum(a, b):
    return np.sum(np.kron(a, b))


def kron_view_sum(a, b):
    return np.sum(np.kron(a[:2, :2], np.triu(b)))


def reshape_sum(a, b):
    return np.sum(np.reshape(a * b, (-1,)))


def broadcast_sum(a, b):
    return np.sum(np.broadcast_to(a, (3,) + a.shape)) + np.sum(b)


def outer_sum(a, b):
    return np.sum(a[:, :, None, None] * b[None, None, :, :])


# rule name -> functions where it must fire (a, b: float arrays of the shapes drawn)
CASES = {
    "sum of an outer product": [kron_sum, kron_view_sum, outer_sum],
    "sum of a reshape": [kron_sum, reshape_sum],
    "sum of a broadcast": [broadcast_sum],
}


def test_every_rule_is_documented_and_tested():
    assert {rule.name for rule in RULES} == set(CASES)
    assert all(rule.doc and rule.exact in (True, False) for rule in RULES)


@pytest.mark.parametrize("name, fun", [(n, f) for n, fs in CASES.items() for f in fs])
@given(data=st.data())
def test_rule_fires_and_keeps_the_value(name, fun, data):
    shape = data.draw(xst.shapes(min_dims=2, max_dims=2, min_side=2, max_side=4))
    a = data.draw(xst.arrays(shape))
    b = data.draw(xst.arrays(shape if fun is reshape_sum else shape[::-1]))
    graph = xform.make_graph(fun)(a, b)
    fired = []

    def counted(rule):
        def rewrite(eqn, producer):
            new = rule.rewrite(eqn, producer)
            if new is not None:
                fired.append(rule.name)
            return new
        return attrs.evolve(rule, rewrite=rewrite)
    after = dce(simplify(graph, rules=[counted(rule) for rule in RULES]))
    after.check()
    assert name in fired, f"{name} did not fire on {fun.__name__}"
    want = fun(a, b)
    got = xform.eval_graph(after, a, b)[0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.sum(np.abs(a)) *
                               max(np.sum(np.abs(b)), 1.0))
    assert np.asarray(got).dtype == np.asarray(want).dtype


def test_sum_of_kron_never_builds_the_product():
    a, b = np.ones((20, 20)), np.ones((40, 40))
    after = dce(simplify(xform.make_graph(kron_sum)(a, b)))
    assert [e.primitive.name for e in after.equations] == ["sum", "sum", "multiply"]


def test_no_match_where_an_axis_spans_both_operands():
    graph = xform.make_graph(lambda a, b: np.sum(a * b))(np.ones((2, 3)), np.ones((2, 3)))
    assert simplify(graph) is graph


def test_exact_runs_no_reassociating_rule():
    graph = xform.make_graph(kron_sum)(np.ones((2, 2)), np.ones((3, 3)))
    assert all(not rule.exact for rule in RULES)
    assert simplify(graph, exact=True) is graph


@pytest.mark.parametrize("fun", [kron_sum, kron_view_sum, outer_sum])
@given(data=st.data())
def test_gradients_agree_with_autograd(fun, data):
    a = data.draw(xst.arrays((3, 2)))
    b = data.draw(xst.arrays((2, 3)))
    got = xform.grad(fun, (0, 1))(a, b)

    def anp_fun(a, b):  # the same function on autograd's numpy (kron via outer)
        if fun is kron_sum:
            return anp.sum(anp.kron(a, b))
        if fun is kron_view_sum:
            return anp.sum(anp.kron(a[:2, :2], anp.triu(b)))
        return anp.sum(a[:, :, None, None] * b[None, None, :, :])
    want = autograd.grad(anp_fun, (0, 1))(a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_config_algebra_exact_keeps_numpys_bits():
    a = np.linspace(0.1, 1.3, 9).reshape(3, 3)
    b = np.linspace(-1.1, 0.7, 16).reshape(4, 4)
    xform.config.update("algebra", "exact")
    try:
        assert xform.jit(kron_sum)(a, b) == kron_sum(a, b)  # bit for bit
        graph = xform.make_graph(xform.grad(kron_sum))(a, b)
    finally:
        xform.config.update("algebra", "reassociate")    # the fixture restores the default
    assert "kron" not in str(graph) and any(
        e.primitive.name == "multiply" and e.outputs[0].aval.ndim == 4 for e in graph.equations)
    with pytest.raises(ValueError, match="algebra"):
        xform.config.update("algebra", "fast")
