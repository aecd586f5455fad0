"""The cached call path's one table (xform.api.dispatch.call_key): calls of one transformed
function on one argument, on several, with and without static values, each find their own
entry, never another call's."""
import numpy as np
import pytest

import xform
from xform.api import dispatch


def _served_by_the_cached_path(transformed, *args):
    """`transformed(*args)`, and whether the cached call path served it (no build, no
    lookup by the full key: `_build_and_call` is not reached)."""
    reached = []

    def build_and_call(*a, **k):
        reached.append(a)
        return type(transformed)._build_and_call(transformed, *a, **k)
    transformed._build_and_call = build_and_call
    try:
        return transformed(*args), not reached
    finally:
        del transformed._build_and_call


def _total(*xs):
    return sum(np.sum(x) * (i + 1) for i, x in enumerate(xs)) + 10.0 * len(xs)


def _total_taking_keywords(*xs, scale=1.0):
    return _total(*xs) * scale


@pytest.mark.parametrize("total", [_total, _total_taking_keywords])
def test_one_and_several_arguments_whose_keys_look_alike_keep_their_own_entries(total):
    jitted = xform.jit(total)
    assert isinstance(jitted, dispatch.KeywordCall) == (total is _total_taking_keywords)
    # one array of shape (2, 3) against the ints 2 and 3 (jit traces them); a 0-d array
    # against a float, a numpy float and two floats; one array against three arguments
    calls = [(np.full((2, 3), 0.5),), (2, 3), (np.asarray(1.5),), (1.5,), (1.5, 2.5),
             (np.float64(1.5),), (np.ones(2), np.ones(3), 2.0), (np.ones(2),), (True, 2)]
    for args in calls:
        jitted(*args)
    assert len(jitted._entries) == len(calls)
    for _ in range(2):
        for args in reversed(calls):
            result, served = _served_by_the_cached_path(jitted, *args)
            assert served
            np.testing.assert_allclose(result, total(*args), rtol=1e-15)


def test_a_traced_int_is_keyed_by_its_type_and_a_static_int_by_its_value():
    def shifted(x, n, m):
        return np.sum(x[:n]) + m     # n in a slice: static; m: traced
    jitted = xform.jit(shifted, static_argnums=1)
    x = np.arange(1.0, 5.0)
    jitted(x, 2, 1)
    jitted(x, 2, 1)
    builds = xform.cache_info()["builds"]
    for n, m in ((2, 7), (3, 1), (3, 8), (2, 1)):
        for _ in range(2):
            assert jitted(x, n, m) == shifted(x, n, m)
    assert xform.cache_info()["builds"] == builds + 1    # a new n only, never a new m

    traced = xform.jit(lambda x, m: x * m)
    for m in (1, 2, 3):
        np.testing.assert_array_equal(traced(x, m), x * m)
    assert list(traced._entries) == [((x.shape, x.dtype), int)]
    _, served = _served_by_the_cached_path(traced, x, 4)
    assert served


def test_static_and_traced_calls_of_one_function_alternate_on_the_cached_path():
    grad = xform.grad(lambda w, i: np.sum(w ** 2) * i)
    w = np.arange(1.0, 4.0)
    grad(w, 2)      # 2 is static (grad reads no int), 2.0 is traced
    grad(w, 2.0)
    for _ in range(2):
        for i in (2, 2.0):
            result, served = _served_by_the_cached_path(grad, w, i)
            assert served
            np.testing.assert_allclose(result, 2 * w * i)
    assert dispatch.call_key((w, 2), by_value=True) in grad._entries
    assert dispatch.call_key((w, 2.0)) in grad._entries


def test_entries_with_static_values_are_counted_once_per_key_and_bounded(monkeypatch):
    monkeypatch.setattr(dispatch, "STATIC_RESTAGING_LIMIT", 2)
    grad = xform.grad(lambda w, i: np.sum(w[:i] ** 2))
    w = np.arange(1.0, 7.0)

    def want(i):
        return np.where(np.arange(6) < i, 2 * w, 0.0)
    with pytest.warns(xform.RestagingWarning):
        for i in (1, 2, 3):
            grad(w, i)
    assert grad._static_entry_count == 3
    xform.clear_cache()     # the entries go stale: a key filed again is not counted again
    grad(w, 1)
    assert grad._static_entry_count == 3
    result, served = _served_by_the_cached_path(grad, w, 1)
    assert served
    np.testing.assert_allclose(result, want(1))
    for i in (4, 5, 6):
        grad(w, i)
    assert grad._static_entry_count == 4         # twice the limit, then no more are filed
    for i in (4, 5, 6):
        result, served = _served_by_the_cached_path(grad, w, i)
        assert served == (i == 4)
        np.testing.assert_allclose(result, want(i))


def test_jax_arrays_with_static_values_are_served_by_the_cached_path_under_xla():
    import jax.numpy as jnp     # the test extra has jax (as tests/test_xla_backend.py)
    head = xform.jit(lambda x, n: x[:n] * 2.0, static_argnums=1, backend="xla")
    x = jnp.arange(4.0)
    for n in (2, 3):
        head(x, n)
    for n in (2, 3, 2):
        result, served = _served_by_the_cached_path(head, x, n)
        assert served and type(result) is type(x)
        np.testing.assert_array_equal(np.asarray(result), np.arange(n) * 2.0)
