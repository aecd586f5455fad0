"""Stand-in groups (xform/numpy/stand_ins.py `without_group`), numpy.random's module functions
(`np.random.randn`) and numpy's constructors (`np.array` of traced values), are in place only
for stagings that can reach them (xform/runtime/effects.py decides): every way of reaching
them still works, and a function that cannot reach them stages without them."""
import threading

import numpy as np
import numpy.random as npr
import pytest
import scipy.linalg

import xform
import xform.numpy.stand_ins
from xform.numpy.construct import CONSTRUCTORS_GROUP, CONTAINERS_GROUP
from xform.numpy.random import LEGACY_GROUP
from xform.numpy.stand_ins import groups_unreached, staging_scope, without_group
from xform.scipy import SCIPY_GROUP

ORIGINAL_RANDN = np.random.randn
ORIGINAL_ARRAY = np.array
LEGACY, CONSTRUCTORS = LEGACY_GROUP, CONSTRUCTORS_GROUP


def groups_in_place():
    # (read through xform's module by name: an object of the test's would hide the function
    # from the walk, which then keeps every stand-in)
    depth = xform.numpy.stand_ins._group_depth
    return (depth.get(LEGACY, 0) > 0) + 2 * (depth.get(CONSTRUCTORS, 0) > 0)


def test_the_scope_leaves_a_skipped_group_alone_and_restores_it():
    with without_group(LEGACY_GROUP), staging_scope():
        assert np.random.randn is ORIGINAL_RANDN
        assert np.array is not ORIGINAL_ARRAY           # the other stand-ins are in place
        with without_group(), staging_scope():          # a nested staging that needs them
            assert np.random.randn is not ORIGINAL_RANDN
        assert np.random.randn is ORIGINAL_RANDN        # gone with it; the outer one is open
        assert np.array is not ORIGINAL_ARRAY
    with staging_scope():
        assert np.random.randn is not ORIGINAL_RANDN
    assert np.random.randn is ORIGINAL_RANDN and np.array is ORIGINAL_ARRAY


def test_the_innermost_without_group_decides():
    with without_group(LEGACY_GROUP):
        with without_group():
            with staging_scope():
                assert np.random.randn is not ORIGINAL_RANDN
        with staging_scope():
            assert np.random.randn is ORIGINAL_RANDN


def test_without_group_is_this_threads_only():
    seen = []

    def other_thread():
        with staging_scope():
            seen.append(np.random.randn is not ORIGINAL_RANDN)
    with without_group(LEGACY_GROUP):
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
    assert seen == [True]
    assert np.random.randn is ORIGINAL_RANDN


@pytest.mark.parametrize("names, reached", [
    ({"np", "sum", "sin", "linalg", "solve", "fft", "pi", "float64"}, set()),
    ({"np", "random", "normal"}, {LEGACY_GROUP, CONSTRUCTORS_GROUP}),  # a numpy submodule
    ({"random_state"}, {LEGACY_GROUP}),
    ({"np", "array"}, {CONSTRUCTORS_GROUP}),
    ({"P", "polynomial", "polyval"}, {CONSTRUCTORS_GROUP}),   # np.polynomial calls np.array
    ({"vectorize"}, {CONSTRUCTORS_GROUP}),
    ({"r_"}, {CONSTRUCTORS_GROUP})])
def test_the_names_that_reach_each_group(names, reached):
    assert {LEGACY_GROUP, CONSTRUCTORS_GROUP} - groups_unreached(names) == reached


def plain(x):
    return np.sum(np.sin(x)) * (1 + groups_in_place())


def names_numpy_random(x):
    _ = np.random.default_rng  # named, not called: still a way to numpy.random
    return np.sum(np.sin(x)) * (1 + groups_in_place())


def builds_an_array(x):
    return np.sum(np.sin(np.array([x[0], x[1], x[2]]))) * (1 + groups_in_place())


def _plain_helper(x):
    return np.sin(x)


def hands_itself_to_xform(x):       # xform called through its module: the walk stays complete
    return np.sum(xform.stop_gradient(0.0) + _plain_helper(x)) * (1 + groups_in_place())


@pytest.mark.parametrize("function, in_place", [
    (plain, 0), (names_numpy_random, 3), (builds_an_array, 2), (hands_itself_to_xform, 0)])
def test_a_staging_has_the_stand_ins_only_if_its_function_can_reach_them(function, in_place):
    x = np.linspace(0.0, 1.0, 3)
    for _ in range(2):     # a fresh function each time: the second is the walk's memo hit
        fresh = lambda x: function(x)
        np.testing.assert_allclose(xform.grad(fresh)(x), np.cos(x) * (1 + in_place))


def members_in_place():
    # 1: np.sum's stand-in of numpy's functions of lists is in place, 2: np.mean's
    depth = xform.numpy.stand_ins._group_depth
    return ((depth.get((CONTAINERS_GROUP, "sum"), 0) > 0)
            + 2 * (depth.get((CONTAINERS_GROUP, "mean"), 0) > 0))


def sums_a_list(x):
    return np.sum([x, 2.0 * x]) * (1 + members_in_place())


def takes_the_mean_of_a_list(x):
    return np.mean([x, 2.0 * x]) * (1 + members_in_place())


@pytest.mark.parametrize("function, in_place, slope", [
    (sums_a_list, 1, 3.0), (takes_the_mean_of_a_list, 2, 1.5)])
def test_numpy_functions_of_lists_are_in_place_as_the_code_names_them(function, in_place, slope):
    # code spelling `sum` has np.sum's stand-in, not the group's 44 others
    for _ in range(2):
        fresh = lambda x: function(x)
        assert xform.grad(fresh)(0.5) == slope * (1 + in_place)
    assert groups_unreached({"np", "sum"}) >= {(CONTAINERS_GROUP, frozenset({"sum"}))}
    assert CONTAINERS_GROUP in groups_unreached({"np", "sin"})
    assert not any(CONTAINERS_GROUP in str(group)
                   for group in groups_unreached({"np", "sum", "mean", "max", "norm", "dot"} | {
                       f.__name__ for f in xform.numpy.construct._OF_LISTS}))


def test_without_the_group_of_functions_of_lists_none_of_them_is_in_place():
    with without_group(CONTAINERS_GROUP), staging_scope():
        assert members_in_place() == 0
    with without_group((CONTAINERS_GROUP, frozenset({"sum"}))), staging_scope():
        assert members_in_place() == 1
    with staging_scope():
        assert members_in_place() == 3


def _array_of(x):
    return np.array([x, 2 * x])


def test_a_static_function_argument_is_walked_too():
    staged = xform.jit(lambda x, make: np.sum(make(x)), static_argnums=1)
    np.testing.assert_allclose(staged(1.5, _array_of), 4.5)
    grad = xform.grad(lambda x, make: np.sum(make(x)), static_argnums=1)
    np.testing.assert_allclose(grad(1.5, _array_of), 3.0)


def test_a_function_that_xform_holds_keeps_every_stand_in():
    from xform.testing import check_grads
    check_grads(lambda x: np.sum(np.array([x, np.sin(x)])), (0.3,), order=1)


# -- every way to numpy.random's module functions still draws on every call ----------------------

def _draw():
    return np.random.randn()


def _depth5():
    return _draw()


def _depth4():
    return _depth5()


def _depth3():
    return _depth4()


def _depth2():
    return _depth3()


def through_a_deep_chain(x):         # deeper than the walk follows functions
    return x + _depth2()


def through_an_alias(x):             # `import numpy.random as npr`
    return x + npr.randn()


def through_getattr(x):              # a name computed at run time
    return x + getattr(np, "ran" "dom").randn()


class Sampler:
    def draw(self):
        return np.random.randn()


SAMPLER = Sampler()


def through_a_method(x):             # an object's method: the walk does not follow it
    return x + SAMPLER.draw()


def _library_draw():
    return np.random.randn()


_library_draw.__module__ = "scipy._a_library"   # a library the walk does not enter


def through_a_library(x):
    return x + _library_draw()


@pytest.mark.parametrize("function", [through_a_deep_chain, through_an_alias, through_getattr,
                                      through_a_method, through_a_library],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("transform", ["jit", "grad"])
def test_each_way_to_the_global_generator_draws_on_every_call(function, transform):
    staged = xform.jit(function) if transform == "jit" else xform.grad(function)
    np.random.seed(5)
    got = [staged(0.5) for _ in range(3)]
    np.random.seed(5)
    eager = [function(0.5) for _ in range(3)]
    if transform == "jit":
        np.testing.assert_array_equal(got, eager)
        assert got[0] != got[1]
    else:
        assert got == [1.0] * 3
        np.random.seed(5)
        staged(0.5)
        assert np.random.randn() == eager[1] - 0.5      # the gradient's call drew once


def test_a_generator_passed_as_a_static_argument_draws_on_every_call():
    def f(x, rng):
        return x + rng.standard_normal()
    staged = xform.jit(f, static_argnums=1)
    rng, twin = np.random.default_rng(0), np.random.default_rng(0)
    got = [staged(0.5, rng) for _ in range(3)]
    np.testing.assert_array_equal(got, [f(0.5, twin) for _ in range(3)])


def test_a_draw_function_passed_as_an_argument_draws_on_every_call():
    def f(x, draw):
        return x * draw()
    np.random.seed(1)
    gradients = [xform.grad(f)(0.5, np.random.randn) for _ in range(3)]
    values = [xform.jit(f, static_argnums=1)(0.5, np.random.randn) for _ in range(3)]
    np.random.seed(1)
    eager = [np.random.randn() for _ in range(6)]
    np.testing.assert_array_equal(gradients, eager[:3])
    np.testing.assert_array_equal(values, [0.5 * d for d in eager[3:]])


def _scipy_stand_ins_in_place():
    return xform.numpy.stand_ins._group_depth.get(SCIPY_GROUP, 0) > 0


def _without_scipy(x):
    return np.sum(x * x) * (1 + _scipy_stand_ins_in_place())


def _with_scipy(x):
    return np.sum(scipy.linalg.expm(np.diag(x))) * (1 + _scipy_stand_ins_in_place())


def test_scipy_stand_ins_are_in_place_only_where_the_code_can_reach_scipy():
    # SciPy imported: its stand-ins are set around the stagings of code that can call it
    x = np.array([0.5, 1.0])
    for _ in range(2):      # a fresh function each time: the second is the walk's memo hit
        np.testing.assert_allclose(xform.grad(lambda x: _without_scipy(x))(x), 2 * x)
        np.testing.assert_allclose(xform.grad(lambda x: _with_scipy(x))(x), 2 * np.exp(x))
    assert SCIPY_GROUP not in groups_unreached({"np", "scipy.special", "logsumexp"})
    assert SCIPY_GROUP in groups_unreached({"np", "sum", "special"})
