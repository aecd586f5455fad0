"""forward_writes: reads of written values take the value written, unread writes go; the values
are numpy's for any mix of writes and reads of rows, blocks and strided slices."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.passes import eliminate_dead_code, forward_writes


def primitives(graph):
    return [eqn.primitive.name for eqn in graph.equations]


def passed(fn, *args):
    graph = forward_writes(xform.make_graph(fn)(*args))
    graph.check()
    return eliminate_dead_code(graph)


def test_a_read_of_the_row_written_is_the_value_written():
    def fill(x):
        u = np.zeros((4, 2))
        u[0] = x
        for t in range(3):
            u[t + 1] = np.sin(u[t])
        return u[3]
    graph = passed(fill, np.ones(2))
    assert primitives(graph) == ["sin", "sin", "sin"]     # no buffer left at all
    np.testing.assert_array_equal(xform.eval_graph(graph, np.arange(2.0))[0],
                                  fill(np.arange(2.0)))


def test_writes_in_between_to_other_rows_are_stepped_over():
    def fill(x):
        u = np.zeros((3, 2))
        u[0] = x
        u[1] = x * 2.0
        u[2] = x * 3.0
        return np.sin(u[0])
    assert primitives(passed(fill, np.ones(2))) == ["sin"]


@pytest.mark.parametrize("read", [lambda u: u[0:2], lambda u: u[::2], lambda u: u[:, 0]],
                         ids=["block", "strided", "column"])
def test_a_read_of_other_positions_keeps_the_writes(read):
    def fill(x):
        u = np.zeros((3, 2))
        u[0] = x
        u[1] = x * 2.0
        return read(u) * 1.0
    graph = passed(fill, np.ones(2))
    assert "scatter" in primitives(graph)
    x = np.array([0.5, -1.0])
    np.testing.assert_array_equal(xform.eval_graph(graph, x)[0], fill(x))


def test_an_overwritten_row_reads_the_last_value():
    def fill(x):
        u = np.zeros((2, 2))
        u[1] = x
        u[0:2] = np.stack([x * 2.0, x * 3.0])    # covers row 1 again: not stepped over
        return u[1] * 1.0
    x = np.array([0.5, -1.0])
    np.testing.assert_array_equal(xform.eval_graph(passed(fill, x), x)[0], fill(x))


def test_the_argument_is_not_handed_back_as_a_result():
    def fill(x):
        u = np.zeros((2, 3))
        u[0] = x
        return u[0]
    x = np.array([1.0, 2.0, 3.0])
    jitted = xform.jit(fill)
    for _ in range(2):
        out = jitted(x)
        assert out is not x and not np.shares_memory(out, x)
        np.testing.assert_array_equal(out, x)


def test_an_unread_write_goes_with_the_copy_that_guarded_it():
    # the reverse pass of `u[1] = ...`: read the row's cotangent, copy it, zero the row
    def reverse_step(ct):
        ct = ct * 1.0
        row = ct[1].copy()
        ct[1] = 0.0
        return ct[0] * 2.0 + row
    graph = passed(reverse_step, np.ones((3, 2)))
    assert "scatter" not in primitives(graph) and "copy" not in primitives(graph)
    ct = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(xform.eval_graph(graph, ct)[0], reverse_step(ct))


ROWS, COLS = 4, 3
SLICES = [slice(None), slice(0, 2), slice(1, 4), slice(None, None, 2), slice(3, 0, -1)]


@st.composite
def programs(draw):
    """A list of ("write", index) and ("read", index) steps on a (4, 3) buffer, with rows,
    blocks, strided and reversed slices, and single elements."""
    def index():
        kind = draw(st.sampled_from(["row", "block", "element", "column"]))
        if kind == "row":
            return (draw(st.integers(0, ROWS - 1)),)
        if kind == "element":
            return (draw(st.integers(0, ROWS - 1)), draw(st.integers(0, COLS - 1)))
        if kind == "column":
            return (slice(None), draw(st.integers(0, COLS - 1)))
        return (draw(st.sampled_from(SLICES)),)
    return [(draw(st.sampled_from(["write", "read"])), index())
            for _ in range(draw(st.integers(1, 8)))]


@given(programs())
def test_any_mix_of_writes_and_reads_equals_numpy(steps):
    def run(x):
        u = np.zeros((ROWS, COLS))
        u[0] = x
        total = np.zeros(())
        for k, (action, where) in enumerate(steps):
            if action == "write":
                u[where] = np.sin(x[0] + k) * np.ones(u[where].shape)
            else:
                total = total + np.sum(u[where] * (k + 1))
        return total, u[1]
    x = np.array([0.3, -1.2, 2.0])
    expected = run(x)
    graph = passed(run, x)
    for got, want in zip(xform.eval_graph(graph, x), expected):
        np.testing.assert_array_equal(got, want)
    jitted = xform.jit(run)
    for _ in range(2):
        for got, want in zip(jitted(x), expected):
            np.testing.assert_array_equal(got, want)
