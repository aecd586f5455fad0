"""Failures found by the random-program tests (tests/test_random_programs.py), minimised: each
test names what broke."""
import sys

import numpy as np
import pytest

import xform
from xform.runtime.cache import CACHE


@pytest.mark.parametrize("stage", [xform.jit, xform.make_graph], ids=["jit", "make_graph"])
def test_a_failed_staging_leaves_no_entry_of_its_callees(stage):
    # Found by test_a_failed_staging_changes_neither_the_cache_nor_the_input, program
    # `v2 = c1(x)` with a custom_vjp c1, the same with an @xform.function callee (and for
    # make_graph, `v2 = h1(x)` with an @xform.function h1).
    @xform.function
    def helper(t):
        return np.sin(t)

    def fails_after_a_call(x):
        y = helper(x)
        if y.__array__() > 1e9:  # numpy's own conversion of a traced value: staging fails
            y = y * 2.0
        return y

    before = set(CACHE._entries)
    with pytest.raises(xform.ConcretizationError):
        stage(fails_after_a_call)(0.5)
    # Nothing added (entries of functions that died meanwhile may have left: not compared).
    assert set(CACHE._entries) <= before


def test_a_fused_region_narrowing_to_float32_keeps_float64_partials(monkeypatch):
    # Found by test_optimised_graph_equals_unoptimised, program
    # `v1 = np.sin(x); v2 = v1.astype(np.float32)`: the fused region's vjp (NDual) held
    # d v2 / d x = cos(x) in v2's dtype, float32, where the per-equation vjp (and JAX) turn
    # the float32 cotangent into float64 and multiply by the float64 cos(x).
    monkeypatch.setattr(sys.modules["xform.passes.fuse"], "FUSION_MIN_SIZE", 0)  # small too
    xform.clear_cache()
    x = np.array([0.3, -0.7, 0.9])
    weights = np.array([1.1, 0.6, 1.3])
    gradient = xform.grad(lambda x: np.sum(np.sin(x).astype(np.float32) * weights))(x)
    cotangent = weights.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(gradient, np.cos(x) * cotangent, rtol=1e-15)
    xform.clear_cache()


def test_a_threaded_map_failing_at_run_time_leaves_out_unchanged():
    # Found while extending test_threaded_map_equals_a_loop_and_a_failed_one_leaves_out_unchanged
    # from failed stagings to failed runs: the chunks holding negative values raise.
    xs = np.linspace(1.0, -1.0, 40)
    out = np.full(40, 7.0)
    with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
        xform.threaded_map(np.log, xs, out=out, num_threads=1, chunk_size=7)
    np.testing.assert_array_equal(out, np.full(40, 7.0))


def test_vmap_whose_lanes_decide_apart_on_a_draw_draws_as_a_loop():
    # Found by test_each_call_draws_as_eager_numpy_under_jit_and_vmap (the long profile),
    # program `v3 = sin(x) + 0.1 * rng.standard_normal(()); while abs(v3) > 0.2: ...`: vmap
    # staged lane 0 once, saw a draw, and staged each lane again from generator copies that
    # lane 0's thrown-away staging had advanced, so the lanes decided on the wrong draws
    # ("decided differently when its path ran than when it was staged").
    def program_with(rng):
        def program(x):
            v = np.sin(x) + 0.1 * rng.standard_normal(())
            k = 0
            while abs(v) > 0.2 and k < 6:
                v = 0.6 * np.sin(v)
                k += 1
            return v
        return program
    xs = np.random.default_rng(1).uniform(-1.0, 1.0, 3)   # lane 0 stops at once, 1 and 2 loop
    eager, mapped = program_with(np.random.default_rng(0)), \
        xform.vmap(program_with(np.random.default_rng(0)))
    for _ in range(3):
        np.testing.assert_array_equal(mapped(xs), np.stack([eager(x) for x in xs]))


def test_a_mistake_is_never_inserted_between_an_if_and_its_else():
    # Found by test_a_failed_staging_changes_neither_the_cache_nor_the_input (the long
    # profile): `else:` counted as a top-level statement, and the write inserted before it
    # made the program a SyntaxError instead of a staging error.
    from xform.testing.programs import Program
    source = ("def program(x):\n    if x > 0.0:\n        v1 = np.sin(x)\n    else:\n"
              "        v1 = np.cos(x)\n    v2 = np.sin(v1)\n    return v2\n")
    program = Program(source, (), (), frozenset({"python_if"}), 0, None)
    assert program.statements == 3
    for position in range(program.statements):
        for kind in ("if", "write"):
            failing, _ = program.failing(position, kind)     # compiles
            assert callable(failing)
