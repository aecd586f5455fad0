"""xform.checkpoint: values and derivatives as without it (every policy, every order), what
the forward pass keeps (only inputs and what the policy saves), recomputation that survives
the passes, and loop bodies keeping one carry per iteration."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given

import xform
from xform.passes import optimize
from xform.rules.checkpoint import remat_p
from xform.testing import check_grads
from xform.testing import strategies as xst
from xform.transforms.derived import vjp_split

policies = xform.checkpoint_policies
POLICIES = {"None": None, "nothing": policies.nothing_saveable,
            "everything": policies.everything_saveable, "dots": policies.dots_saveable,
            "names": policies.save_only_these_names("hidden")}
W = np.array([[0.5, -1.0, 0.3], [0.2, 0.4, -0.7], [1.1, 0.1, 0.6]])


def layer(x):
    hidden = xform.checkpoint_name(np.tanh(W @ x), "hidden")
    return np.sin(hidden) * x


def layer_autograd(x):
    return anp.sin(anp.tanh(anp.dot(W, x))) * x


@pytest.mark.parametrize("policy", POLICIES)
@given(xst.arrays((3,), low=-1.5, high=1.5))
def test_derivatives_are_those_of_the_function(policy, x):
    f = xform.checkpoint(layer, policy=POLICIES[policy])
    np.testing.assert_allclose(f(x), layer_autograd(x))
    np.testing.assert_allclose(xform.jacrev(f)(x), autograd.jacobian(layer_autograd)(x),
                               rtol=1e-12, atol=1e-12)
    check_grads(f, (x,), order=2)
    scalar = lambda x: np.sum(f(x))    # noqa: E731
    np.testing.assert_allclose(xform.hessian(scalar)(x),
                               autograd.hessian(lambda x: anp.sum(layer_autograd(x)))(x),
                               rtol=1e-10, atol=1e-12)


def residual_avals(fun, x):
    """The avals of what the forward pass of fun's vjp keeps for the backward pass."""
    graph = xform.make_graph(fun)(x)
    forward, _ = vjp_split(graph)
    return [a.aval for a in forward.outputs[len(graph.outputs):]]


def test_the_forward_pass_keeps_only_what_the_policy_saves():
    x = np.array([0.1, 0.2, 0.3])
    plain = residual_avals(layer, x)
    assert len(plain) > 2       # tanh, sin and cos values, W transposed, ...
    kept = {name: residual_avals(xform.checkpoint(layer, policy=p), x)
            for name, p in POLICIES.items()}
    vector = xform.ShapedArray((3,), np.dtype(np.float64))
    # The inputs only: x, W (a constant of the graph has no residual).
    assert kept["None"] == kept["nothing"] == [vector]
    # The input and the one saved value (W @ x, or the named tanh).
    assert kept["dots"] == kept["names"] == [vector, vector]
    assert kept["everything"] == plain      # as without checkpoint


def test_the_backward_pass_recomputes_in_one_opaque_equation_the_passes_keep():
    f = xform.checkpoint(lambda x: np.sin(np.sin(x)))
    graph = optimize(xform.make_graph(xform.value_and_grad(f))(0.5))
    remats = [e for e in graph.equations if e.primitive is remat_p]
    assert len(remats) == 2      # forward, and backward recomputing sin(x) (CSE kept both)
    backward = remats[1].params["graph"]
    names = [e.primitive.name for e in backward.equations]
    assert names.count("sin") == 1 and names.count("cos") == 2     # sin(x) recomputed
    assert xform.value_and_grad(f)(0.5) == pytest.approx(
        (np.sin(np.sin(0.5)), np.cos(np.sin(0.5)) * np.cos(0.5)))


def test_a_checkpointed_scan_body_keeps_one_carry_per_iteration():
    def body(c, s):
        h = np.tanh(np.outer(c, np.linspace(0.0, 0.1, 40)) * s)    # 40x larger than the carry
        return c + 0.1 * (h @ np.ones(40)), None

    def run(step):
        return lambda c: np.sum(xform.scan(step, c, np.linspace(0.1, 1.0, 7))[0])
    c = np.linspace(-0.5, 0.5, 5)
    plain, remat = run(body), run(xform.checkpoint(body))
    np.testing.assert_allclose(xform.grad(remat)(c), xform.grad(plain)(c), rtol=1e-12)
    stacked = residual_avals(remat, c)
    assert sorted(a.shape for a in stacked) == [(7,), (7, 5)]    # the xs and the carries
    assert max(a.size for a in residual_avals(plain, c)) >= 7 * 5 * 40
    check_grads(remat, (c,), order=2)


def test_checkpoint_composes_under_vmap_jit_and_in_fori_loop():
    f = xform.checkpoint(lambda x, y: np.sin(x) * y)
    xs = np.linspace(0.0, 1.0, 4)
    np.testing.assert_allclose(xform.vmap(xform.grad(f))(xs, xs), np.cos(xs) * xs)
    np.testing.assert_allclose(xform.jit(xform.grad(f))(0.3, 2.0), np.cos(0.3) * 2.0)
    loop = lambda x: xform.fori_loop(0, 3, lambda i, c: f(c, x), x)   # noqa: E731

    def reference(x):
        c = x
        for _ in range(3):
            c = anp.sin(c) * x
        return c
    assert xform.grad(loop)(0.7) == pytest.approx(autograd.grad(reference)(0.7), rel=1e-12)


def test_eager_calls_static_arguments_and_closures():
    f = xform.remat(lambda x, n: np.sin(x) * n, static_argnums=1)
    assert f(0.5, 3) == np.sin(0.5) * 3
    assert xform.grad(f)(0.5, 3) == pytest.approx(3 * np.cos(0.5))
    assert xform.checkpoint_name(2.0, "a") == 2.0

    def outer(x):
        return xform.checkpoint(lambda y: np.sin(x * y))(2.0)     # closes over traced x
    assert xform.grad(outer)(0.3) == pytest.approx(2 * np.cos(0.6))

    @xform.checkpoint(policy=policies.dots_saveable)
    def decorated(x):
        return np.exp(x)
    assert xform.grad(decorated)(0.0) == pytest.approx(1.0)


def test_errors_name_the_cause():
    with pytest.raises(xform.TypeCheckError, match="checkpoint needs a function"):
        xform.checkpoint(3)
    with pytest.raises(xform.TypeCheckError, match="policy must be None or a function"):
        xform.checkpoint(np.sin, policy="dots")


def test_a_policy_on_a_function_reverse_mode_cannot_differentiate_stages_and_runs():
    no_rules = xform.Primitive("no_derivative_rules")
    no_rules.def_impl(np.sin)
    no_rules.def_abstract_eval(lambda a: a)
    f = xform.checkpoint(lambda x: no_rules.bind(x) * 2.0, policy=policies.dots_saveable)
    assert xform.jit(f)(1.0) == pytest.approx(2.0 * np.sin(1.0))
    with pytest.raises(xform.MissingRuleError):
        xform.grad(f)(1.0)
