"""Concrete arrays a staged function captures (a global, a closure cell, a default), indexed
by traced integers (xform/numpy/captured.py): a semi-Lagrangian step whose departure cells
depend on the input gives eager numpy's values on every call, is staged once however the
indices change, and is differentiated as numpy's piecewise-smooth function is."""
import numpy as np
import pytest

import xform
from xform.testing import check_grads

CELLS = 40
GRID = np.linspace(0.0, 1.0, CELLS + 1)[:-1]
FORCING = np.cos(2 * np.pi * GRID)     # a global table


def make_step(velocity):
    """One semi-Lagrangian step; `velocity` is captured in a closure cell."""
    def step(u, c, dt=0.05, source=0.5 * np.sin(2 * np.pi * GRID)):   # a default table
        departure = GRID * CELLS - c * velocity * dt * CELLS       # in cells, traced via c
        cell = np.floor(departure).astype(int)
        w = departure - cell
        i, j = cell % CELLS, (cell + 1) % CELLS
        u_departed = (1 - w) * u[i] + w * u[j]                   # u: traced, indexed
        return u_departed + dt * ((1 - w) * source[i] + w * FORCING[j]) * velocity[i]
    return step


VELOCITY = 1.0 + 0.5 * np.cos(2 * np.pi * GRID)


def march(u0, c):
    u = u0
    step = make_step(VELOCITY)
    for _ in range(3):
        u = step(u, c)
    return np.sum(u * u)


U0 = np.exp(-((GRID - 0.5) / 0.1) ** 2)
# speeds whose departure cells all differ from one another's
SPEEDS = [0.3, 2.7, -1.9, 5.3, 0.3]


def builds():
    return xform.cache_info()["builds"]


def test_values_equal_eager_numpy_and_the_function_is_staged_once():
    staged = xform.jit(march)
    patterns = {tuple(np.floor(GRID * CELLS - c * VELOCITY * 0.05 * CELLS).astype(int))
                for c in SPEEDS}
    assert len(patterns) == len(set(SPEEDS))    # the indices change between calls
    before = builds()
    for c in SPEEDS:
        np.testing.assert_allclose(staged(U0, c), march(U0, c), rtol=1e-13)
    assert builds() - before == 1
    assert "jit of 'march'" not in xform.cache_info()["paths"]     # no guard: one path


def test_gradient_matches_finite_differences_and_is_staged_once():
    gradient = xform.grad(march, argnums=(0, 1))
    before = builds()
    for c in SPEEDS:
        gradient(U0, c)
    assert builds() - before == 1
    for c in SPEEDS[:3]:
        check_grads(march, (U0, c), order=1)


def test_second_derivatives_through_the_transforms_own_wrappers():
    # hessian stages the function inside jacfwd's and jacrev's own closures
    speed = xform.grad(march, argnums=1)
    for c in SPEEDS[:2]:
        fd = (speed(U0, c + 1e-6) - speed(U0, c - 1e-6)) / 2e-6
        assert xform.hessian(march, argnums=1)(U0, c) == pytest.approx(fd, rel=1e-6)
        _, tangent = xform.jvp(lambda c: speed(U0, c), (c,), (1.0,))
        assert tangent == pytest.approx(fd, rel=1e-6)
        check_grads(lambda c: march(U0, c), (c,), order=2)


def test_vmap_over_speeds_equals_a_loop():
    speeds = np.array(SPEEDS)
    want = np.array([march(U0, c) for c in speeds])
    np.testing.assert_allclose(xform.vmap(march, in_axes=(None, 0))(U0, speeds), want,
                               rtol=1e-13)
    grads = xform.vmap(xform.grad(march, argnums=1), in_axes=(None, 0))(U0, speeds)
    np.testing.assert_allclose(grads, [xform.grad(march, argnums=1)(U0, c) for c in speeds],
                               rtol=1e-12)


def test_a_constant_tables_gather_has_zero_derivative_a_traced_tables_its_own():
    def lookup(x, table):
        return np.sum(table[(x * 10).astype(int)] * x) + np.sum(FORCING[(x * 10).astype(int)])
    x = np.array([0.13, 0.55, 0.91, 0.55])
    table = np.linspace(0.0, 1.0, 11) ** 2
    dx, dtable = xform.grad(lookup, argnums=(0, 1))(x, table)
    np.testing.assert_array_equal(dx, table[[1, 5, 9, 5]])     # FORCING's gather: 0
    np.testing.assert_array_equal(dtable, np.bincount([1, 5, 9, 5], weights=x, minlength=11))


def test_each_way_of_capturing_a_table_gathers():
    table = np.array([10.0, 20.0, 30.0, 40.0])

    def closure(x):
        return table[(x * 4).astype(int)] * x

    def default(x, t=table):
        return t[(x * 4).astype(int)] * x

    def keyword_default(x, *, t=table):
        return t[(x * 4).astype(int)] * x

    def global_table(x):
        return FORCING[(x * 4).astype(int)] * x

    class Model:
        def __call__(self, x):
            return table[(x * 4).astype(int)] * x
    for f in (closure, default, keyword_default, global_table, Model()):
        staged = xform.jit(f)
        for x in (np.array([0.1, 0.6]), np.array([0.9, 0.3, 0.3])):
            np.testing.assert_array_equal(staged(x), f(x))


def test_outputs_are_plain_ndarrays():
    out = xform.jit(lambda x: (FORCING * 2, FORCING[(x * 4).astype(int)]))(np.array([0.5]))
    assert type(out[0]) is np.ndarray and type(out[1]) is np.ndarray


def test_a_write_into_a_captured_table_is_refused_at_the_users_line():
    table = np.zeros(4)

    def writes(x):
        table[1] = 2.0
        return table[(x * 4).astype(int)] * x
    with pytest.raises(xform.SideEffectError) as info:
        xform.jit(writes)(np.array([0.3]))
    assert info.value.source.lineno == writes.__code__.co_firstlineno + 1


def test_a_function_assigning_a_global_keeps_numpys_indexing():
    def rebinds(x):
        global FORCING
        FORCING = FORCING
        return FORCING[(x * 4).astype(int)] * x
    with pytest.raises(xform.ConcretizationError, match="np.take"):
        xform.jit(rebinds)(np.array([0.3]))


def test_a_write_into_a_slice_of_a_captured_table_is_refused_and_fresh_arrays_take_writes():
    def writes_slice(x):
        FORCING[2:4][0] = 1.0
        return x
    with pytest.raises(xform.SideEffectError) as info:
        xform.jit(writes_slice)(np.array([0.3]))
    assert info.value.source.lineno == writes_slice.__code__.co_firstlineno + 1

    def writes_fresh(x):
        scaled = 2 * FORCING       # computed while staging: a constant the function owns
        scaled[0] = 5.0
        return scaled[(x * 4).astype(int)] * x
    x = np.array([0.05, 0.3])
    np.testing.assert_array_equal(xform.jit(writes_fresh)(x), writes_fresh(x))


def test_constants_made_while_staging_write_into_an_array_computed_from_a_table():
    def fills(x):
        scaled = 2 * FORCING
        scaled[0:3] = np.arange(3.0)     # a traced constant: numpy's write takes its values
        return scaled[(x * 4).astype(int)] * x
    x = np.array([0.05, 0.3])
    np.testing.assert_array_equal(xform.jit(fills)(x), fills(x))


class Grid:
    def __init__(self):
        self.centres = GRID + 0.5 / CELLS
        self.spacing = 1.0 / CELLS

    def interpolate(self, x):
        cell = (x / self.spacing).astype(int)
        return self.centres[cell % CELLS] * x


GRID_OBJECT = Grid()


def test_an_attribute_of_a_captured_object_gathers_and_is_set_back():
    centres = GRID_OBJECT.centres

    def through_a_global(x):
        return np.sum(GRID_OBJECT.interpolate(x))
    bound = xform.jit(GRID_OBJECT.interpolate)
    for x in (np.array([0.11, 0.52]), np.array([0.93, 0.05, 0.4])):
        np.testing.assert_array_equal(bound(x), GRID_OBJECT.interpolate(x))
        assert xform.grad(through_a_global)(x) == pytest.approx(
            GRID_OBJECT.centres[(x * CELLS).astype(int)], rel=1e-14)
    assert GRID_OBJECT.centres is centres     # the object holds its own array again


def test_a_changed_captured_attribute_is_seen_by_the_next_call():
    grid = Grid()

    def lookup(x):
        return np.sum(grid.centres[(x * CELLS).astype(int)] * x)
    staged = xform.jit(lookup)
    x = np.array([0.3, 0.7])
    assert staged(x) == lookup(x)
    grid.centres[:] = 2.0     # in place: the cache must notice
    assert staged(x) == lookup(x) == 2.0


def test_a_class_body_and_eval_read_the_modules_globals():
    # a class body (LOAD_NAME) and eval read the module's own dict, not the staged copy's
    def with_a_class(x):
        class Scaled:
            factor = FORCING[1]
        return x * Scaled.factor + eval("FORCING[2]")
    assert xform.jit(with_a_class)(1.5) == with_a_class(1.5)
    assert xform.grad(with_a_class)(1.5) == FORCING[1]


def test_a_method_named_eval_leaves_the_gather_in_place():
    class Model:
        def eval(self, values):
            return values * 2.0
    model = Model()

    def evaluates(x):
        return model.eval(FORCING[(x * 4).astype(int)]) * x
    x = np.array([0.1, 0.6])
    np.testing.assert_array_equal(xform.jit(evaluates)(x), evaluates(x))


def test_np_take_of_a_concrete_array_at_traced_indices_stages():
    # the fix the error names for an array the function does not capture: np.take dispatches
    # on its array alone, so a concrete one reaches xform through np.take's stand-in
    def windowed(x):
        i = (x * 4).astype(int)
        return np.take(np.hanning(5), i) * x + np.take(FORCING, i)
    staged = xform.jit(windowed)
    before = builds()
    for x in (np.array([0.1, 0.6]), np.array([0.9, 0.3]), np.array([0.1, 0.6])):
        np.testing.assert_array_equal(staged(x), windowed(x))
    assert builds() - before == 1
    np.testing.assert_array_equal(xform.grad(lambda x: np.sum(windowed(x)))(np.array([0.6])),
                                  np.hanning(5)[[2]])


def test_what_numpy_computes_from_a_captured_table_has_eager_numpys_types():
    seen = []

    def kinds(x):
        seen.append((type(np.sum(FORCING)), type(FORCING.max()), type(FORCING[0]),
                     type(FORCING @ FORCING), isinstance(FORCING, np.ndarray),
                     repr(FORCING[:2])))
        return x * 2
    kinds(1.0)
    xform.jit(kinds)(1.0)
    assert seen[0] == seen[1]


def test_a_callable_objects_own_table_under_second_derivatives():
    class Weighted:
        def __init__(self):
            self.weights = np.arange(10.0) * 2

        def __call__(self, x):
            cell = (x * 9).astype(int)
            return np.sum(self.weights[cell] * x ** 2) + np.sum(FORCING[cell])
    weighted = Weighted()
    x = np.array([0.3, 0.5])
    np.testing.assert_array_equal(xform.grad(weighted)(x), 2 * weighted.weights[[2, 4]] * x)
    np.testing.assert_array_equal(xform.hessian(weighted)(x), np.diag(2 * weighted.weights[[2, 4]]))
    assert type(weighted.weights) is np.ndarray


# -- staging without the copy: a function that reads no captured table runs as it is ---------

def test_a_function_reading_no_table_is_staged_as_it_is_and_one_reading_one_is_copied():
    from xform.numpy.captured import copy_for_staging
    scale = 2.0

    def plain(x):
        return np.sin(x) * scale

    def reads_a_table(x):
        return FORCING[(x * 4).astype(int)] * x
    assert copy_for_staging(plain) == (plain, None)
    staged, undo = copy_for_staging(reads_a_table)
    assert staged is not reads_a_table
    undo()


def _row_of(index):
    return FORCING[index]


def _through_a_helper(index):
    return _row_of(index)


def test_a_table_read_two_calls_down_gathers():
    def outer(x):
        return _through_a_helper((x * 4).astype(int)) * x
    for x in (np.array([0.1, 0.6]), np.array([0.9, 0.3])):
        np.testing.assert_array_equal(xform.jit(outer)(x), outer(x))
    np.testing.assert_array_equal(xform.grad(lambda x: np.sum(outer(x)))(np.array([0.6])),
                                  FORCING[[2]])


SWITCHED = None


def _gathers_once_a_table(x):
    if SWITCHED is None:
        return x * 2.0
    return SWITCHED[(x * 4).astype(int)] * x


def test_a_global_rebound_from_none_to_a_table_gathers_when_staged_again():
    global SWITCHED
    staged = xform.jit(_gathers_once_a_table)
    x = np.array([0.1, 0.6])
    try:
        np.testing.assert_array_equal(staged(x), 2.0 * x)   # staged reading no table
        SWITCHED = np.array([5.0, 6.0, 7.0, 8.0])
        np.testing.assert_array_equal(staged(x), SWITCHED[[0, 2]] * x)
    finally:
        SWITCHED = None


def _bind_a_table():
    globals()["BOUND_WHILE_STAGING"] = np.array([1.0, 2.0, 3.0, 4.0])


BINDER = __import__("types").SimpleNamespace(bind=_bind_a_table)   # no look inside it


def _reads_a_table_bound_while_staging(x):
    BINDER.bind()
    return BOUND_WHILE_STAGING[(x * 4).astype(int)] * x   # noqa: F821 (bound by BINDER)


def test_a_global_unbound_when_staging_begins_is_read_through_the_copy():
    # (bound while staging, it may be a table: only the copy's globals read it as one)
    from xform.numpy.captured import copy_for_staging
    globals().pop("BOUND_WHILE_STAGING", None)
    try:
        staged, undo = copy_for_staging(_reads_a_table_bound_while_staging)
        assert staged is not _reads_a_table_bound_while_staging
        undo()
        x = np.array([0.1, 0.6])
        np.testing.assert_array_equal(xform.jit(_reads_a_table_bound_while_staging)(x),
                                      _reads_a_table_bound_while_staging(x))
    finally:
        globals().pop("BOUND_WHILE_STAGING", None)
