"""In-place writes on traced arrays: every construct against eager numpy under jit, vmap and
grad (finite differences, the dot-product identity, and write-free references), numpy's view
semantics, repeated indices, and the errors with the user's line."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.rules.index import numpy_index
from xform.testing import check_grads
from xform.testing import strategies as xst
from tests.rules.test_index import index_entries
from tests.source_lines import assert_points_at

X = np.array([0.3, -1.2, 2.5, 0.7, -0.4, 1.9])
M = np.arange(12.0).reshape(3, 4) * 0.25 - 1.1


# -- the constructs: each a function of a float array, written as plain numpy ----------------

def set_item(x):
    y = x.copy()
    y[1] = x[0] * 2.0
    return y


def add_into_item(x):
    y = x.copy()
    y[1] += x[2] * x[3]
    return y


def every_augmented_operator(x):
    y = x * 1.0
    y += x
    y -= 0.5 * x
    y *= x
    y /= 2.0 + x * x
    y **= 2
    return y


def concrete_mask(x):
    y = x.copy()
    y[np.array([True, False, True, False, False, True])] = x[:3] ** 2
    return y


def traced_mask(x):
    y = x * 1.0
    y[y > 1.0] = 0.0
    return y


def traced_mask_row(m):
    y = m * 2.0
    y[m[:, 0] > -1.0] = m[0]
    return y


def scale_columns(m):
    y = m.copy()
    y[:, 1:] *= 2.0
    return y


def fancy_write(x):
    y = x.copy()
    y[[0, 4]] = x[[1, 3]] * 3.0
    return y


def repeated_set(x):
    y = x.copy()
    y[[0, 0, 2, 0]] = x[1:5] * 2.0     # numpy keeps the last write: x[4] * 2 at 0
    return y


def repeated_add(x):
    y = x.copy()
    y[[0, 0, 2, 0]] += x[1:5]          # buffered: y[0] = x[0] + x[4], not all three
    return y


def add_at(x):
    y = x.copy()
    np.add.at(y, [0, 0, 2, 0], x[1:5])   # unbuffered: all three accumulate
    np.subtract.at(y, [5], x[0])
    return y


def multiply_at(x):
    y = x.copy()
    np.multiply.at(y, [1, 3, 1], x[:3])          # y[1] * x[0] * x[2], in that order
    np.maximum.at(y, (np.array([0, 5]),), 0.5 * x[2])
    np.divide.at(y, slice(2, 4), 2.0 + x[4:])
    return y


def float_at_into_float32(x):
    y = x.astype(np.float32)
    np.add.at(y, [0, 0, 4], x[1:4])              # added in float64, rounded per result
    np.subtract.at(y, [2], x[5])
    return y


def ufunc_out(x):
    y = np.empty_like(x)
    np.add(x, x * x, out=y)
    np.multiply(y, 2.0, out=y)
    np.sin(y[1:3], out=y[:2])          # overlapping: numpy reads before it writes
    return y


def ufunc_out_where(x):
    y = x.copy()
    np.multiply(y, 3.0, out=y, where=np.array([True, False] * 3))
    np.exp(x, out=y, where=x > 0.5)
    return y


def ufunc_out_tuple(x):
    y = np.zeros_like(x)
    np.subtract(x, 1.0, out=(y,))       # numpy's own form of out=
    return y


def write_through_view(x):
    y = x.copy()
    v = y[1:4]
    v[0] = 5.0 * x[0]                   # seen through y
    v[1:] *= x[4]
    return y


def base_write_seen_by_view(x):
    y = x.copy()
    v = y[1:4]
    before = v * 1.0
    y[2] = x[0] ** 2                    # seen when v is read again
    return v + before


def scalar_element_is_a_copy(x):
    y = x.copy()
    a = y[0]                            # numpy gives a scalar: not a view
    y[0] = 3.0 * a
    return y + a


def view_of_view(m):
    y = m.copy()
    row = y[1]
    tail = row[1:]
    tail[::2] = m[0, :2] * 4.0
    row[0] += tail[2]
    return y


def chained_index(m):
    y = m.copy()
    y[2][1] = m[0, 0] * 7.0             # y[2] is a view: numpy writes into y
    y[[0, 1]][0] = 100.0                # y[[0, 1]] is a copy: y is unchanged
    return y


def transpose_view(m):
    y = m.copy()
    t = y.T
    t[0] = m[:, 3] * 2.0
    y[:, 1] = -m[:, 2]
    return t + 0.0


def swapaxes_and_flip_views(m):
    y = m.copy()
    np.swapaxes(y, 0, 1)[1, 2] = m[0, 0]
    np.flip(y, 0)[0, 0] = m[1, 1]
    y.squeeze()[0, 0] = m[2, 2]
    return y


def reshape_views(m):
    y = m.copy()
    flat = y.reshape(-1)                # y owns its data: a view
    flat[5] = m[0, 0] * 9.0
    y.ravel()[0] = m[1, 1]
    rows = y[1:].reshape(2, 2, 2)       # contiguous rows: a view
    rows[1, 1, 1] = m[0, 1]
    cols = y[:, :2].reshape(-1)         # not contiguous: a copy, y is unchanged
    cols[0] = 100.0
    y[:, ::2].ravel()[0] = 100.0        # ravel copies a non-contiguous view
    t = y.T.reshape(2, 2, 3)            # transposed but reshapeable without a copy
    t[0, 1, 2] = m[2, 3]
    return y + cols.sum()


def recurrence(x):
    y = np.zeros_like(x)
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        y[i] = 0.5 * y[i - 1] + np.sin(x[i])
    return y


def write_after_read(x):
    y = x.copy()
    first = y[:3] * 1.0
    y[:3] = 2.0 * x[3:]                 # the old values are overwritten: zero cotangent
    y[3:] = first
    return y


def like_constructors(x):
    a = np.zeros_like(x)
    a[2] = x[1]
    b = np.ones_like(x)
    b[::2] *= x[::2]
    c = np.full_like(x, 3.0)
    c[-1] = np.sum(x)
    d = np.empty_like(x)
    d[...] = x * 2.0
    e = np.full_like(x, x[0])
    e[0] = 0.0
    return a + b + c + d + e


def fill_and_sort(x):
    y = np.empty_like(x)
    y.fill(x[0])
    z = x * np.arange(6.0)
    z.sort()
    return y + z


def augmented_argument(x):
    v = x[2:]                           # a view of the argument: sees the update
    x += 1.0                            # rebinds x inside; the caller's array is unchanged
    x *= x
    return x + v.sum()


def full_slice_writes(m):
    y = np.zeros_like(m)
    y[:] = m[0]                          # broadcast across rows
    y[1:, :] = m[1:] * 2.0
    y[..., 0] = np.array([[1.0, 2.0, 3.0]])   # leading length-1 axes are dropped
    return y


def overlapping_writes(x):
    y = x.copy()
    y[1:] = y[:-1] * 2.0                # numpy reads the source before writing
    y[::-1] += y
    return y


def traced_mask_among_basic_items(m):
    y = m * 1.0
    y[m[:, 0] > -0.5, 1] = m[0, 0]            # a row mask and a column
    y[2, m[2] > 0.0] = 2.0 * m[1, 3]
    y[..., m[0] < 0.0] = m[:, :1] ** 2        # one value per row
    np.putmask(y, m > 0.5, m[1, :3] * 3.0)   # values cycled over every position
    np.place(y, m < -0.2, m[0, :2] - 1.0)     # values cycled over the True positions
    return y


def fortran_order_views(m):
    y = m.copy()
    v = y.T.ravel(order="F")                # y.T is Fortran-contiguous: a view of y
    v[1] = -7.0
    w = y.reshape(4, 3, order="F")          # y is C-contiguous: a copy
    w[0] = 5.0
    u = y[:, 0].reshape((3, 1), order="F")  # a strided column: a view
    u[2, 0] += 1.0
    return np.concatenate([y.ravel(), w.ravel(order="F")])


def numpy_writing_functions(m):
    y = np.zeros_like(m[:, :3])
    np.fill_diagonal(y, m[0, :2])       # cycled over the diagonal
    z = m.copy()
    np.copyto(z, m * m, where=m > 0.0)
    np.put(z, [0, 5, -1], m[2, :3] * 4.0)
    return np.concatenate([y, z], axis=1)


VECTOR_CASES = [set_item, add_into_item, every_augmented_operator, concrete_mask, traced_mask,
                fancy_write, repeated_set, repeated_add, add_at, multiply_at, ufunc_out, ufunc_out_where,
                ufunc_out_tuple, write_through_view, base_write_seen_by_view,
                scalar_element_is_a_copy, recurrence, write_after_read, like_constructors,
                fill_and_sort, augmented_argument, overlapping_writes]
MATRIX_CASES = [traced_mask_row, scale_columns, view_of_view, chained_index, transpose_view,
                swapaxes_and_flip_views, reshape_views, full_slice_writes,
                numpy_writing_functions, fortran_order_views, traced_mask_among_basic_items]
CASES = [(f, X) for f in VECTOR_CASES] + [(f, M) for f in MATRIX_CASES]
IDS = [f.__name__ for f, _ in CASES]


def eager(f, x):
    """f run by numpy on a copy (augmented_argument writes into its argument, as numpy does)."""
    return f(x.copy())


@pytest.mark.parametrize("f, x", CASES, ids=IDS)
def test_jit_equals_numpy(f, x):
    x_before = x.copy()
    expected = eager(f, x)
    got = xform.jit(f)(x)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(xform.jit(f)(x), expected)    # the cached path
    np.testing.assert_array_equal(x, x_before)                  # never mutated


@pytest.mark.parametrize("f, x", CASES, ids=IDS)
def test_vmap_equals_a_loop(f, x):
    xs = np.stack([x, x * 0.5 - 0.25, x[::-1].copy() * 1.5])
    expected = np.stack([eager(f, row) for row in xs])
    np.testing.assert_allclose(xform.vmap(f)(xs), expected, rtol=1e-14, atol=1e-14)


# np.divmod's quotient (a floor) and the x > 1 mask are piecewise constant; away from their
# jumps, finite differences see what the staged derivatives do.
@pytest.mark.parametrize("f, x", CASES, ids=IDS)
def test_grads(f, x):
    check_grads(f, (x,), order=2)


@pytest.mark.parametrize("f, x", CASES, ids=IDS)
def test_grad_of_a_scalar_loss(f, x):
    out = eager(f, x)
    weights = np.linspace(0.5, 2.0, out.size).reshape(out.shape)
    loss = lambda x: np.sum(f(x) * weights)
    g = xform.grad(loss)(x)
    steps = np.eye(x.size).reshape((x.size,) + x.shape) * 1e-6
    numeric = np.array([(eager(loss, x + s) - eager(loss, x - s)) / 2e-6 for s in steps])
    np.testing.assert_allclose(g.ravel(), numeric, rtol=1e-6, atol=1e-6)


# -- gradients against the same functions written without writes --------------------------------

REFERENCES = [
    (write_after_read, lambda x: np.concatenate([2.0 * x[3:], x[:3]])),
    (repeated_set, lambda x: np.concatenate([x[4:5] * 2.0, x[1:2], x[3:4] * 2.0, x[3:]])),
    (repeated_add, lambda x: np.concatenate([x[:1] + x[4:5], x[1:2], x[2:3] + x[3:4],
                                             x[3:]])),
    (add_at, lambda x: np.concatenate([x[:1] + x[1] + x[2] + x[4], x[1:2], x[2:3] + x[3:4],
                                       x[3:5], x[5:] - x[0]])),
    (traced_mask, lambda x: np.where(x > 1.0, 0.0, x)),
    (write_through_view, lambda x: np.concatenate([x[:1], 5.0 * x[:1], x[2:4] * x[4],
                                                   x[4:]])),
    (scale_columns, lambda m: np.concatenate([m[:, :1], m[:, 1:] * 2.0], axis=1)),
]


@pytest.mark.parametrize("f, reference", REFERENCES, ids=[f.__name__ for f, _ in REFERENCES])
def test_gradient_equals_the_write_free_reference(f, reference):
    x = M if f is scale_columns else X
    np.testing.assert_array_equal(eager(f, x), reference(x))
    weights = np.linspace(-1.0, 2.0, x.size).reshape(x.shape)
    got = xform.grad(lambda x: np.sum(f(x) * weights))(x)
    expected = xform.grad(lambda x: np.sum(reference(x) * weights))(x)
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-14)


def test_overwritten_values_get_zero_cotangent():
    def overwrite(x, v):
        y = x.copy()
        y[[1, 1, 3]] = v                # v[0] is overwritten by v[1]
        y[3] = 0.0                      # and v[2] by a constant, as is x[3]
        return y
    gx, gv = xform.grad(lambda x, v: np.sum(overwrite(x, v) * np.arange(1.0, 7.0)),
                        argnums=(0, 1))(X, np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(gx, [1.0, 0.0, 3.0, 0.0, 5.0, 6.0])
    np.testing.assert_array_equal(gv, [0.0, 2.0, 0.0])


# -- hypothesis: random shapes and indices (repeats allowed) against numpy ----------------------

@st.composite
def writes(draw, with_arrays=True):
    x = draw(xst.arrays(draw(xst.shapes(min_dims=1, max_dims=3)), np.float64))
    index, arrays = draw(index_entries(x.shape, with_arrays))
    where = numpy_index(index, arrays)
    values = draw(xst.arrays(x[where].shape, np.float64))
    return x, where, values


@given(writes())
def test_set_and_add_into_random_indices_equal_numpy(case):
    x, where, values = case

    def set_then_add(x, values):
        y = x.copy()
        y[where] = values
        y[where] += 2.0 * values
        return y
    expected = set_then_add(x, values)
    np.testing.assert_array_equal(xform.jit(set_then_add)(x, values), expected)
    check_grads(set_then_add, (x, values), order=1)


@given(writes(with_arrays=False))
def test_views_of_random_basic_indices_equal_numpy(case):
    x, where, values = case

    def through_view(x, values):
        y = x * 1.0
        v = y[where]
        if np.ndim(v) == 0:             # a full integer index: numpy gives a scalar copy
            return y + v
        v[...] = values * 3.0           # written through the view into y
        y *= 2.0                        # and back into the view
        return y + np.sum(v)
    expected = through_view(x, values)
    np.testing.assert_array_equal(xform.jit(through_view)(x, values), expected)
    check_grads(through_view, (x, values), order=1)


# -- traced indices and integer dtypes ----------------------------------------------------------

def test_traced_integer_index():
    def f(x, i):
        y = x.copy()
        y[i] = x[0] * 10.0
        y[i + 1] += 1.0
        return y
    for i in [0, 3, -2]:
        np.testing.assert_array_equal(xform.jit(f)(X, i), f(X.copy(), i))
    check_grads(lambda x: f(x, 2), (X,), order=2)
    is_ = np.array([0, 4, 1])
    np.testing.assert_array_equal(xform.vmap(f, in_axes=(None, 0))(X, is_),
                                  np.stack([f(X.copy(), i) for i in is_]))


def test_integer_arrays_cast_as_numpy_does():
    def f(x):
        y = (x * 10.0).astype(np.int64)
        y[0] = x[1] * 10.0              # numpy's assignment casts unsafely: truncates
        y[1:3] += 7
        return y
    expected = f(X.copy())
    got = xform.jit(f)(X)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_ufunc_at_computes_in_the_promoted_dtype_and_casts_each_result():
    # numpy adds in float and truncates after each addition: -2 + 1.8 -> 0 -> 1 -> 2
    def f(x, v):
        y = x.copy()
        np.add.at(y, np.array([0, 0, 0]), v)
        np.subtract.at(y, [1, 1], v)
        return y
    x, v = np.array([-2, 2, 1]), np.float64(1.8)
    expected = f(x.copy(), v)
    np.testing.assert_array_equal(expected, [2, -1, 1])      # 2 - 1.8 -> 0 -> -1
    jitted = xform.jit(f)
    for _ in range(2):                                  # first call and the cached one
        np.testing.assert_array_equal(jitted(x, v), expected, strict=True)
    y = float_at_into_float32(X.copy())
    for _ in range(2):
        np.testing.assert_array_equal(xform.jit(float_at_into_float32)(X), y, strict=True)


def test_multiply_at_with_a_traced_index_is_refused():
    def f(x, i):
        y = x.copy()
        np.multiply.at(y, i, 2.0)           # which positions repeat is unknown
        return y
    with pytest.raises(xform.UnsupportedError, match="multiply.at with a traced index"):
        xform.jit(f)(X, np.array([0, 1]))


# -- graphs: the common path stays as it was, and constants fold ---------------------------------

def test_zeros_like_folds_when_nothing_traced_is_written():
    graph = xform.make_graph(lambda x: x * np.sum(np.ones_like(x) + 1.0))(X)
    assert [e.primitive.name for e in graph.equations] == [
        "broadcast_to", "add", "sum", "multiply"]
    folded = xform.passes.optimize(graph)
    assert [e.primitive.name for e in folded.equations] == ["multiply"]
    np.testing.assert_array_equal(xform.jit(lambda x: x * np.sum(np.ones_like(x) + 1.0))(X),
                                  X * 12.0)


def test_reading_stages_no_extra_equations():
    # views remember their base; that costs no equation
    graph = xform.make_graph(lambda m: m[1, :3] * m[:, 2] + m.T[0, 1])(M)
    assert [e.primitive.name for e in graph.equations] == [
        "slice", "reshape", "slice", "reshape", "multiply", "transpose", "slice", "reshape",
        "add"]


# -- errors, each naming the user's line -----------------------------------------------------------

# Arrays the function makes with numpy's constructors stage their writes (as eager numpy
# writes them); arrays made outside, or by numpy's own methods (`A.copy()`), are numpy's to
# write, and a traced value cannot go into them.
OUTSIDE = np.zeros(3)
OUTSIDE_INTEGERS = np.zeros(3, np.int64)


def write_scalar_into_concrete(x, made=lambda: np.zeros(3)):
    y = made()
    y[0] = x[0]                                                   # line: concrete_scalar
    return y


def write_slice_into_concrete(x, made=lambda: np.zeros(3)):
    y = made()
    y[:2] = x[:2]                                                 # line: concrete_slice
    return y


def add_into_concrete(x, made=lambda: np.zeros(3)):
    y = made()
    y[1] += x[0]                                                  # line: concrete_add
    return y


def write_into_concrete_integers(x, made=lambda: np.zeros(3, np.int64)):
    y = made()
    y[2] = x[0] > 0                                               # line: concrete_int
    return y


def write_at_a_traced_index(x, made=lambda: np.zeros(3)):
    y = made()
    y[np.argmax(x)] = 1.0                                         # line: concrete_index
    return y


CONCRETE_WRITES = [(write_scalar_into_concrete, "concrete_scalar"),
                   (write_slice_into_concrete, "concrete_slice"),
                   (add_into_concrete, "concrete_add"),
                   (write_into_concrete_integers, "concrete_int"),
                   (write_at_a_traced_index, "concrete_index")]


@pytest.mark.parametrize("fun, tag", CONCRETE_WRITES)
def test_writes_into_an_array_the_function_makes_stage(fun, tag):
    x = np.array([0.5, 2.0, -1.0])
    np.testing.assert_array_equal(xform.jit(fun)(x), fun(x))
    xs = np.array([[0.5, 2.0, -1.0], [3.0, -2.0, 0.25]])
    np.testing.assert_array_equal(xform.vmap(fun)(xs), np.stack([fun(r) for r in xs]))
    if fun(x).dtype.kind == "f":
        check_grads(lambda y: np.sum(fun(y) ** 2), (x,), order=1)


@pytest.mark.parametrize("fun, tag", CONCRETE_WRITES)
@pytest.mark.parametrize("transform", [xform.jit, lambda f: xform.grad(lambda x: np.sum(f(x))),
                                       xform.vmap], ids=["jit", "grad", "vmap"])
def test_write_into_a_concrete_array(fun, tag, transform):
    outside = OUTSIDE_INTEGERS if tag == "concrete_int" else OUTSIDE

    def made_outside(x):
        return fun(x, made=outside.copy)      # numpy's own method: a concrete array
    x = np.ones(3) if transform is not xform.vmap else np.ones((2, 3))
    with pytest.raises(xform.ConcretizationError) as info:
        transform(made_outside)(x)
    assert_points_at(info.value, __file__, tag, fun.__name__)
    assert "concrete numpy array" in info.value.cause
    for fix in ("np.zeros_like(x)", "xform.index_add", "np.stack"):
        assert fix in info.value.hint


def write_into_argument(x):
    x[0] = 0.0                                                    # line: argument
    return x


def write_into_argument_view(x):
    v = x[1:]
    v[0] = 0.0                                                    # line: argument_view
    return x


def add_at_into_argument(x):
    np.add.at(x, [0], 1.0)                                        # line: argument_at
    return x


@pytest.mark.parametrize("fun, tag", [
    (write_into_argument, "argument"), (write_into_argument_view, "argument_view"),
    (add_at_into_argument, "argument_at")])
def test_write_into_an_argument(fun, tag):
    x = np.ones(3)
    with pytest.raises(xform.TypeCheckError) as info:
        xform.jit(fun)(x)
    assert_points_at(info.value, __file__, tag, fun.__name__)
    assert "caller's array" in info.value.cause and "x.copy()" in info.value.hint
    np.testing.assert_array_equal(x, np.ones(3))


def write_from_a_branch(x):
    y = x.copy()

    def branch(x):
        y[0] = x[1]                                               # line: nested
        return x
    return xform.cond(x[0] > 0, branch, lambda x: x, x), y


def write_a_read_only_view(x):
    y = x.copy()
    np.diagonal(y)[0] = 1.0                                       # line: read_only
    return y


def traced_mask_with_values_per_entry(x):
    y = x.copy()
    y[x > 0] = np.arange(3.0)                                     # line: mask_values
    return y


def test_a_traced_mask_with_one_value_per_true_entry():
    # The count of True entries is read from the call's values (and guarded): a call with
    # another count fails as eagerly, where numpy's assignment cannot fit the values.
    fun = xform.jit(traced_mask_with_values_per_entry)
    for x in (np.array([1.0, -1.0, 2.0, 3.0]), np.array([-1.0, 1.0, 2.0, 3.0])):
        np.testing.assert_array_equal(fun(x), traced_mask_with_values_per_entry(x))
    with pytest.raises(ValueError):
        traced_mask_with_values_per_entry(np.ones(2))
    with pytest.raises(xform.ShapeError):
        fun(np.ones(2))
    with pytest.raises(xform.ConcretizationError) as info:    # a staging without values
        xform.make_graph(traced_mask_with_values_per_entry)(xform.ShapedArray((4,),
                                                                              np.float64))
    assert_points_at(info.value, __file__, "mask_values", "traced_mask_with_values_per_entry")


def add_a_float_into_integers(x):
    y = x.astype(np.int64)
    y += 1.5                                                      # line: casting
    return y


def out_into_concrete(x):
    return np.add(x, 1.0, out=OUTSIDE)                            # line: out_concrete


@pytest.mark.parametrize("fun, tag, error, fragment, x", [
    (write_from_a_branch, "nested", xform.UnsupportedError, "enclosing function", np.ones(3)),
    (write_a_read_only_view, "read_only", xform.TypeCheckError, "read-only", np.ones((2, 2))),
    (add_a_float_into_integers, "casting", xform.TypeCheckError, "same_kind", np.ones(3)),
    (out_into_concrete, "out_concrete", xform.UnsupportedError, "concrete numpy array",
     np.ones(3)),
])
def test_writes_that_cannot_be_staged(fun, tag, error, fragment, x):
    with pytest.raises(error) as info:
        xform.jit(fun)(x)
    assert_points_at(info.value, __file__, tag,
                     "branch" if fun is write_from_a_branch else fun.__name__)
    assert fragment in info.value.cause


def test_numpy_agrees_these_are_errors():
    with pytest.raises(ValueError, match="read-only"):
        write_a_read_only_view(np.ones((2, 2)))
    with pytest.raises(TypeError, match="same_kind"):
        add_a_float_into_integers(np.ones(3))


def test_a_view_read_inside_a_branch_is_not_refreshed_by_later_writes():
    def f(x):
        y = x.copy()
        kept = []

        def branch(x):
            kept.append(y[1:3])             # a view of the enclosing y, made inside
            return x + kept[0].sum()
        z = xform.cond(x[0] > 0, branch, lambda x: x * 1.0, x)
        y[1] = 100.0                        # must not rebind the inner tracer
        return z + y
    np.testing.assert_array_equal(xform.jit(f)(X), f(X.copy()))


@pytest.mark.parametrize("f", [recurrence, repeated_set, write_through_view, ufunc_out_where],
                         ids=lambda f: f.__name__)
def test_vmap_of_grad_equals_a_loop(f):
    loss = lambda x: np.sum(f(x) ** 2)
    xs = np.stack([X, X * 0.5 - 0.25])
    expected = np.stack([xform.grad(loss)(x) for x in xs])
    np.testing.assert_allclose(xform.vmap(xform.grad(loss))(xs), expected, rtol=1e-14)
    np.testing.assert_allclose(xform.jit(xform.vmap(xform.grad(loss)))(xs), expected,
                               rtol=1e-14)


VIEW_STEPS = {
    "transpose": lambda a: a.T,
    "flip": lambda a: np.flip(a, 0),
    "swap": lambda a: np.swapaxes(a, 0, -1),
    "ravel": lambda a: a.ravel(),
    "reshape": lambda a: a.reshape(-1, 2) if a.size % 2 == 0 else a.reshape(1, -1),
    "every_other": lambda a: a[::2],
    "drop_first": lambda a: a[1:] if len(a) > 1 else a,
    "row": lambda a: a[0] if a.ndim > 1 else a[:1],
    "expand": lambda a: np.expand_dims(a, 0),
    "squeeze": lambda a: a.squeeze(),
    "reverse": lambda a: a[::-1],
    "newaxis_last": lambda a: a[..., None],
    "moveaxis": lambda a: np.moveaxis(a, 0, -1),
    "fortran_block": lambda a: a.T[:, :1].reshape(-1),
}


@given(st.lists(st.sampled_from(sorted(VIEW_STEPS)), min_size=1, max_size=4),
       st.sampled_from([(4, 6), (2, 3, 4), (12,)]))
def test_chains_of_views_and_copies_equal_numpy(steps, shape):
    """Whatever numpy makes of a chain (views, or copies where a reshape or ravel must
    copy), a write through its end and a write into the base read back as in numpy."""
    def chain(x):
        y = x * 1.0
        v = y
        for step in steps:
            v = VIEW_STEPS[step](v)
        v[(0,) * v.ndim] = -100.0        # through the chain into y, where numpy's is a view
        y *= 2.0                         # and back into the chain's live views
        return y, v * 1.0
    x = np.arange(float(np.prod(shape))).reshape(shape)
    try:
        expected = chain(x)
    except IndexError:                   # e.g. slicing a 0-d result: xform refuses it too
        with pytest.raises(xform.ShapeError):
            xform.jit(chain)(x)
        return
    got = xform.jit(chain)(x)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


def rows_kept_while_writing(x):
    u = np.zeros((4, x.size))
    u[0] = x
    first = u[0]              # a view: sees later writes to row 0 only
    for t in range(3):
        u[t + 1] = u[t] * 0.5 + first
        if t == 1:
            u[0] = -x         # seen through `first`, as numpy's view shows it
    return u, first, u.T[1]


def test_updates_in_place_keep_numpys_view_semantics():
    # Compiled code writes into a buffer in place when nothing reads its old value; the
    # views of it that are still read keep it from doing so where they would see the write.
    x = np.array([1.0, -2.0, 0.5])
    compiled = xform.jit(rows_kept_while_writing)
    for _ in range(2):        # the second call runs the compiled code
        for got, expected in zip(compiled(x), rows_kept_while_writing(x)):
            np.testing.assert_array_equal(got, expected)
    check_grads(lambda y: np.sum(rows_kept_while_writing(y)[0] ** 2), (x,), order=1)


def test_an_update_in_place_is_compiled_as_an_item_assignment():
    from xform.api.pipeline import finish_graph
    from xform.codegen import compile_graph

    def fill(x):
        u = np.zeros(4)
        for i in range(4):
            u[i] = x[i % 2] * i
        return u
    source = compile_graph(finish_graph(xform.make_graph(fill)(np.ones(2))), False,
                           "exact").source
    assert source.count("] = ") == 3       # the first write copies the constant zeros
    np.testing.assert_array_equal(xform.jit(fill)(np.array([2.0, 3.0])),
                                  fill(np.array([2.0, 3.0])))
