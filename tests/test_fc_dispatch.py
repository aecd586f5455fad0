"""The first call's bookkeeping around staging: what it leaves behind and what it must keep
noticing (issue 30, part 5)."""
import gc
import types

import numpy as np
import pytest

import xform


def _sum(x):
    return np.sum(x)


def _sin_times(x):
    return np.sin(x) * x + 1.0


def _branchy(x):
    if x > 0:
        return x * 3.0
    return x * 2.0


_INPUTS = np.linspace(-1.0, 1.0, 12).reshape(3, 4)


def _layer(w):     # simplify rewrites in it (its closures must leave no cycle either)
    hidden = w @ _INPUTS
    return np.sum((1.0 - hidden * (hidden > 0)) ** 2)


@pytest.mark.parametrize("fun, arg", [(_sum, np.arange(5.0)), (_sin_times, 0.7),
                                      (_branchy, 0.5), (_branchy, -0.5),
                                      (_layer, np.ones((2, 3)))])
def test_a_first_call_leaves_no_garbage_cycles(fun, arg):
    # A cycle (an entry and the first tier that promotes it) would leave every first call's
    # graph to the collector, whose collections cost first calls in a loop ~5%.
    # Only cycles of xform's objects made by these calls count: a dask cluster's threads,
    # left by an earlier test, make garbage meanwhile and release what they held.
    fresh = [types.FunctionType(fun.__code__, fun.__globals__) for _ in range(3)]
    was_enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        gc.garbage.clear()
        earlier = {id(o) for o in gc.get_objects()}
        for f in fresh:
            xform.grad(f)(arg)
        del f, fresh
        gc.collect()
        assert [o for o in _xforms(gc.garbage) if id(o) not in earlier] == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()


def _xforms(objects):
    """Those of `objects` that are xform's: instances of its classes, its functions."""
    def module(value):
        return getattr(value, "__module__", None) or ""
    return [o for o in objects if module(type(o)).startswith("xform")
            or callable(o) and module(o).startswith("xform")]


def test_a_dead_functions_first_call_entry_leaves_the_cache_at_once():
    before = xform.cache_info()["entries"]
    was_enabled = gc.isenabled()
    gc.disable()    # by reference counting alone
    try:
        f = types.FunctionType(_sum.__code__, _sum.__globals__)
        grad = xform.grad(f)
        assert np.array_equal(grad(np.arange(3.0)), np.ones(3))
        assert xform.cache_info()["entries"] == before + 1
        del f, grad
        assert xform.cache_info()["entries"] == before
    finally:
        if was_enabled:
            gc.enable()


def test_a_promoted_first_tier_and_its_paths_still_name_their_entry():
    # held weakly now: the entry is specialized and the paths counted while it lives
    g = xform.grad(_branchy)
    assert g(0.5) == 3.0 and g(0.5) == 3.0      # the second call compiles in place
    assert g(-0.5) == 2.0 and g(-0.5) == 2.0    # a second path
    assert sum(n for name, n in xform.cache_info()["paths"].items()
               if "_branchy" in name) == 2


@pytest.mark.parametrize("transform, name", [(xform.grad, "grad"),
                                             (xform.value_and_grad, "value_and_grad")])
def test_static_positions_shared_by_transforms_made_anew_still_refuse_an_overlap(transform,
                                                                                  name):
    def f(x, y):
        return np.sum(x * y)
    for _ in range(2):    # the second transform finds the positions of the first's options
        with pytest.raises(xform.errors.TypeCheckError, match=f"^{name}: argnums 0 and the "
                                                              "static arguments"):
            transform(f, argnums=0, static_argnums=0)(np.ones(2), np.ones(2))
    result = transform(f, argnums=0, static_argnums=1)(np.ones(2), 3)
    assert np.array_equal(result if name == "grad" else result[1], np.full(2, 3.0))


def test_a_function_found_impure_is_remembered_while_it_lives():
    from xform.api import dispatch
    f = types.FunctionType(_sum.__code__, _sum.__globals__)
    g = types.FunctionType(_sum.__code__, _sum.__globals__)
    dispatch.note_impure(f)
    assert dispatch.impure(f) and not dispatch.impure(g)
    key = id(f)
    del f
    assert key not in dispatch._impure     # forgotten with it: its id may be reused

    class Slotted:      # not weakly referable: never remembered, and no error
        __slots__ = ()

        def __call__(self):
            return 0.0
    slotted = Slotted()
    dispatch.note_impure(slotted)
    assert not dispatch.impure(slotted)


def _function_and_fresh_copy(source, **namespace):
    namespace["np"] = np
    exec(source, namespace)
    f = namespace["f"]
    return f, types.FunctionType(f.__code__, namespace), namespace


def test_a_staged_copys_answer_is_remembered_for_reads_compared_by_identity(monkeypatch):
    from xform.runtime import effects
    f, fresh, _ = _function_and_fresh_copy("def f(x):\n    return np.sum(helper(x))\n"
                                           "def helper(x):\n    return x * 2.0\n")
    calls = []
    copy = effects.copy_for_staging
    monkeypatch.setattr(effects, "copy_for_staging", lambda fun: calls.append(fun) or copy(fun))
    with effects.Watch(f):
        assert effects.staged_copy(f) == (f, None)
    with effects.Watch(fresh):      # the same code reading the same functions
        assert effects.staged_copy(fresh) == (fresh, None)
    assert calls == [f]


def test_a_staged_copy_is_made_anew_where_a_read_is_not_compared_by_identity():
    # A number is read as it is, an array through a copy; the walk's check takes any number
    # or array for another, so the first answer must not serve the second function.
    f, fresh, namespace = _function_and_fresh_copy("def f(x):\n    return x * TABLE\n",
                                                   TABLE=2.0)
    from xform.runtime import effects
    with effects.Watch(f):
        assert effects.staged_copy(f) == (f, None)
    namespace["TABLE"] = np.arange(3.0)
    with effects.Watch(fresh):
        staged, undo = effects.staged_copy(fresh)
    assert staged is not fresh
    undo()
    assert np.array_equal(xform.grad(lambda x: np.sum(fresh(x)))(np.ones(3)), np.arange(3.0))
