"""Contraction family: the matmul, dot and einsum primitives, and np.matmul/dot/tensordot/
einsum/inner/outer/vdot/kron staged against numpy."""
import os
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import xform
from xform.rules.contract import dot_p, einsum_p, matmul_p
from xform.ir.registry import RULES
from xform.testing import check_grads, check_primitive
from xform.testing import strategies as xst

THIS_FILE = os.path.basename(__file__)


@st.composite
def matmul_operands(draw, dtypes=(np.float64, np.float64)):
    shapes = draw(hnp.mutually_broadcastable_shapes(signature=np.matmul.signature,
                                                    max_dims=2, max_side=3))
    return tuple(draw(xst.arrays(s, d)) for s, d in zip(shapes.input_shapes, dtypes))


@st.composite
def dot_operands(draw):
    k = draw(st.integers(1, 3))
    a_shape = draw(xst.shapes(0, 2, 1, 3)) + (k,)
    b_rank = draw(st.integers(1, 3))
    b_shape = (k,) if b_rank == 1 else draw(xst.shapes(b_rank - 2, b_rank - 2, 1, 3)) + (k, 2)
    return draw(xst.arrays(a_shape)), draw(xst.arrays(b_shape))


def einsum_operands(subscripts, dtypes=None):
    """Operands for canonical `subscripts`; a subscript shared by operands is sometimes 1 in
    one of them (einsum broadcasts it)."""
    specs = subscripts.split("->")[0].split(",")

    @st.composite
    def operands(draw):
        sizes = {c: draw(st.integers(1, 3)) for c in sorted(set("".join(specs)))}
        arrays = []
        for i, spec in enumerate(specs):
            shape = []
            for c in spec:
                shared = sum(c in s for s in specs) > 1 and spec.count(c) == 1
                shape.append(1 if shared and draw(st.booleans()) else sizes[c])
            dtype = dtypes[i] if dtypes else np.float64
            arrays.append(draw(xst.arrays(tuple(shape), dtype)))
        return tuple(arrays)
    return operands()


OpCase = namedtuple("OpCase", "name prim operands params linear_argnums order")

CASES = [
    OpCase("matmul", matmul_p, matmul_operands(), {}, None, 2),
    OpCase("matmul_int_float", matmul_p, matmul_operands((np.int64, np.float64)), {}, None, 1),
    OpCase("matmul_f32", matmul_p, matmul_operands((np.float32, np.float32)), {}, None, 1),
    OpCase("dot", dot_p, dot_operands(), {}, None, 2),
    OpCase("einsum_matmul", einsum_p, einsum_operands("ij,jk->ik"),
           {"subscripts": "ij,jk->ik"}, None, 2),
    OpCase("einsum_batched", einsum_p, einsum_operands("aij,ajk->aik"),
           {"subscripts": "aij,ajk->aik"}, None, 2),
    OpCase("einsum_outer_transpose", einsum_p, einsum_operands("i,jk->kji"),
           {"subscripts": "i,jk->kji"}, None, 1),
    OpCase("einsum_three", einsum_p, einsum_operands("ij,jk,kl->il"),
           {"subscripts": "ij,jk,kl->il"}, None, 2),
    OpCase("einsum_sum_out", einsum_p, einsum_operands("ijk->j"),
           {"subscripts": "ijk->j"}, None, 2),
    OpCase("einsum_trace", einsum_p, einsum_operands("ii->"), {"subscripts": "ii->"}, None, 2),
    OpCase("einsum_diagonal", einsum_p, einsum_operands("iij,j->ij"),
           {"subscripts": "iij,j->ij"}, None, 2),
    OpCase("einsum_scalar", einsum_p, einsum_operands(",i->i"), {"subscripts": ",i->i"},
           None, 1),
    OpCase("einsum_int_float", einsum_p, einsum_operands("ij,j->i", (np.int64, np.float32)),
           {"subscripts": "ij,j->i"}, None, 1),
]


def test_case_table_covers_every_contraction_primitive():
    assert {c.prim for c in CASES} == {matmul_p, dot_p, einsum_p}
    for prim in (matmul_p, dot_p, einsum_p):
        rules = RULES[prim]
        assert None not in (rules.impl, rules.abstract_eval, rules.jvp, rules.transpose,
                            rules.batch)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@given(data=st.data())
def test_primitive_battery(case, data):
    args = data.draw(case.operands)
    check_primitive(case.prim, *args, params=case.params, order=case.order,
                    linear_argnums=case.linear_argnums)


# -- staged equals numpy, bit for bit, shape and dtype ----------------------------------------

DTYPES = [(np.float64, np.float64), (np.float32, np.float32), (np.int64, np.int64),
          (np.bool_, np.bool_), (np.int32, np.float32), (np.float32, np.float64),
          (np.int8, np.uint8)]

MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                 ((5, 2, 3), (3, 4)), ((3,), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)),
                 ((1, 2, 3), (4, 1, 3, 2)), ((5, 2, 3), (3,)), ((0, 3), (3, 2)),
                 ((2, 0), (0, 3)), ((7, 37), (37, 1)), ((1, 37), (37, 9)), ((9, 40), (40, 33))]
DOT_SHAPES = [((), ()), ((), (3,)), ((2, 3), ()), ((3,), (3,)), ((2, 3), (3,)),
              ((3,), (3, 4)), ((2, 3), (3, 4)), ((2, 3, 4), (4,)), ((4,), (2, 4, 3)),
              ((2, 3, 4), (5, 4, 6)), ((2, 3), (4, 3, 5)), ((3, 7, 50), (50, 9)),
              ((7, 50), (2, 50, 9))]
TENSORDOT_CASES = [((3, 4, 5), (4, 5, 6), 2), ((3, 4), (4, 5), 1), ((3,), (4,), 0),
                   ((2, 3, 4), (4, 3, 2), ([1, 2], [1, 0])), ((2, 3), (3, 2), ([-1], [0])),
                   ((2, 3, 4), (3,), (1, 0)), ((2, 3), (2, 3), 2), ((), (3,), 0),
                   ((6, 40, 5), (5, 40, 7), ([1, 2], [1, 0]))]
EINSUM_CASES = [("ij,jk->ik", (2, 3), (3, 4)), ("ij,jk", (2, 3), (3, 4)),
                ("...ij,...jk->...ik", (5, 2, 3), (3, 4)), ("...ij,...jk", (1, 2, 3), (4, 3, 2)),
                ("ii->i", (3, 3)), ("ii", (3, 3)), ("ij->", (2, 3)), ("i,i", (3,), (3,)),
                ("i,j->ij", (2,), (3,)), ("ijk->kji", (2, 3, 4)), ("...i,i", (2, 3), (3,)),
                ("bij,bjk->bik", (2, 2, 3), (2, 3, 2)), ("i,", (3,), ()),
                ("ij,jk,kl->il", (2, 3), (3, 4), (4, 2)), ("Ab,bC", (2, 3), (3, 4)),
                ("b,A", (2,), (3,)), ("ij,j->i", (2, 3), (1,)),
                ("...j,...j->...", (2, 3), (5, 1, 3)), ("i j -> j", (2, 3)),
                ("iij,kj->ik", (3, 3, 2), (4, 2)), ("ij...->...", (2, 3, 4)),
                ("ij,jk->ik", (9, 40), (40, 33)), ("ijk,jkl->il", (4, 6, 7), (6, 7, 3))]
INNER_SHAPES = [((), (3,)), ((2, 3), ()), ((3,), (3,)), ((2, 3), (3,)), ((2, 3), (4, 3)),
                ((2, 2, 3), (4, 3)), ((3,), (2, 4, 3))]
OUTER_SHAPES = [((3,), (4,)), ((2, 3), (4,)), ((), (3,)), ((2, 2), (3, 1))]
VDOT_SHAPES = [((3,), (3,)), ((2, 3), (6,)), ((2, 3), (3, 2)), ((), ())]
KRON_SHAPES = [((2,), (3,)), ((2, 3), (4, 5)), ((3,), (2, 2)), ((2, 2, 2), (3,)),
               ((), (3,)), ((2, 3), ())]


def _operand(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 5, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _assert_staged_equals_numpy(fun, *args):
    expected = fun(*args)
    got = xform.jit(fun)(*args)
    out_aval = xform.make_graph(fun)(*args).out_avals[0]
    expected = np.asarray(expected)
    assert (out_aval.shape, out_aval.dtype) == (expected.shape, expected.dtype)
    assert np.asarray(got).dtype == expected.dtype
    assert np.array_equal(got, expected), (got, expected)


def _cases(shapes):
    return [(s, d) for s in shapes for d in DTYPES]


@pytest.mark.parametrize("shapes,dtypes", _cases(MATMUL_SHAPES))
def test_matmul_matches_numpy(shapes, dtypes):
    a, b = (_operand(s, d, i) for i, (s, d) in enumerate(zip(shapes, dtypes)))
    _assert_staged_equals_numpy(lambda a, b: a @ b, a, b)
    _assert_staged_equals_numpy(np.matmul, a, b)


@pytest.mark.parametrize("shapes,dtypes", _cases(DOT_SHAPES))
def test_dot_matches_numpy(shapes, dtypes):
    a, b = (_operand(s, d, i) for i, (s, d) in enumerate(zip(shapes, dtypes)))
    _assert_staged_equals_numpy(np.dot, a, b)


@pytest.mark.parametrize("a_shape,b_shape,axes", TENSORDOT_CASES)
@pytest.mark.parametrize("dtypes", DTYPES[:3] + DTYPES[4:5])
def test_tensordot_matches_numpy(a_shape, b_shape, axes, dtypes):
    a, b = _operand(a_shape, dtypes[0], 0), _operand(b_shape, dtypes[1], 1)
    _assert_staged_equals_numpy(lambda a, b: np.tensordot(a, b, axes), a, b)


@pytest.mark.parametrize("subscripts,shapes", [(c[0], c[1:]) for c in EINSUM_CASES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.bool_])
def test_einsum_matches_numpy(subscripts, shapes, dtype):
    operands = [_operand(s, dtype, i) for i, s in enumerate(shapes)]
    _assert_staged_equals_numpy(lambda *xs: np.einsum(subscripts, *xs), *operands)


@pytest.mark.parametrize("name,shapes", [("inner", s) for s in INNER_SHAPES]
                         + [("outer", s) for s in OUTER_SHAPES]
                         + [("vdot", s) for s in VDOT_SHAPES]
                         + [("kron", s) for s in KRON_SHAPES])
@pytest.mark.parametrize("dtypes", DTYPES[:2] + DTYPES[4:6])
def test_products_match_numpy(name, shapes, dtypes):
    a, b = _operand(shapes[0], dtypes[0], 0), _operand(shapes[1], dtypes[1], 1)
    _assert_staged_equals_numpy(getattr(np, name), a, b)


@given(shapes=hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=2,
                                                max_side=6), dtype=xst.float_dtypes)
def test_matmul_matches_numpy_on_any_shapes(shapes, dtype):
    a, b = (_operand(s, dtype, i) for i, s in enumerate(shapes.input_shapes))
    _assert_staged_equals_numpy(np.matmul, a, b)


@given(a_shape=xst.shapes(0, 3, 1, 5), b_shape=xst.shapes(1, 3, 1, 5), n=st.integers(0, 3))
def test_tensordot_matches_numpy_on_any_shapes(a_shape, b_shape, n):
    n = min(n, len(a_shape), len(b_shape))
    b_shape = a_shape[len(a_shape) - n:] + b_shape[n:]
    a, b = _operand(a_shape, np.float64, 0), _operand(b_shape, np.float64, 1)
    _assert_staged_equals_numpy(lambda a, b: np.tensordot(a, b, n), a, b)


@pytest.mark.parametrize("subscripts,template", [
    ("ij,jk->ik", "ij,jk"), ("...ij,...jk", "ABij,Bjk"), ("iij,j->ij", "iij,j"),
    ("ijk->j", "ijk"), ("ij,jk,kl", "ij,jk,kl"), ("...i,i->...", "ABi,i"),
    ("aij,ajk->aik", "aij,ajk")])
@given(data=st.data(), dtype=xst.float_dtypes)
def test_einsum_matches_numpy_on_any_shapes(subscripts, template, data, dtype):
    operands = data.draw(einsum_operands(template, [dtype] * (template.count(",") + 1)))
    _assert_staged_equals_numpy(lambda *xs: np.einsum(subscripts, *xs), *operands)


def test_einsum_interleaved_form_and_optimize_match_numpy():
    a, b = _operand((2, 3), np.float64, 0), _operand((3, 4), np.float64, 1)
    _assert_staged_equals_numpy(lambda a, b: np.einsum(a, [0, 1], b, [1, 26], [26, 0]), a, b)
    _assert_staged_equals_numpy(lambda a: np.einsum(a, [Ellipsis, 1], [1, Ellipsis]), a)
    staged = xform.jit(lambda a, b: np.einsum("ij,jk->ik", a, b, optimize=True))(a, b)
    np.testing.assert_allclose(staged, np.einsum("ij,jk->ik", a, b, optimize=True))


def test_python_scalars_promote_as_numpy_does():
    x = np.arange(3, dtype=np.float32)
    # These functions make Python scalars float64 arrays: no NEP 50 weak promotion.
    for fun in (np.dot, np.inner, np.outer, np.kron,
                lambda x, s: np.tensordot(x, s, 0), lambda x, s: np.einsum("i,", x, s)):
        _assert_staged_equals_numpy(lambda x: fun(x, 2.0), x)
        assert xform.jit(fun)(x, 2.0).dtype == np.float64
        assert xform.make_graph(fun)(x, 2.0).out_avals[0].dtype == np.float64


# -- derivatives of the composed functions and pinned values ---------------------------------

COMPOSED = [
    ("dot_scalar", lambda a, b: np.dot(a, b), [(), (3,)]),
    ("dot_nd", lambda a, b: np.dot(a, b), [(2, 3, 4), (2, 4, 3)]),
    ("tensordot", lambda a, b: np.tensordot(a, b, ([0, 2], [2, 0])), [(2, 3, 4), (4, 2, 2)]),
    ("inner", np.inner, [(2, 3), (4, 3)]),
    ("outer", np.outer, [(2, 2), (3,)]),
    ("vdot", np.vdot, [(2, 3), (6,)]),
    ("kron", np.kron, [(2, 3), (2,)]),
    ("einsum_ellipsis", lambda a, b: np.einsum("...ij,...j->...i", a, b), [(2, 3, 4), (4,)]),
    ("matmul_operator", lambda a, b: a @ b, [(3,), (2, 3, 2)]),
]


@pytest.mark.parametrize("name,fun,shapes", COMPOSED, ids=[c[0] for c in COMPOSED])
def test_composed_derivatives_and_vmap(name, fun, shapes):
    args = tuple(_operand(s, np.float64, i) for i, s in enumerate(shapes))
    check_grads(fun, args, order=2)
    stacked = [np.stack([a, a * 1.5 + 0.25]) for a in args]
    batched = xform.vmap(fun)(*stacked)
    np.testing.assert_allclose(batched, np.stack([fun(*[s[i] for s in stacked])
                                                  for i in range(2)]))


def test_trace_and_diagonal_gradients():
    a = _operand((3, 3), np.float64, 0)
    np.testing.assert_array_equal(xform.grad(lambda a: np.einsum("ii", a))(a), np.eye(3))
    ct = np.arange(3.0)
    grad = xform.grad(lambda a: np.einsum("ii->i", a) @ ct)(a)
    np.testing.assert_array_equal(grad, np.diag(ct))


def test_gradient_sums_over_broadcast_axes():
    a, b = _operand((5, 2, 3), np.float64, 0), _operand((3, 4), np.float64, 1)
    grad = xform.grad(lambda a, b: np.sum(a @ b), argnums=1)(a, b)
    np.testing.assert_allclose(grad, np.sum(a, axis=(0, 1))[:, None] * np.ones((3, 4)))


def test_vmap_shares_an_unmapped_operand():
    xs, w = _operand((4, 2, 3), np.float64, 0), _operand((3, 5), np.float64, 1)
    for fun in (np.matmul, np.dot, lambda x, w: np.einsum("ij,jk->ik", x, w)):
        out = xform.vmap(fun, in_axes=(0, None))(xs, w)
        np.testing.assert_allclose(out, xs @ w)


# -- errors name the user's line ---------------------------------------------------------------

ERRORS = [
    ("matmul", lambda a, b: a @ b, [(2, 3), (4, 5)]),
    ("matmul_batch", lambda a, b: a @ b, [(2, 2, 3), (3, 3, 4)]),
    ("matmul_0d", lambda a, b: np.matmul(a, b[0, 0]), [(2, 3), (4, 5)]),
    ("dot", lambda a, b: np.dot(a, b), [(2, 3), (4, 5)]),
    ("dot_nd", lambda a, b: np.dot(a, b), [(2, 2, 3), (4, 5)]),
    ("tensordot", lambda a, b: np.tensordot(a, b, 1), [(2, 3), (4, 5)]),
    ("tensordot_axes", lambda a, b: np.tensordot(a, b, ([3], [0])), [(2, 3), (4, 5)]),
    ("einsum_sizes", lambda a, b: np.einsum("ij,jk", a, b), [(2, 3), (4, 5)]),
    ("einsum_rank", lambda a, b: np.einsum("ijk,jk", a, b), [(2, 3), (4, 5)]),
    ("einsum_letters", lambda a, b: np.einsum("i1,jk", a, b), [(2, 3), (4, 5)]),
    ("einsum_output", lambda a, b: np.einsum("ij,jk->iz", a, b), [(2, 3), (3, 5)]),
    ("einsum_operands", lambda a, b: np.einsum("ij->i", a, b), [(2, 3), (3, 5)]),
    ("einsum_ellipsis", lambda a, b: np.einsum("...j,jk->k", a, b), [(2, 3), (3, 5)]),
    ("vdot", np.vdot, [(2, 3), (4, 5)]),
]


@pytest.mark.parametrize("name,fun,shapes", ERRORS, ids=[e[0] for e in ERRORS])
def test_shape_errors_name_the_user_line(name, fun, shapes):
    args = [np.ones(s) for s in shapes]
    with pytest.raises((ValueError, IndexError)):
        fun(*args)  # numpy rejects it too
    with pytest.raises(xform.ShapeError) as info:
        xform.jit(fun)(*args)
    assert THIS_FILE in str(info.value)


def test_unsupported_options():
    x = np.ones((2, 2))
    with pytest.raises(xform.UnsupportedError):
        xform.jit(lambda x: np.einsum("ij->i", x, out=np.zeros(2)))(x)
    with pytest.raises(xform.UnsupportedError):
        xform.jit(lambda x: np.dot(x, x, out=np.zeros((2, 2))))(x)
