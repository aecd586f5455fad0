"""A transform's first call (issue 30, part 5): what a cache entry keeps, what a first call
takes from staging instead of computing again, and what a process's first call does not pay
for (networkx, classifying all of numpy's names, setting stand-ins up once each)."""
import gc
import os
import warnings
import weakref

import numpy as np
import pytest

import xform
from xform.numpy.stand_ins import groups_unreached


def _branchy(a):
    if a > 0:
        return a * 3.0
    return a * 2.0


def _entries():
    return xform.cache_info()["entries"]


def _collect_all():
    """Collect until nothing more is found: an earlier test's garbage can free more of it
    only in a later pass (weakref callbacks), which must not happen during a count."""
    while gc.collect():
        pass


def test_a_deciding_functions_entry_leaves_the_cache_when_the_function_dies():
    _collect_all()    # earlier tests' dead functions leave first, not during the count
    before = _entries()

    def branchy(a):
        return _branchy(a)
    grad = xform.grad(branchy)
    assert grad(1.5) == 3.0 and grad(-1.0) == 2.0     # two paths in one entry
    assert _entries() == before + 1
    alive = weakref.ref(branchy)
    del branchy, grad
    gc.collect()
    assert alive() is None
    assert _entries() == before


def test_a_path_staged_after_the_transform_that_made_the_entry_died():
    def branchy(a):
        return _branchy(a)
    builds = xform.cache_info()["builds"]
    assert xform.grad(branchy)(1.5) == 3.0
    gc.collect()    # the transform is gone; its entry lives as long as `branchy`
    assert xform.grad(branchy)(-1.0) == 2.0
    assert xform.grad(branchy)(2.0) == 3.0
    assert xform.cache_info()["builds"] == builds + 1
    assert xform.cache_info()["paths"]["grad of 'test_a_path_staged_after_the_transform_" \
                                       "that_made_the_entry_died.<locals>.branchy'"] == 2


def test_a_later_path_keeps_the_static_keywords():
    def scaled(a, *, mode):
        factor = 3.0 if mode == "triple" else 5.0
        if a > 0:
            return a * factor
        return -a * factor
    grad = xform.grad(scaled, static_argnames="mode")
    assert grad(1.0, mode="triple") == 3.0
    gc.collect()
    assert grad(-1.0, mode="triple") == -3.0
    assert grad(-1.0, mode="other") == -5.0


def test_constructor_group_names_are_classified_as_code_spells_them():
    # A constructor, a numpy submodule, numpy's Python callables reach numpy's constructors;
    # ufuncs and dispatched functions do not.
    reached = "numpy constructors"
    assert reached in groups_unreached({"np", "sum", "sin", "inv"})
    for name in ("zeros", "polynomial", "vectorize", "ma"):
        assert reached not in groups_unreached({"np", name})
    assert reached in groups_unreached({"np", "a_name_numpy_does_not_have"})



def _graphs():
    """Graphs with fusible regions, a diamond, repeated reads and ordered draws."""
    def draws(x):
        rng = np.random.default_rng(0)
        return np.sin(x) * rng.standard_normal(3) + np.cos(x) * rng.standard_normal(3)
    yield xform.make_graph(lambda x: np.sum(np.sin(np.cos(x)) * x + np.exp(x) * x))(np.ones(5))
    yield xform.make_graph(lambda x: (np.sin(x) * np.sin(x), np.cos(x)))(1.0)
    yield xform.make_graph(draws)(np.ones(3))


def test_predecessors_are_the_dataflow_graphs_without_networkx():
    import networkx as nx
    from xform.ir.nx import contracted_order, dataflow_graph, predecessors
    for graph in _graphs():
        dag = dataflow_graph(graph)
        before = predecessors(graph)
        assert before == [list(dag.predecessors(i)) for i in range(len(graph.equations))]
        # contracting pairs of neighbours: the order networkx's stable sort gives
        n = len(graph.equations)
        for block_of in ({i: i for i in range(n)}, {i: i - i % 2 for i in range(n)}):
            quotient = nx.DiGraph()
            quotient.add_nodes_from(block_of.values())
            quotient.add_edges_from((block_of[u], block_of[v]) for u, v in dag.edges
                                    if v in block_of and block_of[u] != block_of[v])
            if not nx.is_directed_acyclic_graph(quotient):
                continue
            assert contracted_order(before, block_of) == list(
                nx.lexicographical_topological_sort(quotient))


def test_a_first_gradient_call_that_fuses_does_not_import_networkx():
    import subprocess
    import sys
    code = ("import sys, numpy as np, xform\n"
            "f = xform.grad(lambda x: np.sum(np.sin(np.cos(x)) * x))\n"
            "g = f(np.linspace(0, 1, 4000))\n"
            # staged once; the region's NDual partials computed at once (no derived graph)
            "assert xform.cache_info()['builds'] == 1\n"
            "from xform.passes import fuse_elementwise\n"
            "graph = xform.make_graph(lambda x: np.sin(np.cos(x)) * x)(np.ones(4000))\n"
            "assert fuse_elementwise(graph) is not graph   # it fused\n"
            "print('networkx' in sys.modules)\n")
    root = os.path.dirname(os.path.dirname(xform.__file__))   # this xform, in the child
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": root})
    assert done.stdout.strip() == "False"


def test_a_first_call_takes_a_fused_regions_values_from_staging():
    # The region (cos, sin, multiply on y) needs no derivative: on the first call staging's
    # values stand for it, so no code is generated for it; the second call compiles the
    # gradient, and the two agree bit for bit.
    def f(x, y):
        return np.dot(x, np.sin(np.cos(y)) * y)
    x, y = np.linspace(0.0, 1.0, 4000), np.linspace(-1.0, 2.0, 4000)
    graph = xform.make_graph(f)(x, y)
    from xform.passes import fuse_elementwise
    assert len(fuse_elementwise(graph).equations) < len(graph.equations)   # it fuses
    grad = xform.grad(f)
    compiles = xform.cache_info()["compiles"]
    first = grad(x, y)
    assert xform.cache_info()["compiles"] == compiles
    second = grad(x, y)
    assert xform.cache_info()["compiles"] > compiles
    assert first.tobytes() == second.tobytes() == (np.sin(np.cos(y)) * y).tobytes()


def test_a_region_holding_a_rewritten_equation_is_computed_again():
    # simplify rounds (s * 0.1) * 0.3 as s * 0.03: staging's values of the region are not the
    # compiled code's, so the first call computes the region as the second does.
    def f(x, y):
        return np.dot(x, np.sin(y) * 0.1 * 0.3)
    x, y = np.linspace(0.0, 1.0, 4000), np.linspace(-1.0, 2.0, 4000)
    grad = xform.grad(f)
    first, second = grad(x, y), grad(x, y)
    assert first.tobytes() == second.tobytes() == (np.sin(y) * 0.03).tobytes()
    assert first.tobytes() != (np.sin(y) * 0.1 * 0.3).tobytes()


def test_stand_ins_installed_together_are_set_up_once(monkeypatch):
    import sys
    import types
    from xform.numpy import stand_ins
    module = types.ModuleType("first_call_test_module")
    module.halve = lambda x: x / 2
    module.third = lambda x: x / 3
    monkeypatch.setitem(sys.modules, module.__name__, module)

    def install():
        stand_ins.stand_in((module, "halve"), lambda x: x * 0.5 + 1.0)
        stand_ins.stand_in((module, "third"), lambda x: x * 0.25)
    stand_ins.stand_in_when_imported(module.__name__, install)
    updates = []
    real = stand_ins._update_settings
    monkeypatch.setattr(stand_ins, "_update_settings", lambda: (updates.append(1), real()))
    try:
        grad = xform.grad(lambda x: module.halve(x) + module.third(x))
        assert grad(2.0) == 0.75     # both stand-ins in force while staging
        assert len(updates) == 1
        assert module.halve(2.0) == 1.0 and module.third(3.0) == 1.0   # restored after
    finally:
        monkeypatch.undo()
        stand_ins.remove_stand_in((module, "halve"))
        stand_ins.remove_stand_in((module, "third"))


@pytest.mark.parametrize("error_state", ["numpy's context var", "np.errstate"])
def test_a_warning_while_staging_is_raised_once_by_the_run(error_state, monkeypatch):
    from xform.ir import values
    if error_state == "np.errstate":
        monkeypatch.setattr(values, "_noting_warnings", values._public_noting_warnings)
        monkeypatch.setattr(values, "_error_state_reset", values._public_error_state_reset)
    before = np.geterr()

    def f(x):
        return np.sum(np.log(x - 2.0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grad = xform.grad(f)(np.array([1.0, 3.0]))
    assert np.array_equal(grad, [-1.0, 1.0])
    assert [str(w.message) for w in caught] == ["invalid value encountered in log"]
    assert np.geterr() == before


def test_an_equation_rewritten_beside_a_fused_region_is_computed_again():
    # The kernel fuses; simplify rewrites cholesky (numpy's) as LAPACK's potrf, which rounds
    # differently: the first call runs potrf, as the compiled calls do.
    def f(x):
        kernel = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2) + np.eye(x.size)
        return np.sum(np.log(np.diagonal(np.linalg.cholesky(kernel))))
    x = np.linspace(-3.0, 3.0, 40)
    grad = xform.grad(f)
    first, second = grad(x), grad(x)
    assert first.tobytes() == second.tobytes()


def test_a_first_tier_keeps_no_argument_of_its_call_alive():
    # Until the next call promotes it, a signature's first tier is the entry's value: what
    # it keeps for the promotion must not hold the first call's arrays (here a keyword's).
    def scaled(x, *, scale):
        return np.sum(x * scale)
    grad = xform.grad(scaled)
    scale = np.full(3, 2.0)
    held = weakref.ref(scale)
    np.testing.assert_array_equal(grad(np.ones(3), scale=scale), np.full(3, 2.0))
    del scale
    gc.collect()
    assert held() is None
    np.testing.assert_array_equal(grad(np.ones(3), scale=np.full(3, 3.0)), np.full(3, 3.0))


def test_a_first_call_that_draws_takes_stagings_values_and_draws_as_eager_numpy():
    # The draw runs again on the user's generator; where it draws what staging drew from its
    # copy, what staging computed from it is taken (no region compiled for the first call).
    rng, reference = np.random.default_rng(5), np.random.default_rng(5)

    def f(w):
        eps = rng.standard_normal(5000)
        return np.sum(np.sin(w * eps) * eps)
    grad = xform.grad(f)
    compiles = xform.cache_info()["compiles"]
    for call in range(2):
        got = grad(0.3)
        eps = reference.standard_normal(5000)
        np.testing.assert_allclose(got, np.sum(np.cos(0.3 * eps) * eps * eps), rtol=1e-12)
        assert rng.bit_generator.state == reference.bit_generator.state
        assert (xform.cache_info()["compiles"] == compiles) == (call == 0)


def test_a_draw_whose_parameter_no_derivative_reaches_is_computed_at_once():
    # floor's derivative is zero: the draw's parameter gets none, as in the compiled tier
    rng, reference = np.random.RandomState(2), np.random.RandomState(2)
    grad = xform.grad(lambda w: np.sum(rng.normal(np.floor(w), 1.0, size=3) * w))
    for _ in range(2):
        np.testing.assert_array_equal(grad(1.5), np.sum(reference.normal(1.0, 1.0, size=3)))


def test_a_regions_first_run_is_interpreted_up_to_a_size_with_the_compiled_bits(monkeypatch):
    # A hessian's first call runs fused regions that staging did not compute (forward mode's
    # tangent regions): interpreted up to the size, compiled past it, with the same bits as
    # the compiled code of the later calls either way.
    from xform.rules import elementwise

    def f(w, x):
        return np.sum(np.sin(w * x) * np.cos(x))
    x = np.linspace(-1.0, 2.0, 5000)
    compiled = {}
    for limit in (0, 1 << 20):
        monkeypatch.setattr(elementwise, "INTERPRETED_FIRST_RUN", limit)
        xform.clear_cache()
        hessian = xform.hessian(f)
        compiles = xform.cache_info()["compiles"]
        first = hessian(0.7, x)
        compiled[limit] = xform.cache_info()["compiles"] - compiles
        second = hessian(0.7, x)
        assert np.asarray(first).tobytes() == np.asarray(second).tobytes()
        np.testing.assert_allclose(first, -np.sum(x * x * np.sin(0.7 * x) * np.cos(x)),
                                   rtol=1e-12)
    assert compiled[1 << 20] < compiled[0]


@pytest.mark.parametrize("transform", ["grad", "jit"])
def test_a_branch_on_a_draw_takes_eager_numpys_side_on_every_call(transform):
    # One transformed object, called until both sides of the branch were taken: each call's
    # draw decides (a first run redraws what staging drew; a later path is staged anew)
    rng, reference = np.random.default_rng(5), np.random.default_rng(5)

    def f(w):
        u = rng.random()
        return w * 3.0 if u > 0.5 else w * 2.0 + u * w
    fun = getattr(xform, transform)(f)
    sides = set()
    for _ in range(10):
        u = reference.random()
        sides.add(u > 0.5)
        want = (3.0 if u > 0.5 else 2.0 + u) if transform == "grad" else \
            (0.7 * 3.0 if u > 0.5 else 0.7 * 2.0 + u * 0.7)
        assert fun(0.7) == want
        assert rng.bit_generator.state == reference.bit_generator.state
    assert sides == {True, False}
