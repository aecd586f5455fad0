"""fuse_elementwise and the `elementwise` primitive: regions found (maximal, convex, narrow,
broadcasting), results bit for bit, NDual vjp against trace-through, higher order, vmap."""
import sys
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.ir.core import Graph
from xform.passes import eliminate_dead_code, optimize
from xform.passes.fuse import NDUAL_MAX_WIDTH, fuse_elementwise
from xform.rules import elementwise as elementwise_module
from xform.rules.elementwise import elementwise_p
from xform.testing import check_grads, check_primitive
from xform.testing import strategies as xst
from xform.transforms import split_graph, vjp_graph

from tests.passes.support import primitives, run_pass

THIS_FILE = "test_fuse.py"


@pytest.fixture(autouse=True)
def fuse_every_region(monkeypatch):
    """These tests are about regions, not the cost model (tested below with it restored):
    every region is fused, whatever its size and primitives."""
    monkeypatch.setattr(sys.modules["xform.passes.fuse"], "_pays", lambda members, fusible: True)


def chain(x):
    return np.sum(np.sin(np.cos(np.exp(x))) * x)


def around_a_reshape(x):
    return np.exp(np.cos(np.sin(x) * 2.0).reshape(3, 2)) + 1.0


def read_outside(x):
    s = np.exp(np.sin(x))
    return np.cos(s) * np.sum(s)


def out_and_back(x):
    s = np.sin(x)
    return s * np.sum(s)


def product(a, b, c, d, e):
    return a * b * c * d * e


def fan_out(s, x3, x4):
    u = np.sin(s)
    return u * x3, u * x4


def selects(x):
    return np.clip(np.where(x > 0, x, 0.5 * x), -1.0, 1.0).astype(np.float32) * np.float32(2)


def with_integers(x, n):
    return (x * n) * (x + n)


def apart(x):
    return np.sum(np.sin(x) * x) * np.sum(np.cos(x) + x)


def sharing(x):
    return np.sum(np.sin(x) * x) * np.sum(np.sin(x) + 1.0)  # sin staged twice


# name, function, argument shapes (an int64 argument where the shape is a ("i", shape) pair),
# max_width, primitives outside the regions, primitives inside each region
FuseCase = namedtuple("FuseCase", "name fun shapes max_width outer regions")

CASES = [
    FuseCase("chain", chain, [(2, 3)], 4, ["elementwise", "sum"],
             [["exp", "cos", "sin", "multiply"]]),
    FuseCase("one equation is left alone", lambda x: np.sum(np.sin(x)), [(3,)], 4,
             ["sin", "sum"], []),
    FuseCase("regions stop at other primitives", around_a_reshape, [(2, 3)], 4,
             ["elementwise", "reshape", "elementwise"],
             [["sin", "multiply", "cos"], ["exp", "add"]]),
    FuseCase("values read outside are outputs", read_outside, [(3,)], 4,
             ["elementwise", "sum", "multiply"], [["sin", "exp", "cos"]]),
    FuseCase("no path leaves a region and comes back", out_and_back, [(3,)], 4,
             ["sin", "sum", "multiply"], []),
    FuseCase("width at most max_width", product, [(3,)] * 5, 3,
             ["elementwise", "elementwise"], [["multiply"] * 2, ["multiply"] * 2]),
    FuseCase("outputs broadcast together", fan_out, [(1,), (3,), (4,)], 4,
             ["elementwise", "multiply"], [["sin", "multiply"]]),
    FuseCase("scalars are not fused", lambda x: np.sin(x) * x + 1.0, [()], 4,
             ["sin", "multiply", "add"], []),
    FuseCase("comparisons, where, clip, convert", selects, [(2, 3)], 4, ["elementwise"],
             [["greater", "multiply", "where", "clip", "convert", "multiply"]]),
    FuseCase("integer inputs are not counted", with_integers, [(3,), ("i", (3,))], 1,
             ["elementwise"], [["multiply", "add", "multiply"]]),
    FuseCase("constants are not counted", lambda x: x * np.arange(3.0) + np.ones(3), [(3,)], 1,
             ["elementwise"], [["multiply", "add"]]),
    FuseCase("regions over the same inputs stay apart", apart, [(3,)], 4,
             ["elementwise", "sum", "elementwise", "sum", "multiply"],
             [["sin", "multiply"], ["cos", "add"]]),
    FuseCase("regions sharing work merge", sharing, [(3,)], 4,
             ["elementwise", "sum", "sum", "multiply"], [["sin", "multiply", "add"]]),
]


def draw_args(data, shapes, dtype=np.float64):
    args = []
    for shape in shapes:
        if shape and shape[0] == "i":
            args.append(data.draw(xst.arrays(shape[1], np.int64, low=-3, high=3)))
        else:
            args.append(data.draw(xst.arrays(shape, dtype, low=0.125, high=2.0)))
    return args


def staged(fun, args):
    return xform.make_graph(fun)(*args)


def regions(graph):
    return [primitives(eqn.params["region"]) for eqn in graph.equations
            if eqn.primitive is elementwise_p]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@given(data=st.data())
def test_fuse_case(case, data):
    args = draw_args(data, case.shapes)
    graph = staged(case.fun, args)
    # run_pass: check() holds, results bit for bit (interpreted and compiled), idempotent.
    after = run_pass(fuse_elementwise, graph, *args, max_width=case.max_width)
    assert primitives(after) == case.outer
    assert regions(after) == case.regions


def test_printing_shows_the_region_indented():
    text = str(fuse_elementwise(staged(lambda x: np.sum(np.sin(np.cos(x)) * x), [np.ones(3)])))
    assert text == """\
{ lambda a:f64[3] . let
    b:f64[3] = elementwise[max_width=3, region=
        { lambda c:f64[3] . let
            d:f64[3] = cos c
            e:f64[3] = sin d
            f:f64[3] = multiply e c
          in (f) }] a
    g:f64[] = sum[axes=(0,), dtype=None] b
  in (g) }"""


def test_region_outputs_are_the_values_read_outside():
    def f(x):
        s = np.sin(x)
        t = np.cos(s) * 2.0
        return s, np.sum(t), np.exp(t)
    graph = fuse_elementwise(staged(f, [np.ones(3)]))
    fused = graph.equations[0]
    assert primitives(graph) == ["elementwise", "sum"]
    assert primitives(fused.params["region"]) == ["sin", "cos", "multiply", "exp"]
    # s (a graph output), t (read by sum) and exp(t) (a graph output); not cos(s)
    assert len(fused.outputs) == 3
    assert graph.outputs[0] is fused.outputs[0] and graph.outputs[2] is fused.outputs[2]


def test_unchanged_graph_is_returned_as_is():
    graph = staged(lambda x: np.sum(np.sin(x)), [np.ones(3)])
    assert fuse_elementwise(graph) is graph


def test_regions_are_opened_not_nested():
    x = np.linspace(0.1, 1.0, 6)
    inner = fuse_elementwise(staged(lambda x: np.sin(np.cos(x)), [x]))
    graph = staged(lambda x: np.tanh(xform.eval_graph(inner, x)[0] * x), [x])
    assert primitives(graph) == ["elementwise", "multiply", "tanh"]
    after = run_pass(fuse_elementwise, graph, x)
    assert primitives(after) == ["elementwise"]
    assert regions(after) == [["cos", "sin", "multiply", "tanh"]]


@given(data=st.data(), dtype=xst.float_dtypes)
def test_fused_results_equal_unfused_bit_for_bit(data, dtype):
    def f(x, y, z):
        a = np.exp(-x * x) * np.sin(y) + np.maximum(z, 0.5)
        b = np.where(a > 1.0, np.sqrt(a), a * a) / (1.0 + np.abs(y))
        return np.sum(b, axis=0), np.tanh(b) - z
    args = draw_args(data, [(2, 3), (3,), (2, 1)], dtype)
    graph = staged(f, args)
    after = run_pass(fuse_elementwise, graph, *args)
    assert primitives(after) == ["elementwise", "sum"]


@given(data=st.data())
def test_large_regions_run_block_by_block_bit_for_bit(data):
    def f(x, y, z):
        a = np.exp(np.sin(x) * y) - z
        return np.tanh(a) * x, np.cos(y) + 1.0, a, np.sqrt(z + 2.0)
    args = draw_args(data, [(37, 5), (5,), (37, 1)])
    graph = staged(f, args)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(elementwise_module, "BLOCK", 16)
        patch.setattr(elementwise_module, "SHORT_REGION", 0)
        after = run_pass(fuse_elementwise, graph, *args)
        plans = [elementwise_module._BlockPlan.of(e.params["region"])
                 for e in after.equations]
    assert primitives(after) == ["elementwise"] * 3
    # 13 blocks of 3 rows, none (5 elements: too small), 3 blocks of 16 rows
    assert [(p.rows, p.step) if p else None for p in plans] == [(37, 3), None, (37, 16)]


@pytest.mark.parametrize("whole_limit, blocked", [(1 << 40, False), (16, True)])
def test_short_regions_run_whole_below_the_limit(whole_limit, blocked):
    # tanh(x + b) ** 2 and its partial: a few equations per output, under SHORT_REGION
    def f(x):
        return np.sum(np.tanh(x + 0.5) ** 2)
    x = np.linspace(-1.0, 1.0, 64).reshape(8, 8)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(elementwise_module, "BLOCK", 16)
        patch.setattr(elementwise_module, "WHOLE_LIMIT", whole_limit)
        patch.setattr(sys.modules["xform.passes.fuse"], "FUSION_MIN_SIZE", 0)
        graph = staged(xform.grad(f), (x,))
        after = run_pass(fuse_elementwise, graph, x)
        regions = [e.params["region"] for e in after.equations if e.primitive.name == "elementwise"]
        plans = [elementwise_module._BlockPlan.of(region) for region in regions]
    assert regions and all(len(r.equations) < elementwise_module.SHORT_REGION * len(r.outputs)
                           for r in regions)
    assert all((plan is not None) == blocked for plan in plans)


# -- the elementwise primitive ------------------------------------------------------------------

# name, region function, argument shapes
RegionCase = namedtuple("RegionCase", "name fun shapes")

REGIONS = [
    RegionCase("one input", lambda x: np.sin(np.cos(np.exp(x))) * x, [(3,)]),
    RegionCase("broadcast inputs, two outputs",
               lambda x, y: (np.sin(np.cos(x)) * y + x, np.exp(x) * 2.0), [(3,), (2, 3)]),
    RegionCase("select and compare", lambda x, y: np.where(x > y, x * y, np.tanh(x - y)),
               [(2, 2), ()]),
    RegionCase("mixed dtypes", lambda x, y: np.log1p(x * x) + y.astype(np.float64) ** 2,
               [(3,), (3,)]),
]


def region_args(case, data):
    args = draw_args(data, case.shapes)
    if case.name == "mixed dtypes":
        args[1] = args[1].astype(np.float32)
    if case.name == "select and compare":
        args[1] = np.float64(1.05)  # away from the kink at x == y
    return args


@pytest.mark.parametrize("max_width", [8, 0], ids=["ndual", "trace-through"])
@pytest.mark.parametrize("case", REGIONS, ids=[c.name for c in REGIONS])
def test_check_primitive_elementwise(case, max_width):
    # One draw per case: the battery (order 2, every in_axes) is the expensive part.
    rng = np.random.default_rng(0)
    args = [rng.uniform(0.2, 1.5, shape) for shape in case.shapes]
    if case.name == "mixed dtypes":
        args[1] = args[1].astype(np.float32)
    if case.name == "select and compare":
        args[1] = np.float64(1.05)
    region = staged(case.fun, args)
    check_primitive(elementwise_p, *args, params={"max_width": max_width, "region": region},
                    order=2)


def _grads(region, max_width, args, cts):
    def f(*xs):
        outs = elementwise_p.bind(*xs, max_width=max_width, region=region)
        return sum(np.sum(o * c) for o, c in zip(outs, cts))
    return xform.grad(f, tuple(range(len(args))))(*args)


@pytest.mark.parametrize("case", REGIONS, ids=[c.name for c in REGIONS])
@given(data=st.data())
def test_ndual_vjp_equals_trace_through(case, data):
    args = region_args(case, data)
    region = staged(case.fun, args)
    cts = [data.draw(xst.arrays(a.shape, np.float64)) for a in region.out_avals]
    ndual, traced = _grads(region, 8, args, cts), _grads(region, 0, args, cts)
    for a, b in zip(ndual, traced):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_ndual_keeps_one_residual_per_input():
    """Reverse mode on a fused region keeps only the partial derivatives: the forward part
    of the vjp hands one array to the backward part, where the unfused one hands several."""
    x = np.linspace(0.1, 1.0, 5)

    def residuals(graph):
        forward, _ = split_graph(vjp_graph(graph), 1, 1)
        forward = fuse_elementwise(optimize(forward))
        return [v for v in forward.outputs[1:] if v not in forward.inputs]
    graph = staged(chain, [x])
    assert len(residuals(fuse_elementwise(graph))) == 1
    assert len(residuals(graph)) >= 3


def test_region_and_its_ndual_form_merge():
    x = np.linspace(0.1, 1.0, 5)
    graph = fuse_elementwise(staged(chain, [x]))
    combined = optimize(vjp_graph(graph))
    assert primitives(combined).count("elementwise") == 2   # the region and its NDual form
    merged = run_pass(fuse_elementwise, combined, x, 1.0)
    assert sum(r.count("exp") for r in regions(merged)) == 1
    want = xform.grad(chain)(x)
    np.testing.assert_allclose(xform.eval_graph(merged, x, 1.0)[1], want, rtol=1e-14)


def test_dead_code_drops_unused_outputs_of_a_region():
    def f(x):
        s = np.sin(x)
        return np.sum(s), np.exp(s) * 2.0
    graph = fuse_elementwise(staged(f, [np.ones(3)]))
    assert len(graph.equations[0].outputs) == 2
    only_sum = xform.Graph(graph.inputs, graph.consts, graph.equations, graph.outputs[:1])
    after = run_pass(eliminate_dead_code, only_sum, np.linspace(0.0, 1.0, 3))
    assert primitives(after) == ["elementwise", "sum"]
    assert regions(after) == [["sin"]]
    assert after.equations[0].inputs == graph.equations[0].inputs


def fused_function(fun, args, max_width=4):
    graph = fuse_elementwise(staged(fun, args), max_width=max_width)
    assert "elementwise" in primitives(graph)
    return lambda *xs: xform.eval_graph(graph, *xs)[0]


@given(x=xst.arrays((2, 3), np.float64, low=0.1, high=1.5),
       y=xst.arrays((3,), np.float64, low=-1.0, high=1.0))
def test_grads_through_fused_regions_order_two(x, y):
    def f(x, y):
        return np.sum(np.sin(np.cos(np.exp(x))) * x * y + np.tanh(y))
    check_grads(fused_function(f, [x, y]), (x, y), order=2)


def test_grad_of_grad_through_fused_regions():
    x = np.linspace(0.2, 1.2, 4)
    fused = fused_function(chain, [x])
    second = xform.grad(lambda x: np.sum(xform.grad(fused)(x) ** 2))(x)
    want = xform.grad(lambda x: np.sum(xform.grad(chain)(x) ** 2))(x)
    np.testing.assert_allclose(second, want, rtol=1e-12)
    np.testing.assert_allclose(xform.hessian(fused)(x), xform.hessian(chain)(x), rtol=1e-12)


def test_linearize_of_a_gradient_through_fused_regions():
    x = np.linspace(0.2, 1.2, 4)
    t = np.linspace(-1.0, 1.0, 4)
    _, fused_lin = xform.linearize(xform.grad(fused_function(chain, [x])), x)
    _, lin = xform.linearize(xform.grad(chain), x)
    np.testing.assert_allclose(fused_lin(t), lin(t), rtol=1e-12)


@given(x=xst.arrays((4, 2, 3), np.float64, low=0.1, high=1.5),
       s=xst.arrays((4,), np.float64, low=0.1, high=1.5))
def test_vmap_of_a_fused_graph(x, s):
    def f(x, s):
        return np.exp(np.sin(x) * s) + np.cos(s)
    fused = fused_function(f, [x[0], s[0]])
    for in_axes, args in (((0, 0), (x, s)), ((0, None), (x, s[0])), ((None, 0), (x[0], s)),
                          ((2, 0), (np.moveaxis(x, 0, 2), s))):
        got = xform.vmap(fused, in_axes=in_axes)(*args)
        lanes = [f(*[a if axis is None else np.take(a, i, axis) for a, axis in
                     zip(args, in_axes)]) for i in range(4)]
        np.testing.assert_array_equal(got, np.stack(lanes))
    grads = xform.vmap(xform.grad(lambda x, s: np.sum(fused(x, s))))(x, s)
    want = xform.vmap(xform.grad(lambda x, s: np.sum(f(x, s))))(x, s)
    np.testing.assert_allclose(grads, want, rtol=1e-12)


def test_other_input_types_are_broadcast_through_the_region():
    region = staged(lambda x, y: np.sin(x) * y, [np.ones(3), np.ones(3)])
    x, y = np.linspace(0.0, 1.0, 6).reshape(2, 3).astype(np.float32), np.float32(2.0)
    got = xform.jit(lambda x, y: elementwise_p.bind(x, y, max_width=4, region=region)[0])(x, y)
    np.testing.assert_array_equal(got, np.sin(x) * y)
    assert got.dtype == np.float32


def test_regions_bound_to_other_types_are_not_opened():
    region = staged(lambda x, y: np.sin(x) * y, [np.ones(3), np.ones(3)])
    x = np.linspace(0.0, 1.0, 6).reshape(2, 3)

    def f(x, y):
        return np.exp(elementwise_p.bind(x, y, max_width=4, region=region)[0])
    graph = staged(f, [x, np.float64(2.0)])
    after = run_pass(fuse_elementwise, graph, x, np.float64(2.0))
    assert primitives(after) == ["elementwise", "exp"]


def test_mismatched_inputs_name_the_user_line():
    region = staged(lambda x, y: np.sin(x) * y, [np.ones(3), np.ones(3)])

    def f(x, y):
        return elementwise_p.bind(x, y, max_width=4, region=region)
    with pytest.raises(xform.ShapeError, match=THIS_FILE) as info:
        xform.jit(f)(np.ones(3), np.ones(4))
    assert "broadcast" in str(info.value)
    with pytest.raises(xform.ShapeError, match="1 inputs for a region of 2"):
        xform.jit(lambda x: elementwise_p.bind(x, max_width=4, region=region))(np.ones(3))


def test_region_graph_is_a_closed_graph_param():
    graph = fuse_elementwise(staged(chain, [np.ones(3)]))
    region = graph.equations[0].params["region"]
    assert isinstance(region, Graph)
    region.check()
    assert graph.equations[0].params["max_width"] == NDUAL_MAX_WIDTH == 3


def shared_early_value(x):
    """`1 - x` is read by every step: an early group with a successor in each step, which
    the cycle check would walk from on every merge without its budget."""
    o = 1.0 - x
    p = x
    for _ in range(40):
        p = np.roll(p, 1) * o + np.exp(p) * (1.0 - o)
    return p


def test_the_cycle_checks_budget_only_refuses_merges(monkeypatch):
    fuse_module = sys.modules["xform.passes.fuse"]   # (xform.passes.fuse names the function)
    x = np.linspace(0.1, 0.9, 5)
    graph = staged(shared_early_value, [x])
    fused = {}
    for budget in (0, 3, 10_000):
        monkeypatch.setattr(fuse_module, "CYCLE_CHECK_BUDGET", budget)
        after = run_pass(fuse_elementwise, graph, x)    # checked, bit for bit, idempotent
        fused[budget] = sum(len(region) for region in regions(after))
    # every budget gives a correct graph (run_pass); a small one changes the regions chosen
    assert all(count > 0 for count in fused.values()) and fused[0] != fused[10_000]


# -- the cost model: fuse only where it pays (bench/fusion_breakeven.py) ----------------------

def _fused_primitives(fun, *args):
    graph = xform.make_graph(fun)(*args)
    return [e.primitive.name for e in fuse_elementwise(graph).equations]


@pytest.mark.parametrize("name, fun, size, fused", [
    ("transcendental, large", chain, 4096, True),
    ("transcendental, small", chain, 16, False),
    ("arithmetic only, large", lambda x: np.sum((x * 2.0 + 1.0) / (x - 3.0)), 4096, False),
    ("arithmetic and one exp, large", lambda x: np.sum(np.exp(x) * 2.0 + x), 4096, True),
])
def test_regions_are_fused_only_where_they_pay(monkeypatch, name, fun, size, fused):
    monkeypatch.undo()  # the real cost model
    fuse = sys.modules["xform.passes.fuse"]
    assert size >= fuse.FUSION_MIN_SIZE if "large" in name else size < fuse.FUSION_MIN_SIZE
    x = np.linspace(0.1, 0.9, size)
    assert ("elementwise" in _fused_primitives(fun, x)) is fused


@pytest.mark.parametrize("matrix_size", [4, 64])
def test_a_graph_where_no_region_pays_is_returned_itself(monkeypatch, matrix_size):
    # With a small matrix no equation pays (the pass returns at once); with a large one the
    # matmul's output is large, so the pass looks at the regions, and the small
    # transcendental chain still does not pay.
    monkeypatch.undo()  # the real cost model
    a = np.linspace(0.1, 0.9, matrix_size * matrix_size).reshape(matrix_size, matrix_size)
    graph = xform.make_graph(lambda a, x: np.sum(a @ a) + np.sum(np.sin(np.cos(x))))(
        a, np.linspace(0.1, 0.9, 8))
    assert fuse_elementwise(graph) is graph
    large = np.linspace(0.1, 0.9, 4096)
    graph = xform.make_graph(lambda a, x: np.sum(a @ a) + np.sum(np.sin(np.cos(x))))(a, large)
    assert "elementwise" in [e.primitive.name for e in fuse_elementwise(graph).equations]
