"""Jacobians and Hessians of pytree inputs and outputs are laid out as JAX lays them out: the
output tree with each leaf replaced by the input tree (a tuple of them for tuple argnums;
nested once more for hessian), each block shaped out.shape + in.shape. The reference here is
a finite-difference Jacobian built leaf by leaf, independently of xform's transforms."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.testing import strategies as xst
from xform.tree import tree_flatten, tree_structure, tree_unflatten

EPS = 1e-6


def _perturbed(args, argnums, k, index, delta):
    """`args` with element `index` of the k-th differentiated leaf moved by `delta`."""
    nums = (argnums,) if isinstance(argnums, int) else argnums
    leaves, tree = tree_flatten(tuple(args[n] for n in nums))
    leaf = np.array(leaves[k], dtype=np.float64)
    leaf[index] += delta
    leaves[k] = leaf if leaf.shape else leaf[()]
    values = list(args)
    for n, value in zip(nums, tree_unflatten(tree, leaves)):
        values[n] = value
    return values


def fd_jacobian(f, args, argnums=0):
    """Central differences, laid out output tree -> argument tree -> out.shape + in.shape."""
    nums = (argnums,) if isinstance(argnums, int) else argnums
    in_leaves, in_tree = tree_flatten(tuple(args[n] for n in nums))
    out_leaves, out_tree = tree_flatten(f(*args))
    blocks = [[np.zeros(np.shape(o) + np.shape(x)) for x in in_leaves] for o in out_leaves]
    for k, x in enumerate(in_leaves):
        for index in np.ndindex(np.shape(x)):
            plus = tree_flatten(f(*_perturbed(args, argnums, k, index, EPS)))[0]
            minus = tree_flatten(f(*_perturbed(args, argnums, k, index, -EPS)))[0]
            for o, (p, m) in enumerate(zip(plus, minus)):
                column = (np.asarray(p) - np.asarray(m)) / (2 * EPS)
                blocks[o][k][(Ellipsis,) + index] = column
    per_output = []
    for o in range(len(out_leaves)):
        trees = tree_unflatten(in_tree, blocks[o])
        per_output.append(trees[0] if isinstance(argnums, int) else trees)
    return tree_unflatten(out_tree, per_output)


def assert_same_tree(got, want, rtol=1e-5, atol=1e-7):
    assert tree_structure(got) == tree_structure(want), (tree_structure(got),
                                                         tree_structure(want))
    for g, w in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def dict_in(p):
    return np.tanh(p["W"] * p["b"])


def list_in(p):
    return p[0] * p[1]


def nested(p, x):
    return {"y": np.sin(p["w"] @ x) + p["c"][0], "s": np.sum(p["c"][1] * x ** 2)}


def tuple_out(a, b):
    return (a * b, [np.sum(a), b ** 2])


CASES = [
    ("dict input (issue 16)", dict_in, lambda: ({"W": np.arange(1.0, 5.0), "b": 0.5},), 0),
    ("list input (issue 16)", list_in, lambda: ([np.arange(3.0), np.ones(3) * 1.5],), 0),
    ("nested, two arguments", nested,
     lambda: ({"w": np.ones((2, 3)) * 0.3, "c": (0.5, np.array([1.0, -1.0, 2.0]))},
              np.array([0.1, 0.2, -0.4])), (0, 1)),
    ("tuple output, scalar input", tuple_out, lambda: (np.array([1.0, 2.0]), 0.7), 1),
    ("tuple output, argnums tuple", tuple_out, lambda: (np.array([1.0, 2.0]), 0.7), (0, 1)),
    ("scalar to scalar", lambda x: x ** 3, lambda: (2.0,), 0),
]


@pytest.mark.parametrize("transform", [xform.jacfwd, xform.jacrev])
@pytest.mark.parametrize("name, f, make_args, argnums", CASES, ids=[c[0] for c in CASES])
def test_jacobian_layout_and_values(transform, name, f, make_args, argnums):
    args = make_args()
    got = transform(f, argnums=argnums)(*args)
    assert_same_tree(got, fd_jacobian(f, args, argnums))


def test_issue_examples_have_jax_structure():
    a, b = np.arange(3.0), np.ones(3) * 2.0
    jac = xform.jacrev(list_in)([a, b])
    assert isinstance(jac, list) and len(jac) == 2
    np.testing.assert_allclose(jac[0], np.diag(b))
    np.testing.assert_allclose(jac[1], np.diag(a))
    p = {"W": np.arange(1.0, 5.0), "b": 0.5}
    for transform in (xform.jacfwd, xform.jacrev):
        jac = transform(dict_in)(p)
        assert set(jac) == {"W", "b"}
        assert jac["W"].shape == (4, 4) and jac["b"].shape == (4,)


@given(xst.arrays((2,), low=-1.0, high=1.0), xst.arrays((3,), low=-1.0, high=1.0))
def test_jacobians_of_random_pytrees(w, v):
    params = {"w": w, "v": [v, float(w[0])]}

    def f(p):
        return {"a": p["w"][0] * p["v"][0], "b": (np.sum(np.cos(p["v"][0])) * p["v"][1],)}
    want = fd_jacobian(f, (params,))
    assert_same_tree(xform.jacfwd(f)(params), want)
    assert_same_tree(xform.jacrev(f)(params), want)


def test_hessian_of_a_dict_is_nested_twice():
    def f(p):
        return np.sum(p["a"] ** 2 * p["b"]) + np.sin(p["b"])
    p = {"a": np.array([1.0, -2.0]), "b": 0.3}
    hess = xform.hessian(f)(p)
    # The Hessian is the Jacobian of the gradient: finite differences of xform.grad.
    want = fd_jacobian(xform.grad(f), (p,))
    assert_same_tree(hess, want, rtol=1e-5, atol=1e-6)
    assert hess["a"]["a"].shape == (2, 2) and np.shape(hess["b"]["b"]) == ()
    assert hess["a"]["b"].shape == (2,) and hess["b"]["a"].shape == (2,)


def test_hessian_with_argnums_tuple():
    def f(x, y):
        return np.sum(x ** 2 * y) + y ** 3
    x, y = np.array([1.0, 2.0]), 0.5
    hess = xform.hessian(f, argnums=(0, 1))(x, y)
    want = fd_jacobian(xform.grad(f, argnums=(0, 1)), (x, y), (0, 1))
    assert_same_tree(hess, want, rtol=1e-5, atol=1e-6)
    assert isinstance(hess, tuple) and isinstance(hess[0], tuple)


@pytest.mark.parametrize("transform", [xform.jacfwd, xform.jacrev, xform.hessian])
def test_has_aux(transform):
    def f(x):
        return np.sum(np.sin(x) * x), {"norm": np.sum(x ** 2)}
    x = np.array([0.5, -1.0])
    jac, aux = transform(f, has_aux=True)(x)
    np.testing.assert_allclose(aux["norm"], 1.25)
    order = 2 if transform is xform.hessian else 1
    main = lambda x: f(x)[0]  # noqa: E731
    reference = fd_jacobian(xform.grad(main), (x,)) if order == 2 else \
        fd_jacobian(main, (x,))
    np.testing.assert_allclose(jac, reference, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("transform", [xform.jacfwd, xform.jacrev, xform.hessian])
def test_jacobians_are_cached_per_signature(transform):
    calls = []

    def f(p):
        calls.append(1)
        return np.sum(np.sin(p["a"]) * p["b"])
    jac = transform(f)
    p = {"a": np.ones(3), "b": 2.0}
    first = jac(p)
    n_calls = len(calls)
    second = jac({"a": np.ones(3) * 0.5, "b": 1.0})
    assert len(calls) == n_calls    # the second call ran compiled code
    assert_same_tree(second, fd_jacobian(xform.grad(f) if transform is xform.hessian else f,
                                         ({"a": np.ones(3) * 0.5, "b": 1.0},)),
                     rtol=1e-5, atol=1e-6)
    assert tree_structure(first) == tree_structure(second)


def test_jacobians_compose_with_vmap_and_jit():
    def f(p):
        return np.tanh(p["W"] * p["b"])
    ps = {"W": np.arange(6.0).reshape(2, 3) / 6.0, "b": np.array([0.5, 2.0])}
    batched = xform.vmap(xform.jacrev(f))(ps)
    for i in range(2):
        one = {"W": ps["W"][i], "b": ps["b"][i]}
        assert_same_tree({k: v[i] for k, v in batched.items()}, fd_jacobian(f, (one,)))
    jitted = xform.jit(xform.jacfwd(f))({"W": ps["W"][0], "b": 0.5})
    assert_same_tree(jitted, fd_jacobian(f, ({"W": ps["W"][0], "b": 0.5},)))


def test_agrees_with_jax_when_installed():
    """JAX is an optional peer: the layout must be JAX's own."""
    jax = pytest.importorskip("jax", reason="JAX is an optional peer, not a dependency")
    jnp = jax.numpy
    p = {"W": np.arange(1.0, 5.0), "b": 0.5}
    with jax.enable_x64(True):    # scoped: other tests run with JAX's default (x64 off)
        for ours, theirs in ((xform.jacfwd, jax.jacfwd), (xform.jacrev, jax.jacrev)):
            got = ours(dict_in)(p)
            want = theirs(lambda q: jnp.tanh(q["W"] * q["b"]))(p)
            assert_same_tree(got, jax.tree_util.tree_map(np.asarray, want))


@pytest.mark.parametrize("transform", [xform.jacfwd, xform.jacrev])
@given(st.sampled_from([(), (1,), (2, 2)]), st.sampled_from([(), (3,), (1, 2)]))
def test_block_shapes_are_out_shape_plus_in_shape(transform, out_shape, in_shape):
    def f(x):
        return np.full(out_shape, 1.0) * np.sum(x * x)
    x = np.linspace(0.5, 1.0, int(np.prod(in_shape))).reshape(in_shape)
    jac = transform(f)(x)
    assert np.shape(jac) == out_shape + in_shape
    np.testing.assert_allclose(jac, fd_jacobian(f, (x,)), rtol=1e-5, atol=1e-7)
