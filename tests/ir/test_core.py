"""The IR's data types: avals and weak types, Var identity, Params hashing, Graph identity/type."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.ir.avals import (ShapedArray, aval_of, broadcast_shapes, dtype_short, float0,
                            is_valid_value, tangent_aval)
from xform.ir.core import Equation, Graph, GraphType, Literal, Params, Primitive, Var
from xform.rules.unary import sin_p
from xform.testing import strategies as xst

F64 = np.dtype(np.float64)
F32 = np.dtype(np.float32)


# -- avals -------------------------------------------------------------------------------------

@pytest.mark.parametrize("aval, text", [
    (ShapedArray((3,), F64), "f64[3]"),
    (ShapedArray((2, 4), F32), "f32[2,4]"),
    (ShapedArray((), np.int32), "i32[]"),
    (ShapedArray((5,), np.uint8), "u8[5]"),
    (ShapedArray((1,), bool), "bool[1]"),
    (ShapedArray((), np.complex128), "c128[]"),
    (ShapedArray((), F64, weak_type=True), "~f64[]"),
    (ShapedArray((2,), float0), "float0[2]"),
])
def test_aval_short_form(aval, text):
    assert aval.str_short() == text
    assert repr(aval) == text


@given(xst.shapes(), st.sampled_from([np.float32, np.float64, np.int64, np.bool_]))
def test_aval_is_value_equal_and_hashable(shape, dtype):
    a, b = ShapedArray(list(shape), dtype), ShapedArray(shape, np.dtype(dtype))
    assert a == b and hash(a) == hash(b)
    assert a.shape == tuple(shape) and isinstance(a.shape, tuple)
    assert a.ndim == len(shape) and a.size == int(np.prod(shape))
    assert a != ShapedArray(shape, dtype, weak_type=True)
    assert {a: 1}[b] == 1


def test_aval_strengthen_and_update():
    weak = ShapedArray((), F64, weak_type=True)
    assert weak.strengthen() == ShapedArray((), F64)
    strong = ShapedArray((2,), F32)
    assert strong.strengthen() is strong
    assert strong.update(shape=(3,)) == ShapedArray((3,), F32)


@pytest.mark.parametrize("value, aval", [
    (1.0, ShapedArray((), F64, True)),
    (3, ShapedArray((), np.int64, True)),
    (1j, ShapedArray((), np.complex128, True)),
    (True, ShapedArray((), bool)),          # bools are never weak (numpy: bool + int -> int)
    (np.float32(1.0), ShapedArray((), F32)),
    (np.float64(1.0), ShapedArray((), F64)),
    (np.ones((2, 3), np.float32), ShapedArray((2, 3), F32)),
    (np.array(1.0), ShapedArray((), F64)),
])
def test_aval_of_concrete_values(value, aval):
    assert aval_of(value) == aval


@pytest.mark.parametrize("value, valid", [
    (1.0, True), (2, True), (True, True), (np.int8(1), True), (np.ones(3), True),
    ("a", False), (None, False), ([1.0], False), (np.array(["x"]), False),
    (np.array([None]), False),
])
def test_is_valid_value(value, valid):
    assert is_valid_value(value) is valid


def test_dtype_short_and_tangent_aval():
    assert dtype_short(np.int16) == "i16"
    assert dtype_short(float0) == "float0"
    assert tangent_aval(ShapedArray((2,), F32)) == ShapedArray((2,), F32)
    assert tangent_aval(ShapedArray((2,), np.int64)) == ShapedArray((2,), float0)
    assert tangent_aval(ShapedArray((), bool)).dtype == float0


# -- weak types through staging -----------------------------------------------------------------

def _out_aval(fun, *args):
    return xform.make_graph(fun)(*args).outputs[0].aval


def test_python_scalar_input_is_weak():
    assert _out_aval(lambda x: x, 1.0) == ShapedArray((), F64, weak_type=True)
    assert _out_aval(lambda x: x, np.float64(1.0)) == ShapedArray((), F64)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_weak_scalar_defers_to_array_dtype(dtype):
    out = _out_aval(lambda x, s: x * s, np.ones(3, dtype), 2.0)
    assert out == ShapedArray((3,), dtype)
    assert out.dtype == (np.ones(3, dtype) * 2.0).dtype


def test_results_of_weak_inputs_are_strong_as_numpy_returns_numpy_scalars():
    # Decision: staged arithmetic is a numpy ufunc call, and numpy returns a strong numpy
    # scalar even for Python-scalar inputs (np.add(1.0, 2.0) is np.float64).
    assert _out_aval(lambda a, b: a + b, 1.0, 2.0) == ShapedArray((), F64)
    assert _out_aval(lambda a, b: a + b, 1.0, np.float32(2.0)) == ShapedArray((), F32)
    assert _out_aval(lambda a, b: a + b, 1, 2.0) == ShapedArray((), F64)
    assert type(np.add(1.0, 2.0)) is np.float64


def test_literal_constant_in_staged_code_is_weak():
    graph = xform.make_graph(lambda x: x * 3.0)(np.ones(2, np.float32))
    (eqn,) = graph.equations
    literal = eqn.inputs[1]
    assert type(literal) is Literal and literal.value == 3.0
    assert literal.aval == ShapedArray((), F64, weak_type=True)
    assert eqn.outputs[0].aval == ShapedArray((2,), F32)


# -- Var, Literal, Primitive identity ---------------------------------------------------------

def test_var_equality_is_identity():
    aval = ShapedArray((3,), F64)
    a, b = Var(aval), Var(aval)
    assert a == a and a != b
    assert len({a, b, a}) == 2
    assert {a: 1, b: 2}[b] == 2
    assert not hasattr(a, "name")             # names are given by the printer
    assert repr(a) == "Var(f64[3])"


def test_var_is_immutable():
    var = Var(ShapedArray((), F64))
    with pytest.raises(AttributeError):
        var.aval = ShapedArray((), F32)


def test_literal_compares_by_identity():
    aval = ShapedArray((), F64, True)
    a, b = Literal(1.0, aval), Literal(1.0, aval)
    assert a != b and a == a
    assert repr(a) == "Literal(1.0)"


def test_primitive_identity_and_repr():
    p, q = Primitive("foo"), Primitive("foo")
    assert p != q and p == p and repr(p) == "foo"
    assert Primitive("bar", multiple_results=True).multiple_results


# -- Params -----------------------------------------------------------------------------------

def test_params_is_a_frozen_mapping():
    params = Params({"axes": (0, 1), "dtype": F32})
    assert dict(params) == {"axes": (0, 1), "dtype": F32}
    assert len(params) == 2 and params["axes"] == (0, 1)
    with pytest.raises(TypeError):
        params["axes"] = (1,)


@given(st.dictionaries(st.sampled_from("abcdef"),
                       st.one_of(st.integers(), st.none(), st.tuples(st.integers()),
                                 st.sampled_from([F32, F64, np.dtype(np.int8)]))))
def test_params_hash_follows_equality(items):
    a = Params(items)
    b = Params(dict(reversed(list(items.items()))))   # insertion order does not matter
    assert a == b and hash(a) == hash(b)
    assert {a: 1}[b] == 1


def test_params_lists_hash_like_tuples():
    assert hash(Params({"shape": [2, 3]})) == hash(Params({"shape": (2, 3)}))


def test_params_differ():
    assert Params({"axes": (0,)}) != Params({"axes": (1,)})
    assert Params({"axes": (0,)}) != {"axes": (0,)}


def test_params_with_graph_hash_by_identity():
    graph = xform.make_graph(np.sin)(1.0)
    assert hash(Params({"body": graph})) == hash(Params({"body": graph}))
    assert Params({"body": graph}) == Params({"body": graph})


def test_equation_converts_to_tuples_and_params():
    x = Var(ShapedArray((), F64))
    y = Var(ShapedArray((), F64))
    eqn = Equation(sin_p, [x], [y], {"k": 1})
    assert eqn.inputs == (x,) and eqn.outputs == (y,)
    assert isinstance(eqn.params, Params) and eqn.params["k"] == 1
    assert eqn.source is None
    assert repr(eqn) == "Equation(sin, 1 in, 1 out)"


# -- Graph ---------------------------------------------------------------------------------

def _sin_graph():
    x = Var(ShapedArray((3,), F64))
    y = Var(ShapedArray((3,), F64))
    return Graph([x], [], [Equation(sin_p, [x], [y])], [y])


def test_graph_hash_and_equality_are_identity():
    g1, g2 = _sin_graph(), _sin_graph()
    assert g1 == g1 and g1 != g2
    assert len({g1, g2}) == 2


def test_graph_type():
    graph = xform.make_graph(lambda x, y: (np.sin(x) * y, y))(np.ones(3), np.float32(2))
    assert graph.type == GraphType((ShapedArray((3,), F64), ShapedArray((), F32)),
                                   (ShapedArray((3,), F64), ShapedArray((), F32)))
    assert graph.in_avals == graph.type.in_avals
    assert graph.out_avals == graph.type.out_avals
    assert graph.type is graph.type                    # computed once


def test_graph_fields_are_tuples():
    graph = _sin_graph()
    for field in (graph.inputs, graph.consts, graph.equations, graph.outputs):
        assert isinstance(field, tuple)
    with pytest.raises(AttributeError):
        graph.inputs = ()


def test_graph_check_returns_self_and_str_is_listing():
    graph = _sin_graph()
    assert graph.check() is graph
    assert str(graph) == repr(graph)
    assert "= sin a" in str(graph)


@given(shape=xst.shapes(max_dims=3), dtype=xst.float_dtypes)
def test_equal_avals_of_staging_are_one_object(shape, dtype):
    # Staging's avals come from one memo, so the dicts keyed by avals (abstract evals' caches,
    # transposes' Undefined values) match them by identity rather than by ShapedArray.__eq__:
    # the inputs' avals of every staging of a signature, and element-wise results.
    x = np.ones(shape, dtype)
    first = xform.make_graph(lambda a: np.sin(np.cos(a)))(x)
    second = xform.make_graph(lambda a: np.cos(a) * 2.0)(x)
    assert first.inputs[0].aval is second.inputs[0].aval
    sin_out, cos_out = first.equations[1].outputs[0].aval, first.equations[0].outputs[0].aval
    assert sin_out == cos_out and sin_out is cos_out


def test_equations_without_parameters_share_one_empty_params():
    graph = xform.make_graph(lambda a: np.sin(np.cos(a)) + np.sum(a))(np.ones(3))
    sin_eqn, cos_eqn = graph.equations[1], graph.equations[0]
    assert not sin_eqn.params and sin_eqn.params is cos_eqn.params
    assert type(sin_eqn.params) is Params
    with pytest.raises(TypeError):
        sin_eqn.params["axes"] = (0,)   # shared, so it must stay immutable
    assert next(e for e in graph.equations if e.primitive.name == "sum").params["axes"] == (0,)


def test_holds_subgraphs_agrees_with_subgraphs():
    from xform.ir.core import holds_subgraphs, subgraphs
    graph = xform.make_graph(np.sin)(1.0)
    for params in [Params(), Params({"axes": (0, 1)}), Params({"body": graph}),
                   Params({"branches": (graph, graph)}), Params({"pair": (1, graph)}),
                   Params({"nested": ((graph,),)})]:   # (subgraphs looks one tuple deep)
        assert holds_subgraphs(params) is bool(list(subgraphs(params)))


@given(shapes=st.lists(st.lists(st.sampled_from([0, 1, 1, 2, 3]), max_size=4).map(tuple),
                       max_size=4))
def test_broadcast_shapes_is_numpys(shapes):
    try:
        expected = np.broadcast_shapes(*shapes)
    except ValueError:
        with pytest.raises(ValueError, match="cannot be broadcast to a single shape"):
            broadcast_shapes(*shapes)
        return
    assert broadcast_shapes(*shapes) == expected
