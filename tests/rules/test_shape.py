"""Shape family: every primitive through check_primitive, every numpy function staged against
numpy bit for bit (values, shape, dtype), derivatives and batching of the compositions, pinned
gradients, and the error paths."""
import os
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.ir.core import Primitive
from xform.rules import shape
from xform.rules.shape import (broadcast_to_p, concatenate_p, copy_p, diagonal_p, flip_p,
                               pad_p, repeat_p, reshape_p, roll_p, slice_p, split_p, static_slice,
                               transpose_p)
from xform.testing import check_grads, check_primitive
from xform.testing import strategies as xst
from xform.tree import tree_flatten, tree_unflatten

THIS_FILE = os.path.basename(__file__)

OpCase = namedtuple("OpCase", "name prim example order linear_argnums")

@st.composite
def _array(draw, min_dims=1, max_dims=3, dtype=None):
    dtype = draw(xst.float_dtypes) if dtype is None else dtype
    return draw(xst.arrays(draw(xst.shapes(min_dims=min_dims, max_dims=max_dims)), dtype))


@st.composite
def _reshape_example(draw):
    x = draw(_array(min_dims=0))
    target = draw(st.sampled_from([(x.size,), tuple(reversed(x.shape)), (1,) + x.shape]))
    return (x,), {"shape": target}


@st.composite
def _broadcast_to_example(draw):
    x = draw(_array(min_dims=0))
    target = (2,) + tuple(3 if n == 1 else n for n in x.shape)
    return (x,), {"shape": target}


@st.composite
def _transpose_example(draw):
    x = draw(_array(min_dims=0))
    return (x,), {"axes": tuple(draw(st.permutations(range(x.ndim))))}


@st.composite
def _copy_example(draw):
    return (draw(_array(min_dims=0)),), {}


@st.composite
def _concatenate_example(draw, with_int=False):
    base = draw(xst.shapes(min_dims=1))
    axis = draw(st.integers(0, len(base) - 1))
    count = draw(st.integers(1, 3))
    args = []
    for i in range(count):
        length = draw(st.integers(0, 3))
        dtype = np.int64 if with_int and i == 0 else draw(xst.float_dtypes)
        args.append(draw(xst.arrays(base[:axis] + (length,) + base[axis + 1:], dtype)))
    if with_int:
        args.append(draw(xst.arrays(base, np.float64)))
    return tuple(args), {"axis": axis}


@st.composite
def _split_example(draw):
    x = draw(_array())
    axis = draw(st.integers(0, x.ndim - 1))
    cuts = sorted(draw(st.lists(st.integers(0, x.shape[axis]), max_size=3)))
    bounds = [0] + cuts + [x.shape[axis]]
    return (x,), {"sizes": tuple(b - a for a, b in zip(bounds[:-1], bounds[1:])), "axis": axis}


@st.composite
def _slice_example(draw):
    x = draw(_array(min_dims=0))
    starts, stops, steps = [], [], []
    for n in x.shape:
        start = draw(st.integers(0, n))
        starts.append(start)
        stops.append(draw(st.integers(start, n)))
        steps.append(draw(st.integers(1, 3)))
    return (x,), {"starts": tuple(starts), "stops": tuple(stops), "steps": tuple(steps)}


@st.composite
def _pad_example(draw):
    x = draw(_array(min_dims=0))
    value = draw(st.sampled_from([0.0, 1.5, np.float32(-2.0)]))
    widths = tuple(tuple(draw(st.integers(0, 2)) for _ in range(3)) for _ in x.shape)
    return (x, value), {"widths": widths}


@st.composite
def _flip_example(draw):
    x = draw(_array())
    axes = draw(st.sets(st.integers(0, x.ndim - 1), min_size=1))
    return (x,), {"axes": tuple(sorted(axes))}


@st.composite
def _roll_example(draw):
    x = draw(_array())
    axes = tuple(sorted(draw(st.sets(st.integers(0, x.ndim - 1), min_size=1))))
    shifts = tuple(draw(st.integers(1, max(1, x.shape[a] - 1))) for a in axes)
    return (x,), {"shifts": shifts, "axes": axes}


@st.composite
def _repeat_example(draw):
    x = draw(_array())
    axis = draw(st.integers(0, x.ndim - 1))
    repeats = tuple(draw(st.integers(0, 3)) for _ in range(x.shape[axis]))
    return (x,), {"repeats": repeats, "axis": axis}


@st.composite
def _diagonal_example(draw):
    x = draw(_array(min_dims=2))
    axis1, axis2 = draw(st.permutations(range(x.ndim)))[:2]
    offset = draw(st.integers(-3, 3))
    return (x,), {"offset": offset, "axis1": axis1, "axis2": axis2}


CASES = [
    OpCase("reshape", reshape_p, _reshape_example(), 2, None),
    OpCase("broadcast_to", broadcast_to_p, _broadcast_to_example(), 2, None),
    OpCase("transpose", transpose_p, _transpose_example(), 2, None),
    OpCase("copy", copy_p, _copy_example(), 2, None),
    OpCase("concatenate", concatenate_p, _concatenate_example(), 2, None),
    OpCase("concatenate_int", concatenate_p, _concatenate_example(with_int=True), 2, None),
    OpCase("split", split_p, _split_example(), 2, None),
    OpCase("slice", slice_p, _slice_example(), 2, None),
    OpCase("pad", pad_p, _pad_example(), 2, None),
    OpCase("pad_value_only", pad_p, _pad_example(), 1, (1,)),
    OpCase("flip", flip_p, _flip_example(), 2, None),
    OpCase("roll", roll_p, _roll_example(), 2, None),
    OpCase("repeat", repeat_p, _repeat_example(), 2, None),
    OpCase("diagonal", diagonal_p, _diagonal_example(), 2, None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
@given(data=st.data())
def test_primitive(case, data):
    args, params = data.draw(case.example)
    check_primitive(case.prim, *args, params=params, order=case.order,
                    linear_argnums=case.linear_argnums)


def test_every_shape_primitive_has_a_case():
    defined = {value for value in vars(shape).values() if isinstance(value, Primitive)}
    assert defined == {case.prim for case in CASES}


# -- numpy functions staged against numpy -------------------------------------------------------

FnCase = namedtuple("FnCase", "name fn shapes")

FN_CASES = [
    FnCase("reshape", lambda x: np.reshape(x, (4, -1)), [(2, 3, 2)]),
    FnCase("ravel", lambda x: np.ravel(x), [(2, 3)]),
    FnCase("expand_dims", lambda x: np.expand_dims(x, (0, -1)), [(2, 3)]),
    FnCase("squeeze", lambda x: np.squeeze(x), [(1, 3, 1)]),
    FnCase("broadcast_to", lambda x: np.broadcast_to(x, (2, 4, 3)), [(4, 1)]),
    FnCase("transpose", lambda x: np.transpose(x, (1, 2, 0)), [(2, 3, 4)]),
    FnCase("moveaxis", lambda x: np.moveaxis(x, 0, -1), [(2, 3, 4)]),
    FnCase("swapaxes", lambda x: np.swapaxes(x, 0, 2), [(2, 3, 4)]),
    FnCase("concatenate", lambda x, y: np.concatenate([x, y, x], axis=1), [(2, 3), (2, 1)]),
    FnCase("concatenate_none", lambda x, y: np.concatenate((x, y), axis=None), [(2, 3), (4,)]),
    FnCase("concatenate_neg", lambda x, y: np.concatenate([x, y], -1), [(2, 3), (2, 2)]),
    FnCase("concat_const", lambda x: np.concat([x, np.ones((1, 3), x.dtype)]), [(2, 3)]),
    FnCase("stack", lambda x, y: np.stack([x, y]), [(2, 3), (2, 3)]),
    FnCase("stack_last", lambda x, y: np.stack((x, y), axis=-1), [(2, 3), (2, 3)]),
    FnCase("hstack_1d", lambda x, y: np.hstack([x, y]), [(3,), (2,)]),
    FnCase("hstack_2d", lambda x, y: np.hstack([x, y]), [(2, 3), (2, 1)]),
    FnCase("vstack", lambda x, y: np.vstack([x, y]), [(3,), (2, 3)]),
    FnCase("dstack", lambda x, y: np.dstack([x, y]), [(3,), (3,)]),
    FnCase("column_stack", lambda x, y: np.column_stack([x, y]), [(3,), (3, 2)]),
    FnCase("split_sections", lambda x: np.split(x, 2, axis=1), [(3, 4)]),
    FnCase("split_indices", lambda x: np.split(x, [1, 4]), [(6, 2)]),
    FnCase("split_unsorted", lambda x: np.split(x, [4, 2, -1]), [(6,)]),
    FnCase("array_split", lambda x: np.array_split(x, 3, axis=-1), [(2, 7)]),
    FnCase("hsplit", lambda x: np.hsplit(x, [1]), [(2, 3)]),
    FnCase("vsplit", lambda x: np.vsplit(x, 2), [(4, 3)]),
    FnCase("dsplit", lambda x: np.dsplit(x, 2), [(1, 2, 4)]),
    FnCase("unstack", lambda x: np.unstack(x, axis=1), [(2, 3)]),
    FnCase("tile_int", lambda x: np.tile(x, 3), [(2, 3)]),
    FnCase("tile_tuple", lambda x: np.tile(x, (2, 1, 2)), [(2, 3)]),
    FnCase("tile_0d", lambda x: np.tile(x, (2, 2)), [()]),
    FnCase("repeat_flat", lambda x: np.repeat(x, 2), [(2, 3)]),
    FnCase("repeat_axis", lambda x: np.repeat(x, 3, axis=-1), [(2, 3)]),
    FnCase("repeat_list", lambda x: np.repeat(x, [2, 0, 1], axis=1), [(2, 3)]),
    FnCase("repeat_method", lambda x: x.repeat([1, 3], 0), [(2, 3)]),
    FnCase("flip_all", lambda x: np.flip(x), [(2, 3)]),
    FnCase("flip_int", lambda x: np.flip(x, 1), [(2, 3)]),
    FnCase("flip_tuple", lambda x: np.flip(x, (0, -1)), [(2, 3, 2)]),
    FnCase("fliplr", lambda x: np.fliplr(x), [(2, 3)]),
    FnCase("flipud", lambda x: np.flipud(x), [(2, 3)]),
    FnCase("roll_flat", lambda x: np.roll(x, 4), [(2, 3)]),
    FnCase("roll_axis", lambda x: np.roll(x, -1, axis=1), [(2, 3)]),
    FnCase("roll_tuple", lambda x: np.roll(x, (1, 5), axis=(0, 1)), [(2, 3)]),
    FnCase("roll_same_axis", lambda x: np.roll(x, (1, 1), axis=(1, 1)), [(2, 3)]),
    FnCase("diag_vector", lambda x: np.diag(x), [(3,)]),
    FnCase("diag_vector_k", lambda x: np.diag(x, -2), [(3,)]),
    FnCase("diag_matrix", lambda x: np.diag(x, 1), [(3, 4)]),
    FnCase("diagonal", lambda x: np.diagonal(x, -1, 2, 0), [(3, 2, 4)]),
    FnCase("diagonal_method", lambda x: x.diagonal(), [(3, 4)]),
    FnCase("trace", lambda x: np.trace(x), [(3, 4)]),
    FnCase("trace_axes", lambda x: np.trace(x, 1, 1, 2), [(2, 3, 4)]),
    FnCase("trace_method", lambda x: x.trace(), [(4, 4)]),
    FnCase("triu", lambda x: np.triu(x), [(3, 4)]),
    FnCase("triu_k", lambda x: np.triu(x, -1), [(2, 3, 3)]),
    FnCase("tril", lambda x: np.tril(x, 1), [(4, 3)]),
    FnCase("tril_1d", lambda x: np.tril(x), [(3,)]),
    FnCase("pad_int", lambda x: np.pad(x, 1), [(2, 3)]),
    FnCase("pad_pairs", lambda x: np.pad(x, ((0, 2), (1, 0))), [(2, 3)]),
    FnCase("pad_value", lambda x: np.pad(x, (1, 2), constant_values=7), [(2, 3)]),
    FnCase("pad_traced_value", lambda x: np.pad(x, 1, constant_values=x[0, 0]), [(2, 3)]),
    FnCase("pad_edge", lambda x: np.pad(x, ((2, 0), (1, 3)), mode="edge"), [(2, 3)]),
    FnCase("pad_wrap", lambda x: np.pad(x, ((4, 1), (0, 5)), mode="wrap"), [(2, 3)]),
    FnCase("pad_reflect", lambda x: np.pad(x, ((3, 1), (5, 2)), mode="reflect"), [(2, 3)]),
    FnCase("pad_symmetric", lambda x: np.pad(x, (2, 4), mode="symmetric"), [(2, 3)]),
    FnCase("pad_linear_ramp", lambda x: np.pad(x, ((2, 1), (1, 3)), mode="linear_ramp"),
           [(2, 3)]),
    FnCase("pad_linear_ramp_ends",
           lambda x: np.pad(x, ((0, 2), (3, 1)), mode="linear_ramp", end_values=((1, -2),)),
           [(2, 3)]),
    FnCase("reshape_F", lambda x: np.reshape(x, (4, -1), order="F"), [(2, 3, 2)]),
    FnCase("reshape_F_method", lambda x: x.reshape(3, 4, order="F"), [(2, 3, 2)]),
    FnCase("ravel_F", lambda x: (np.ravel(x, order="F"), x.T.ravel("F")), [(2, 3)]),
    FnCase("flatten_F", lambda x: x.flatten(order="F"), [(2, 3, 2)]),
    FnCase("copy", lambda x: np.copy(x), [(2, 3)]),
    FnCase("copy_method", lambda x: x.copy(), [(2, 3)]),
    FnCase("atleast_1d", lambda x: np.atleast_1d(x), [()]),
    FnCase("atleast_2d", lambda x, y: np.atleast_2d(x, y), [(), (3,)]),
    FnCase("atleast_3d", lambda x, y, z: np.atleast_3d(x, y, z), [(), (3,), (2, 3)]),
    FnCase("real", lambda x: np.real(x), [(2, 3)]),
    FnCase("imag", lambda x: np.imag(x), [(2, 3)]),
    FnCase("real_imag_props", lambda x: (x.real, x.imag), [(2, 3)]),
    FnCase("static_slice", lambda x: static_slice(x, (None, 3), (None, 0), (2, -2)), [(3, 5)]),
]

DTYPES = [np.float32, np.float64, np.int64, np.bool_]


def _make(shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) * 3).astype(dtype) for s in shapes]


def _numpy(case, args):
    if case.name == "static_slice":
        return args[0][::2, 3:0:-2]
    return case.fn(*args)


def _assert_same(got, want):
    got_leaves, got_tree = tree_flatten(got)
    want_leaves, want_tree = tree_flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.dtype, g.shape, w.dtype, w.shape)
        assert np.array_equal(g, w, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", FN_CASES, ids=lambda case: case.name)
def test_staged_equals_numpy(case, dtype):
    args = _make(case.shapes, dtype)
    want = _numpy(case, args)
    _assert_same(xform.jit(case.fn)(*args), want)
    graph = xform.make_graph(case.fn)(*args)
    want_leaves, _ = tree_flatten(want)
    assert [(a.shape, a.dtype) for a in graph.out_avals] == \
        [(np.shape(w), np.asarray(w).dtype) for w in want_leaves]


@pytest.mark.parametrize("case", FN_CASES, ids=lambda case: case.name)
def test_composition_grads_and_vmap(case):
    args = _make(case.shapes, np.float64, seed=1)
    check_grads(case.fn, args, order=2)
    batched = [np.stack([a, a * 2 + 1]) for a in args]
    _assert_same(xform.vmap(case.fn)(*batched),
                 _stack_trees([case.fn(*[b[i] for b in batched]) for i in range(2)]))


def _stack_trees(trees):
    leaves = [tree_flatten(t)[0] for t in trees]
    _, treedef = tree_flatten(trees[0])
    return tree_unflatten(treedef, [np.stack(column) for column in zip(*leaves)])


@given(data=st.data())
def test_static_slice_matches_python_slicing(data):
    x = data.draw(_array(dtype=np.float64))
    bound = st.none() | st.integers(-6, 6)
    slices = [slice(data.draw(bound), data.draw(bound),
                    data.draw(st.none() | st.sampled_from([-3, -2, -1, 1, 2, 3])))
              for _ in x.shape]
    fn = lambda x: static_slice(x, *zip(*[(s.start, s.stop, s.step) for s in slices]))  # noqa
    _assert_same(xform.jit(fn)(x), x[tuple(slices)])


# -- pinned derivatives -----------------------------------------------------------------------

def test_strided_slice_gradient_scatters_back():
    x = np.arange(7.0)
    w = np.array([1.0, 2.0, 3.0])
    grad = xform.grad(lambda x: np.sum(static_slice(x, (1,), (6,), (2,)) * w))(x)
    np.testing.assert_array_equal(grad, [0, 1, 0, 2, 0, 3, 0])


@pytest.mark.parametrize("shape, starts, stops, steps", [
    ((7,), (1,), (6,), (2,)), ((7,), (2,), (3,), (3,)), ((5,), (3,), (3,), (2,)),
    ((5,), (0,), (5,), (1,)), ((4, 6), (1, 0), (4, 6), (2, 3)), ((3, 8), (0, 1), (2, 8), (1, 3)),
    ((2, 3, 4), (1, 0, 0), (2, 3, 1), (1, 2, 4))])
def test_slice_gradient_scatters_each_element_back(shape, starts, stops, steps):
    x = np.zeros(shape)
    out, pullback = xform.vjp(
        lambda x: slice_p.bind(x, starts=starts, stops=stops, steps=steps), x)
    ct = np.arange(1.0, out.size + 1).reshape(out.shape)
    want = np.zeros_like(x)
    want[tuple(map(slice, starts, stops, steps))] = ct
    got, = pullback(ct)
    _assert_same(got, want)


@pytest.mark.parametrize("shape, sizes, axis", [
    ((6,), (2, 0, 4), 0), ((3, 4), (1, 3), 1), ((2, 3, 4), (4,), 2), ((4, 2), (0, 4, 0), 0)])
def test_split_gives_numpys_views(shape, sizes, axis):
    x = np.asfortranarray(np.arange(float(np.prod(shape))).reshape(shape))
    want = np.split(x, np.cumsum(sizes[:-1]), axis)
    got = split_p.bind(x, sizes=sizes, axis=axis)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _assert_same(g, w)
        assert g.strides == w.strides and (g.size == 0 or np.shares_memory(g, x))


@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float32", "float64"),
                                    ("int32", "float32"), ("bool", "int8"), ("complex64", "f8")])
def test_concatenate_promotes_as_numpy(dtypes):
    xs = [np.ones((2, k + 1), dtype) for k, dtype in enumerate(dtypes)]
    got = xform.jit(lambda *xs: np.concatenate(xs, axis=1))(*xs)
    _assert_same(got, np.concatenate(xs, axis=1))


def test_pad_gradient_of_constant_value_counts_padding():
    # x is an argument too: numpy dispatches np.pad on its first argument only.
    def padded_sum(c, x):
        return np.sum(np.pad(x, ((1, 2), (0, 1)), constant_values=c))
    assert xform.grad(padded_sum)(0.5, np.ones((2, 3))) == 5 * 4 - 6


@pytest.mark.parametrize("value", [0.0, -0.0, 0, 2.5])
def test_pad_fills_with_numpys_bits(value):
    """Zeros come from the allocator, other values (-0.0 too) from a fill."""
    x = np.arange(6.0).reshape(2, 3)
    want = np.pad(x, ((1, 0), (2, 1)), constant_values=value)
    for got in (xform.jit(lambda x: np.pad(x, ((1, 0), (2, 1)), constant_values=value))(x),
                pad_p.bind(x, np.float64(value), widths=((1, 0, 0), (2, 1, 0)))):
        _assert_same(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))


def test_pad_vmap_over_constant_value():
    xs, cs = np.ones((3, 2)), np.array([1.0, 2.0, 3.0])
    got = xform.vmap(lambda x, c: np.pad(x, 1, constant_values=c))(xs, cs)
    _assert_same(got, np.stack([np.pad(x, 1, constant_values=c) for x, c in zip(xs, cs)]))


def test_repeat_gradient_sums_runs_and_zero_repeats():
    w = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    grad = xform.grad(lambda x: np.sum(np.repeat(x, [2, 0, 3]) * w))(np.ones(3))
    np.testing.assert_array_equal(grad, [3.0, 0.0, 12.0])


def test_diagonal_gradient_lands_on_the_diagonal():
    w = np.array([1.0, 2.0])
    grad = xform.grad(lambda x: np.sum(np.diagonal(x, 1) * w))(np.ones((2, 3)))
    np.testing.assert_array_equal(grad, [[0, 1, 0], [0, 0, 2]])


def test_unsorted_split_gradient_counts_overlaps():
    grad = xform.grad(lambda x: sum(np.sum(p) for p in np.split(x, [4, 2])))(np.ones(6))
    np.testing.assert_array_equal(grad, [1, 1, 2, 2, 1, 1])


def test_concatenate_with_int_input_differentiates_the_float_one():
    x, n = np.ones(2, np.float32), np.arange(3)
    out = xform.jit(lambda x, n: np.concatenate([x, n]))(x, n)
    assert out.dtype == np.float64
    grad = xform.grad(lambda x, n: np.sum(np.concatenate([x, n]) ** 2))(x, n)
    assert grad.dtype == np.float32
    np.testing.assert_array_equal(grad, [2, 2])


def test_copy_is_not_an_alias():
    x = np.ones(3)
    out = xform.jit(np.copy)(x)
    out[0] = 5.0
    assert x[0] == 1.0


def test_a_roll_is_one_equation_and_its_reverse_another():
    # (as split and concatenate per axis it was two, and two more in its reverse pass: half
    # a first call of a stencil written with np.roll, bench/FIRSTCALL.md "Session 16")
    x = np.arange(12.0).reshape(3, 4)
    graph = xform.make_graph(lambda x: np.roll(x, (1, -1), axis=(0, 1)))(x)
    assert [eqn.primitive.name for eqn in graph.equations] == ["roll"]
    reverse = xform.make_graph(xform.grad(lambda x: np.sum(np.roll(x, 1, 1) * x)))(x)
    assert [eqn.primitive.name for eqn in reverse.equations].count("roll") == 2
    np.testing.assert_array_equal(xform.grad(lambda x: np.sum(np.roll(x, 1, 1) * x))(x),
                                  np.roll(x, -1, 1) + np.roll(x, 1, 1))


def test_roll_by_a_multiple_of_the_length_stages_nothing():
    graph = xform.make_graph(lambda x: np.roll(x, 6, axis=1))(np.ones((2, 3)))
    assert not graph.equations


# -- errors name the user's line --------------------------------------------------------------

ErrCase = namedtuple("ErrCase", "name fn shapes error")

ERR_CASES = [
    ErrCase("reshape_size", lambda x: np.reshape(x, (4, -1)), [(2, 3)], xform.ShapeError),
    ErrCase("squeeze_non_one", lambda x: np.squeeze(x, 1), [(2, 3)], xform.ShapeError),
    ErrCase("expand_dims_axis", lambda x: np.expand_dims(x, 3), [(2, 3)], xform.ShapeError),
    ErrCase("concatenate_shapes", lambda x, y: np.concatenate([x, y], axis=1), [(2, 3), (3, 3)],
            xform.ShapeError),
    ErrCase("concatenate_ndim", lambda x, y: np.concatenate([x, y]), [(2, 3), (3,)],
            xform.ShapeError),
    ErrCase("concatenate_0d", lambda x: np.concatenate([x, x]), [()], xform.ShapeError),
    ErrCase("concatenate_axis", lambda x: np.concatenate([x, x], axis=2), [(2, 3)],
            xform.ShapeError),
    ErrCase("concatenate_cast", lambda x: np.concatenate([x, x], dtype=np.int64), [(2,)],
            xform.TypeCheckError),
    ErrCase("stack_shapes", lambda x: np.stack([x, x.T]), [(2, 3)], xform.ShapeError),
    ErrCase("split_unequal", lambda x: np.split(x, 4), [(6,)], xform.ShapeError),
    ErrCase("split_zero", lambda x: np.array_split(x, 0), [(6,)], xform.ShapeError),
    ErrCase("vsplit_1d", lambda x: np.vsplit(x, 2), [(6,)], xform.ShapeError),
    ErrCase("repeat_length", lambda x: np.repeat(x, [1, 2], axis=0), [(3,)], xform.ShapeError),
    ErrCase("repeat_negative", lambda x: np.repeat(x, -1), [(3,)], xform.ShapeError),
    ErrCase("repeat_traced", lambda x: np.repeat(x, x.astype(np.int64)), [(3,)],
            xform.ConcretizationError),
    ErrCase("roll_traced", lambda x: np.roll(x, x[0].astype(np.int64)), [(3,)],
            xform.ConcretizationError),
    ErrCase("flip_axis", lambda x: np.flip(x, 2), [(2, 3)], xform.ShapeError),
    ErrCase("fliplr_1d", lambda x: np.fliplr(x), [(3,)], xform.ShapeError),
    ErrCase("diag_3d", lambda x: np.diag(x), [(2, 2, 2)], xform.ShapeError),
    ErrCase("diagonal_same_axes", lambda x: np.diagonal(x, 0, 1, -1), [(2, 3)],
            xform.ShapeError),
    ErrCase("pad_mode", lambda x: np.pad(x, 1, mode="median"), [(3,)], xform.UnsupportedError),
    ErrCase("pad_reflect_odd", lambda x: np.pad(x, 1, mode="reflect", reflect_type="odd"),
            [(3,)], xform.UnsupportedError),
    ErrCase("pad_empty_axis", lambda x: np.pad(x, 1, mode="wrap"), [(0,)], xform.ShapeError),
    ErrCase("reshape_order_A", lambda x: np.reshape(x, (3, 2), order="A"), [(2, 3)],
            xform.UnsupportedError),
    ErrCase("pad_values", lambda x: np.pad(x, 1, constant_values=(1, 2)), [(3,)],
            xform.UnsupportedError),
    ErrCase("pad_negative", lambda x: np.pad(x, -1), [(3,)], xform.ShapeError),
    ErrCase("tril_0d", lambda x: np.tril(x), [()], xform.ShapeError),
    ErrCase("static_slice_step", lambda x: static_slice(x, (0,), (2,), (0,)), [(3,)],
            xform.ShapeError),
]


@pytest.mark.parametrize("case", ERR_CASES, ids=lambda case: case.name)
def test_errors_name_the_users_line(case):
    args = _make(case.shapes, np.float64)
    with pytest.raises(case.error) as info:
        xform.jit(case.fn)(*args)
    assert THIS_FILE in str(info.value)


def test_bad_primitive_params_raise_shape_error():
    x = np.ones((2, 3))
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(lambda x: slice_p.bind(x, starts=(0, 2), stops=(2, 1), steps=(1, 1)))(x)
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(lambda x: split_p.bind(x, sizes=(1, 1), axis=1))(x)
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(lambda x: pad_p.bind(x, np.zeros(2), widths=((0, 0, 0),) * 2))(x)
