"""Indexing: the rule battery on gather/scatter_add with random indices, staged x[index] against
numpy bit for bit over many index expressions, gradients that accumulate, vmap with batched
indices, np.take / np.take_along_axis / index_add, and the error paths."""
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.rules import index as index_rules
from xform.numpy.index import index_add, take
from xform.rules.index import ARRAY, numpy_index
from xform.testing import check_grads, check_primitive
from xform.testing import strategies as xst

THIS_FILE = "test_index.py"

# -- argument makers: strategies of (args, params) -----------------------------------------


@st.composite
def index_entries(draw, shape, with_arrays=True):
    """An index param for `shape` and its integer arrays (in bounds, repeats allowed).

    With fewer entries than axes, an Ellipsis may stand first (the entries then index the
    trailing axes) or last."""
    kinds = ["int", "slice", "array"] if with_arrays else ["int", "slice"]
    block = draw(st.sampled_from([(), (2,), (3,), (2, 2)]))
    entries, arrays = [], []
    count = draw(st.integers(1, len(shape)))
    ellipsis = draw(st.sampled_from(["none", "first", "last"])) if count < len(shape) else "none"
    first_axis = len(shape) - count if ellipsis == "first" else 0
    for axis in range(first_axis, first_axis + count):
        if draw(st.integers(0, 4)) == 0:
            entries.append(None)
        n = shape[axis]
        kind = draw(st.sampled_from(kinds))
        if kind == "int":
            entries.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            bound = st.none() | st.integers(-n - 1, n + 1)
            entries.append((draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, -1, -2]))))
        else:
            entries.append(ARRAY)
            arrays.append(draw(xst.arrays(block, np.int64, -n, n - 1)))
    if ellipsis == "first":
        entries.insert(0, Ellipsis)
    elif ellipsis == "last":
        entries.append(Ellipsis)
    return tuple(entries), arrays


@st.composite
def gather_args(draw, dtype=np.float64, with_arrays=True):
    x = draw(xst.arrays(draw(xst.shapes(min_dims=1, max_dims=3)), dtype))
    index, arrays = draw(index_entries(x.shape, with_arrays))
    return (x, *arrays), {"index": index}


@st.composite
def separated_entries(draw, shape):
    """Two index arrays with a slice between them: numpy moves their block to the front."""
    block = draw(st.sampled_from([(), (2,), (2, 3)]))
    arrays = [draw(xst.arrays(block, np.int64, -n, n - 1)) for n in (shape[0], shape[2])]
    middle = draw(st.sampled_from([(None, None, -1), (1, None, None), Ellipsis]))
    return (ARRAY, middle, ARRAY), arrays


@st.composite
def separated_gather_args(draw):
    x = draw(xst.arrays(draw(xst.shapes(min_dims=3, max_dims=3)), np.float64))
    index, arrays = draw(separated_entries(x.shape))
    return (x, *arrays), {"index": index}


@st.composite
def scatter_add_args(draw, entries=index_entries, min_dims=1):
    """Updates of the selected shape, for `entries(shape)` drawn on a random shape."""
    shape = draw(xst.shapes(min_dims=min_dims, max_dims=3))
    index, arrays = draw(entries(shape))
    selected = np.zeros(shape)[numpy_index(index, arrays)].shape
    updates = draw(xst.arrays(selected, np.float64))
    return (updates, *arrays), {"index": index, "shape": shape}


@st.composite
def scatter_args(draw, entries=index_entries, min_dims=1, dtype=np.float64):
    """x, then updates of the selected shape (repeated indices allowed: the last one wins)."""
    x = draw(xst.arrays(draw(xst.shapes(min_dims=min_dims, max_dims=3)), dtype))
    index, arrays = draw(entries(x.shape))
    updates = draw(xst.arrays(x[numpy_index(index, arrays)].shape, dtype))
    return (x, updates, *arrays), {"index": index}


# -- the case table ----------------------------------------------------------------------

OpCase = namedtuple("OpCase", "name prim args linear_argnums order")

CASES = [
    OpCase("gather", index_rules.gather_p, gather_args(), (0,), 2),
    OpCase("gather_basic", index_rules.gather_p, gather_args(with_arrays=False), (0,), 2),
    OpCase("gather_f32", index_rules.gather_p, gather_args(np.float32), (0,), 1),
    OpCase("gather_int", index_rules.gather_p, gather_args(np.int32), (), 1),
    OpCase("gather_separated", index_rules.gather_p, separated_gather_args(), (0,), 2),
    OpCase("scatter_add", index_rules.scatter_add_p, scatter_add_args(), (0,), 2),
    OpCase("scatter_add_basic", index_rules.scatter_add_p,
           scatter_add_args(lambda shape: index_entries(shape, with_arrays=False)), (0,), 1),
    OpCase("scatter_add_separated", index_rules.scatter_add_p,
           scatter_add_args(separated_entries, min_dims=3), (0,), 2),
    OpCase("scatter", index_rules.scatter_p, scatter_args(), (0, 1), 2),
    OpCase("scatter_basic", index_rules.scatter_p,
           scatter_args(lambda shape: index_entries(shape, with_arrays=False)), (0, 1), 2),
    OpCase("scatter_separated", index_rules.scatter_p,
           scatter_args(separated_entries, min_dims=3), (0, 1), 2),
    OpCase("scatter_int", index_rules.scatter_p, scatter_args(dtype=np.int32), (), 1),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@given(data=st.data())
def test_primitive_battery(case, data):
    args, params = data.draw(case.args)
    check_primitive(case.prim, *args, params=params, order=case.order,
                    linear_argnums=case.linear_argnums)


def test_every_primitive_has_a_case():
    prims = {v for v in vars(index_rules).values() if isinstance(v, xform.Primitive)}
    assert prims == {case.prim for case in CASES}


# -- staged x[index] equals numpy, bit for bit, with numpy's shape and dtype ---------------

EXPRESSIONS = [
    ("int", 1), ("negative_int", -1), ("two_ints", (1, 2)), ("three_ints", (2, -1, 0)),
    ("slice", np.s_[1:]), ("reverse", np.s_[::-1]), ("steps", np.s_[::2, 1:4:2]),
    ("negative_steps", np.s_[::-2, 3:0:-1, ::-3]), ("empty_slice", np.s_[2:1]),
    ("ellipsis_int", np.s_[..., 0]), ("ellipsis_none_int", np.s_[..., None, 0]),
    ("newaxis", np.s_[None]), ("newaxes", np.s_[:, None, 1, None]),
    ("int_list", [0, 2, 0]), ("negative_array", np.array([-1, 0, -3])),
    ("array_2d", np.array([[0, 1], [2, 2]])), ("slice_then_list", np.s_[1:, [0, 2]]),
    ("adjacent_arrays", np.s_[:, [0, 1], [4, -1]]), ("separated_arrays", np.s_[[0, 1], :, [1, 2]]),
    ("int_array_separated", np.s_[0, :, [0, 1]]), ("int_array_adjacent", np.s_[:, 0, [0, 1]]),
    ("broadcast_arrays", np.s_[[[0], [2]], :, [1, 3, 4]]), ("ellipsis_list", np.s_[..., [0, -1]]),
    ("empty_ellipsis_separates", np.s_[:, [0, 1], ..., [0, 1]]),
    ("none_separates", np.s_[:, [0, 1], None, [0, 1]]), ("empty_list", np.s_[:, []]),
    ("all_arrays", np.s_[[0, 1], [1, 2], [2, 3]]), ("zero_d_array", np.s_[np.array(1), :, [0, 1]]),
    ("numpy_ints", (np.int32(1), np.int64(-2))), ("ellipsis_only", np.s_[...]),
    ("colon", np.s_[:]),
]

MASKS = [
    ("mask_axis0", np.array([True, False, True])),
    ("mask_2d", np.arange(12).reshape(3, 4) % 3 == 0),
    ("mask_3d", np.arange(60).reshape(3, 4, 5) % 7 == 0),
    ("mask_after_slice", np.s_[:, np.array([True, False, False, True])]),
    ("mask_and_list", np.s_[np.array([False, True, True]), :, [0, 4]]),
    ("empty_mask", np.zeros(3, bool)),
    ("ellipsis_mask", np.s_[..., np.array([True, False, True, False, True])]),
]

X3 = np.arange(60).reshape(3, 4, 5) * 0.5 - 7.0


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float32, np.bool_])
@pytest.mark.parametrize("index", [i for _, i in EXPRESSIONS + MASKS],
                         ids=[name for name, _ in EXPRESSIONS + MASKS])
def test_staged_getitem_equals_numpy(index, dtype):
    x = X3.astype(dtype)
    expected = x[index]
    got = np.asarray(xform.jit(lambda x: x[index])(x))
    assert got.dtype == expected.dtype and np.array_equal(got, expected)
    graph = xform.make_graph(lambda x: x[index])(x)
    assert graph.out_avals[0].shape == expected.shape
    assert graph.out_avals[0].dtype == expected.dtype


@pytest.mark.parametrize("index", [i for _, i in EXPRESSIONS + MASKS],
                         ids=[name for name, _ in EXPRESSIONS + MASKS])
def test_getitem_grads(index):
    check_grads(lambda x: x[index] * 1.5, (X3,), order=2)


@pytest.mark.parametrize("index", [i for _, i in EXPRESSIONS + MASKS],
                         ids=[name for name, _ in EXPRESSIONS + MASKS])
def test_vmap_getitem_matches_loop(index):
    xs = np.stack([X3 + b for b in range(2)], axis=1)
    got = xform.vmap(lambda x: x[index], in_axes=1)(xs)
    assert np.array_equal(got, np.stack([(X3 + b)[index] for b in range(2)]))


TRACED = [
    ("front", lambda x, i: x[i]), ("middle", lambda x, i: x[:, i]),
    ("after_slice", lambda x, i: x[1:, i, ::-1]), ("separated", lambda x, i: x[i, :, i]),
    ("with_int", lambda x, i: x[0, :, i]), ("with_none", lambda x, i: x[None, ..., i, None]),
    ("with_concrete", lambda x, i: x[[[0], [1]], i]),
]


@pytest.mark.parametrize("f", [f for _, f in TRACED], ids=[n for n, _ in TRACED])
def test_traced_index_arrays(f):
    i = np.array([[2, -1, 0], [0, 0, 1]])
    expected = f(X3, i)
    got = xform.jit(f)(X3, i)
    assert np.array_equal(got, expected) and got.shape == expected.shape
    check_grads(lambda x: f(x, i), (X3,), order=1)


# -- derivatives: repeated indices accumulate -------------------------------------------------

def test_grad_repeated_indices_accumulate():
    x = np.arange(4.0)
    g = xform.grad(lambda x: np.sum(x[[0, 0, 3, 0]] * np.array([1.0, 2.0, 3.0, 4.0])))(x)
    assert np.array_equal(g, [7.0, 0.0, 0.0, 3.0])


def test_grad_repeated_traced_indices_with_slices():
    x = X3.copy()
    i = np.array([1, 1, -2, 0])

    def f(x, i):
        return np.sum(np.sin(x[1:, i, ::2]))
    g = xform.grad(f)(x, i)
    expected = np.zeros_like(x)
    np.add.at(expected, (slice(1, None), i, slice(None, None, 2)), np.cos(x[1:, i, ::2]))
    assert np.allclose(g, expected)


def test_hessian_through_repeated_indices():
    x = np.array([1.0, 2.0, 3.0])
    h = xform.hessian(lambda x: np.sum(x[[0, 0, 1]] ** 3))(x)
    assert np.allclose(h, np.diag([12.0, 12.0, 0.0]))


def test_integer_index_gets_zero_tangent():
    i = np.array([2, 0])
    _, t = xform.jvp(lambda x, i: x[i], (np.arange(3.0), i),
                     (np.ones(3), np.zeros(2, xform.float0)))
    assert np.array_equal(t, [1.0, 1.0])
    g = xform.grad(lambda x, i: np.sum(x[i]), argnums=(0, 1), allow_int=True)(np.arange(3.0), i)
    assert g[1].dtype == xform.float0


# -- vmap: batched x and/or batched traced indices --------------------------------------------

def test_vmap_rows_with_per_row_indices():
    rows = np.arange(12.0).reshape(3, 4)
    idx = np.array([[0, 0], [1, 3], [2, 2]])
    got = xform.vmap(lambda row, i: row[i])(rows, idx)
    assert np.array_equal(got, np.take_along_axis(rows, idx, 1))


VMAP = [
    ("x_only", (0, None)), ("index_only", (None, 0)), ("both", (0, 0)),
    ("both_last_axis", (2, 1)),
]


IDX = np.array([[[0, 1], [2, 0]], [[1, 1], [0, 2]], [[2, 2], [1, 0]]])


@pytest.mark.parametrize("in_axes", [a for _, a in VMAP], ids=[n for n, _ in VMAP])
@pytest.mark.parametrize("f", [f for _, f in TRACED], ids=[n for n, _ in TRACED])
def test_vmap_gather_matches_loop(f, in_axes):
    x_axis, i_axis = in_axes
    x_arg = X3 if x_axis is None else np.stack([X3 + b for b in range(3)], axis=x_axis)
    i_arg = IDX[0] if i_axis is None else np.moveaxis(IDX, 0, i_axis)
    got = xform.vmap(f, in_axes=in_axes)(x_arg, i_arg)
    expected = np.stack([f(X3 + (0 if x_axis is None else b), IDX[0 if i_axis is None else b])
                         for b in range(3)])
    assert np.array_equal(got, expected)


def test_grad_of_vmap_with_batched_indices():
    rows = np.arange(12.0).reshape(3, 4)
    idx = np.array([[0, 0], [1, 3], [2, 2]])

    def loss(rows):
        return np.sum(xform.vmap(lambda r, i: r[i] ** 2)(rows, idx))
    expected = np.zeros_like(rows)
    np.add.at(expected, (np.arange(3)[:, None], idx), 2 * np.take_along_axis(rows, idx, 1))
    assert np.allclose(xform.grad(loss)(rows), expected)
    assert np.allclose(xform.jacfwd(loss)(rows), expected)


def test_scatter_copy_keeps_numpys_memory_order():
    # the layout of a copy decides later reductions' bits (np.sum sums in memory order)
    x = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    for operand in (x, x[:, ::2], x.T):
        got = index_rules.scatter_p.bind(operand, np.float64(-1.0), index=(0, 1))
        want = np.array(operand, copy=True)
        want[0, 1] = -1.0
        np.testing.assert_array_equal(got, want)
        assert got.strides == want.strides and not np.shares_memory(got, operand)


def test_vmap_of_grad_scatters_per_example():
    idx = np.array([[0, 0], [1, 2], [2, 2]])
    g = xform.vmap(xform.grad(lambda x, i: np.sum(x[i])), in_axes=(None, 0))(np.zeros(3), idx)
    assert np.array_equal(g, [[2.0, 0, 0], [0, 1.0, 1.0], [0, 0, 2.0]])


# -- np.take, np.take_along_axis, index_add -------------------------------------------------

TAKES = [
    ("flat", [0, 7, -1, 7], {}), ("axis0", [2, 0], {"axis": 0}),
    ("axis1_2d", [[0, 1], [3, 3]], {"axis": 1}), ("axis_last_scalar", 4, {"axis": -1}),
    ("wrap", [5, -7, 9], {"axis": 2, "mode": "wrap"}),
    ("clip", [-3, 1, 10], {"axis": 1, "mode": "clip"}),
]


@pytest.mark.parametrize("indices,kwargs", [(i, k) for _, i, k in TAKES],
                         ids=[n for n, _, _ in TAKES])
def test_take_equals_numpy(indices, kwargs):
    indices = np.asarray(indices)
    expected = np.take(X3, indices, **kwargs)
    assert np.array_equal(xform.jit(lambda x: np.take(x, indices, **kwargs))(X3), expected)
    got = xform.jit(lambda x, i: np.take(x, i, **kwargs))(X3, indices)
    assert np.array_equal(got, expected)
    # numpy dispatches np.take on `a` only, so a concrete table needs the xform function
    concrete_x = xform.jit(lambda i: take(X3, i, **kwargs))(indices)
    assert np.array_equal(concrete_x, expected)
    check_grads(lambda x: np.take(x, indices, **kwargs), (X3,), order=1)


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_take_along_axis_equals_numpy(axis):
    x = np.cos(X3)
    idx = np.argsort(x, axis=axis)
    idx = np.take(idx, [2, 0, 0], axis=axis) if axis is not None else idx[::-2]
    expected = np.take_along_axis(x, idx, axis)
    got = xform.jit(lambda x, i: np.take_along_axis(x, i, axis))(x, idx)
    assert np.array_equal(got, expected)
    assert np.array_equal(xform.jit(lambda i: np.take_along_axis(x, i, axis))(idx), expected)
    check_grads(lambda x: np.take_along_axis(x, idx, axis), (x,), order=2)


def test_take_along_axis_broadcasts_size_one_axes():
    x = np.cos(X3)
    idx = np.array([[[1, 0]]])
    assert np.array_equal(xform.jit(lambda x: np.take_along_axis(x, idx, 2))(x),
                          np.take_along_axis(x, idx, 2))


INDEX_ADDS = [
    ("repeated", [0, 0, 2], 1.0), ("slices_and_array", np.s_[1:, [3, 3]], np.arange(5.0)),
    ("basic", np.s_[:, 1, ::-2], 2.5), ("mask", np.arange(12).reshape(3, 4) % 5 == 0, -1.0),
    ("negative", np.s_[[-1, 2], :, [0, 0]], np.ones((2, 4))),
]


@pytest.mark.parametrize("index,values", [(i, v) for _, i, v in INDEX_ADDS],
                         ids=[n for n, _, _ in INDEX_ADDS])
def test_index_add_equals_add_at(index, values):
    x = X3.copy()
    expected = x.copy()
    np.add.at(expected, index, values)
    assert np.array_equal(index_add(x, index, values), expected)
    assert np.array_equal(x, X3)
    assert np.array_equal(xform.jit(lambda x, v: index_add(x, index, v))(x, values), expected)
    check_grads(lambda x, v: index_add(x, index, v) ** 2, (x, np.asarray(values)), order=2)


def test_index_add_traced_indices_and_int_dtype():
    x = np.arange(6, dtype=np.int32)
    i = np.array([5, 5, 0])
    got = xform.jit(lambda x, i: index_add(x, i, 2))(x, i)
    assert got.dtype == np.int32 and np.array_equal(got, [2, 1, 2, 3, 4, 9])


def test_vmap_index_add_batched_indices_and_values():
    idx = np.array([[0, 0], [1, 2], [2, 1]])
    vals = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    got = xform.vmap(lambda i, v: index_add(np.zeros(3), i, v))(idx, vals)
    assert np.array_equal(got, [[3.0, 0, 0], [0, 3.0, 4.0], [0, 6.0, 5.0]])


# -- errors: the user's line is named -------------------------------------------------------

ERRORS = [
    ("int_out_of_bounds", lambda x: x[3], xform.ShapeError, "out of bounds"),
    ("negative_out_of_bounds", lambda x: x[:, -5], xform.ShapeError, "out of bounds"),
    ("array_out_of_bounds", lambda x: x[:, [0, 4]], xform.ShapeError, "index 4 is out of bounds"),
    ("too_many", lambda x: x[0, 0, 0, 0], xform.ShapeError, "too many indices"),
    ("two_ellipses", lambda x: x[..., 0, ...], xform.ShapeError, "single ellipsis"),
    ("mask_shape", lambda x: x[np.array([True, False])], xform.ShapeError, "boolean index"),
    ("float_index", lambda x: x[1.5], xform.TypeCheckError, "valid indices"),
    ("zero_step", lambda x: x[::0], xform.ShapeError, "step cannot be zero"),
    ("take_axis", lambda x: np.take(x, [0], axis=3), xform.ShapeError, "out of bounds"),
    # (a staging without values: with values the mask's count and the bound are read)
    ("traced_mask", lambda x: x[x > 0], xform.ConcretizationError, "np.where"),
    ("traced_slice_bound", lambda x: x[: np.argmax(x)], xform.ConcretizationError, "traced"),
]
WITHOUT_VALUES = ("traced_mask", "traced_slice_bound")


@pytest.mark.parametrize("f,error,fragment", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_name_the_user_line(f, error, fragment, request):
    staged = (xform.jit(f) if request.node.callspec.id not in WITHOUT_VALUES
              else lambda x: xform.make_graph(f)(xform.ShapedArray(x.shape, x.dtype)))
    with pytest.raises(error) as info:
        staged(X3)
    assert fragment in str(info.value) and THIS_FILE in str(info.value)


def test_index_add_values_that_do_not_broadcast():
    with pytest.raises(xform.ShapeError) as info:
        xform.jit(lambda x: index_add(x, np.s_[:, [0, 1]], np.ones(3)))(X3)
    assert "do not broadcast" in str(info.value) and THIS_FILE in str(info.value)


def test_traced_index_arrays_that_do_not_broadcast():
    with pytest.raises(xform.ShapeError) as info:
        xform.jit(lambda x, i, j: x[i, j])(X3, np.array([0, 1]), np.array([0, 1, 2]))
    assert "could not be broadcast" in str(info.value) and THIS_FILE in str(info.value)


def test_traced_float_index_array_is_rejected():
    with pytest.raises(xform.TypeCheckError) as info:
        xform.jit(lambda x, i: x[i])(X3, np.array([0.0]))
    assert THIS_FILE in str(info.value)
