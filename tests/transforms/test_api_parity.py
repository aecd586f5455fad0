"""JAX's transform API under the same names and signatures: holomorphic= and allow_int= on
the derivatives, has_aux on jvp and vjp, jit(static_argnames=), linear_transpose,
eval_shape, closure_convert, custom_jvp.defjvps, and xform.tree as JAX's tree_util
(key paths, register_pytree_node, register_dataclass), with key paths in error messages."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given

import xform
from xform.testing import numerical_jvp
from xform.testing import strategies as xst
from xform.tree import (DictKey, GetAttrKey, SequenceKey, keystr, register_dataclass,
                        register_pytree_node, tree_flatten, tree_flatten_with_path,
                        tree_leaves, tree_map, tree_map_with_path, tree_structure,
                        tree_unflatten)


# -- holomorphic and allow_int ----------------------------------------------------------------

@pytest.mark.parametrize("transform", [xform.grad, xform.value_and_grad, xform.jacrev])
def test_integer_inputs_need_allow_int(transform):
    with pytest.raises(xform.TypeCheckError, match="allow_int"):
        transform(lambda x, n: x * n, argnums=1)(2.0, np.int64(3))
    result = transform(lambda x, n: x * n, argnums=1, allow_int=True)(2.0, np.int64(3))
    grad_n = result[1] if transform is xform.value_and_grad else result
    assert grad_n.dtype == xform.float0


@pytest.mark.parametrize("transform", [xform.grad, xform.jacrev, xform.jacfwd])
def test_complex_output_needs_holomorphic(transform):
    with pytest.raises(xform.TypeCheckError, match="holomorphic=True"):
        transform(lambda z: z * 2.0)(np.complex128(1.0 + 1.0j))


@pytest.mark.parametrize("transform", [xform.grad, xform.jacrev, xform.jacfwd])
def test_holomorphic_needs_complex_inputs(transform):
    with pytest.raises(xform.TypeCheckError, match="complex inputs"):
        transform(lambda x: x * 2.0, holomorphic=True)(1.0)


@pytest.mark.parametrize("transform", [xform.grad, xform.jacrev, xform.jacfwd])
def test_holomorphic_derivative_is_f_prime(transform):
    # z**2 + 3z is holomorphic: the derivative is 2z + 3, not its conjugate.
    z = np.complex128(0.5 - 1.5j)
    got = transform(lambda z: z * z + 3.0 * z, holomorphic=True)(z)
    np.testing.assert_allclose(got, 2 * z + 3.0)


# -- has_aux ----------------------------------------------------------------------------------

def test_jvp_has_aux():
    def f(x):
        return np.sin(x) * x, {"square": x * x, "n": 3}
    x, t = np.array([0.3, 1.2]), np.array([1.0, -0.5])
    out, tangent, aux = xform.jvp(f, (x,), (t,), has_aux=True)
    np.testing.assert_allclose(out, np.sin(x) * x)
    np.testing.assert_allclose(tangent, numerical_jvp(lambda x: f(x)[0], (x,), (t,), 1e-6)[0],
                               rtol=1e-6)
    np.testing.assert_allclose(aux["square"], x * x)
    assert aux["n"] == 3
    with pytest.raises(xform.TypeCheckError, match="has_aux"):
        xform.jvp(lambda x: x, (1.0,), (1.0,), has_aux=True)


def test_vjp_has_aux():
    out, vjp_fn, aux = xform.vjp(lambda x: (x ** 2, x + 1.0), 3.0, has_aux=True)
    assert (out, aux, vjp_fn(1.0)) == (9.0, 4.0, (6.0,))


# -- jit static_argnames ----------------------------------------------------------------------

def test_jit_static_argnames_by_name_and_by_position():
    def head(x, n, *, reverse=False):
        return x[::-1][:n] if reverse else x[:n]
    f = xform.jit(head, static_argnames=("n", "reverse"))
    x = np.arange(5.0)
    np.testing.assert_array_equal(f(x, 2), x[:2])
    np.testing.assert_array_equal(f(x, n=3), x[:3])
    np.testing.assert_array_equal(f(x, n=2, reverse=True), [4.0, 3.0])
    # As in JAX, jit traces what is not named static; unlike JAX, the slice bound is read
    # from the call's value (guarded: another n takes another path)
    traced = xform.jit(head)
    np.testing.assert_array_equal(traced(x, 2), x[:2])
    np.testing.assert_array_equal(traced(x, 4), x[:4])
    with pytest.raises(xform.ConcretizationError):      # a staging without values
        xform.make_graph(head)(x, xform.ShapedArray((), np.int64))


# -- linear_transpose -------------------------------------------------------------------------

@given(xst.arrays((3, 2), low=-2.0, high=2.0), xst.arrays((3,), low=-2.0, high=2.0))
def test_linear_transpose_is_the_matrix_transpose(a, ct):
    transpose = xform.linear_transpose(lambda x: a @ x, np.zeros(2))
    (got,) = transpose(ct)
    np.testing.assert_allclose(got, a.T @ ct, rtol=1e-12, atol=1e-12)


def test_linear_transpose_of_pytrees_satisfies_the_dot_product_identity():
    def f(p):
        return {"sum": 2.0 * p["x"][:2] - p["y"], "y": 3.0 * p["y"]}
    primal = {"x": np.array([0.5, 1.0, -2.0]), "y": np.array([1.0, 4.0])}
    ct = {"sum": np.array([1.0, -1.0]), "y": np.array([0.5, 2.0])}
    (ct_in,) = xform.linear_transpose(f, primal)(ct)
    lhs = sum(np.vdot(a, b) for a, b in zip(tree_leaves(f(primal)), tree_leaves(ct)))
    rhs = sum(np.vdot(a, b) for a, b in zip(tree_leaves(primal), tree_leaves(ct_in)))
    assert lhs == pytest.approx(rhs)


def test_linear_transpose_refuses_a_non_linear_function():
    with pytest.raises(xform.TypeCheckError, match="not linear"):
        xform.linear_transpose(np.sin, 1.0)(1.0)
    with pytest.raises(xform.TypeCheckError, match="not linear"):
        xform.linear_transpose(lambda x: x * x, 1.0)(1.0)


# -- eval_shape -------------------------------------------------------------------------------

def test_eval_shape_matches_the_computed_shapes():
    def f(x, y):
        return {"m": x @ y, "s": (np.sum(x, axis=0), x.astype(np.float32))}
    x, y = np.ones((2, 3)), np.ones((3, 4))
    shapes = xform.eval_shape(f, xform.ShapedArray((2, 3), np.dtype(np.float64)), y)
    real = f(x, y)
    assert tree_structure(shapes) == tree_structure(real) or \
        tree_flatten(shapes, is_leaf=lambda s: isinstance(s, xform.ShapedArray))[1] == \
        tree_structure(real)
    for s, r in zip(tree_flatten(shapes, is_leaf=lambda s: isinstance(s, xform.ShapedArray))[0],
                    tree_leaves(real)):
        assert (s.shape, s.dtype) == (r.shape, r.dtype)


# -- closure_convert --------------------------------------------------------------------------

def test_closure_convert_hoists_traced_closures_for_a_custom_vjp():
    def loss(w, x):
        converted, consts = xform.closure_convert(lambda x: np.sin(w * x), x)
        assert len(consts) == 1    # w, traced by grad

        @xform.custom_vjp
        def apply(x, *consts):
            return converted(x, *consts)

        def fwd(x, *consts):
            return apply(x, *consts), (x, consts)

        def bwd(res, ct):
            x, consts = res
            _, pullback = xform.vjp(converted, x, *consts)
            return pullback(ct)
        apply.defvjp(fwd, bwd)
        return apply(x, *consts)
    w, x = 0.7, 1.3
    np.testing.assert_allclose(xform.grad(loss)(w, x), x * np.cos(w * x))
    np.testing.assert_allclose(xform.grad(loss, 1)(w, x), w * np.cos(w * x))


def test_closure_convert_outside_transforms_has_no_consts():
    converted, consts = xform.closure_convert(lambda x: x * 2.0 + 1.0, 1.0)
    assert consts == [] and converted(4.0) == 9.0


# -- custom_jvp.defjvps -----------------------------------------------------------------------

def test_defjvps_sums_one_rule_per_argument():
    f = xform.custom_jvp(lambda x, y: np.sin(x) * y)
    f.defjvps(lambda t, out, x, y: np.cos(x) * y * t, lambda t, out, x, y: np.sin(x) * t)
    x, y = 0.4, 1.7
    gx, gy = xform.grad(f, argnums=(0, 1))(x, y)
    assert gx == pytest.approx(np.cos(x) * y) and gy == pytest.approx(np.sin(x))
    _, tangent = xform.jvp(f, (x, y), (0.5, -2.0))
    assert tangent == pytest.approx(np.cos(x) * y * 0.5 + np.sin(x) * -2.0)


def test_defjvps_with_none_is_a_zero_contribution():
    f = xform.custom_jvp(lambda x, y: x * y)
    f.defjvps(None, lambda t, out, x, y: x * t)
    assert xform.grad(f, argnums=(0, 1))(2.0, 3.0) == (0.0, 2.0)


# -- xform.tree as JAX's tree_util ------------------------------------------------------------

@dataclasses.dataclass
class Layer:
    w: object
    b: object
    activation: str = dataclasses.field(default="tanh", metadata=dict(static=True))


register_dataclass(Layer)


class Box:
    def __init__(self, value, label):
        self.value, self.label = value, label


register_pytree_node(Box, lambda b: ((b.value,), b.label), lambda label, c: Box(c[0], label))


def test_key_paths_name_every_kind_of_node():
    tree = {"layers": [Layer(np.ones(2), 0.5)], "box": Box(1.0, "x"), "pair": (2.0, None)}
    pairs, treedef = tree_flatten_with_path(tree)
    paths = [keystr(path) for path, _ in pairs]
    assert paths == ["['box'][<flat index 0>]", "['layers'][0].w", "['layers'][0].b",
                     "['pair'][0]"]
    assert [leaf for _, leaf in pairs] == tree_leaves(tree)
    assert treedef == tree_structure(tree)
    assert pairs[1][0] == (DictKey("layers"), SequenceKey(0), GetAttrKey("w"))


def test_register_dataclass_keeps_meta_fields_in_the_structure():
    a, b = Layer(1.0, 2.0, "relu"), Layer(1.0, 2.0, "tanh")
    assert tree_leaves(a) == [1.0, 2.0]
    assert tree_structure(a) != tree_structure(b)
    rebuilt = tree_unflatten(tree_structure(a), [3.0, 4.0])
    assert (rebuilt.w, rebuilt.b, rebuilt.activation) == (3.0, 4.0, "relu")
    g = xform.grad(lambda layer: np.sum(np.tanh(layer.w) * layer.b))(Layer(np.zeros(2), 2.0))
    assert isinstance(g, Layer) and g.activation == "tanh"
    np.testing.assert_allclose(g.w, [2.0, 2.0])


def test_register_dataclass_with_explicit_fields():
    @dataclasses.dataclass
    class Scaled:
        x: object
        scale: float

    register_dataclass(Scaled, data_fields=["x"], meta_fields=["scale"])
    assert tree_leaves(Scaled(np.ones(2), 3.0))[0].shape == (2,)
    assert len(tree_leaves(Scaled(np.ones(2), 3.0))) == 1


def test_tree_map_is_leaf_and_with_path():
    tree = {"a": (1.0, 2.0), "b": 3.0}
    assert tree_map(lambda x: len(x) if isinstance(x, tuple) else x, tree,
                    is_leaf=lambda x: isinstance(x, tuple)) == {"a": 2, "b": 3.0}
    assert tree_map_with_path(lambda path, x: keystr(path), tree) == \
        {"a": ("['a'][0]", "['a'][1]"), "b": "['b']"}


def test_key_paths_in_error_messages():
    with pytest.raises(xform.TreeMismatchError, match=r"at \['a'\]\[1\]"):
        tree_map(lambda x, y: x, {"a": [1.0, 2.0]}, {"a": [1.0, (2.0,)]})
    with pytest.raises(xform.TypeCheckError, match=r"args\[0\]\['b'\]\[1\]"):
        xform.jit(lambda p: p["a"])({"a": np.ones(2), "b": [1.0, "text"]})
    with pytest.raises(xform.TypeCheckError, match=r"args\[0\]\['b'\]"):
        xform.grad(lambda p: p["a"])({"a": 1.0, "b": "text"})


def test_tree_util_is_jax_spelling():
    assert xform.tree_util.tree_map is tree_map
    assert xform.tree_util.register_pytree_node is register_pytree_node


def test_vmap_in_axes_mismatch_names_the_key_path():
    with pytest.raises(xform.TreeMismatchError, match=r"at \[0\]\['b'\]"):
        xform.vmap(lambda p: p["a"], in_axes=({"a": 0, "b": (0, 1)},))(
            {"a": np.ones(2), "b": [np.ones(2), np.ones(2)]})
