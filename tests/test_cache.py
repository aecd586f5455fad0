"""The cache: hits do no staging, redefinition re-stages (module-level, nested, callees,
`__code__`, closure cells), threads share one build, LRU bound, weak references, debug mode."""
import gc
import importlib
import sys
import textwrap
import threading

import attrs
import numpy as np
import pytest

import xform
from xform.ir.builder import using_builder
from xform.ir.interpret import eval_graph

THIS_FILE = "test_cache.py"


@pytest.fixture
def module_factory(tmp_path, monkeypatch):
    """Writes a module to a temporary file and imports it; `rewrite` redefines it in place."""
    monkeypatch.syspath_prepend(str(tmp_path))
    counter = iter(range(1000))

    def make(source):
        name = f"xform_cache_mod_{next(counter)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        module = importlib.import_module(name)
        return module

    yield make
    for name in [n for n in sys.modules if n.startswith("xform_cache_mod_")]:
        del sys.modules[name]


def redefine(module, source):
    """Re-execute `source` in the module, as editing and re-running a cell does."""
    exec(compile(textwrap.dedent(source), module.__file__, "exec"), module.__dict__)


def test_cache_hit_does_no_staging_and_no_codegen():
    def f(x):
        return np.sin(x) * x + 1.0
    grad_f = xform.grad(f)
    grad_f(0.3)
    grad_f(0.3)   # the first call interprets, the second compiles (xform.runtime.tiers)
    before = xform.cache_info()
    for value in (0.1, 0.2, 0.7):
        assert grad_f(value) == pytest.approx(np.cos(value) * value + np.sin(value))
    after = xform.cache_info()
    assert after["builds"] == before["builds"] and after["compiles"] == before["compiles"]
    assert after["hits"] >= before["hits"] + 3


def _d_tiny(x):
    """The derivative of sin(x) * x + 1, by hand."""
    return np.cos(x) * x + np.sin(x)


def test_every_cached_call_counts_one_hit():
    def f(x):
        return np.sin(x) * x + 1.0

    def h(x, y):
        return np.sin(x) * y
    grad_f, jit_f, grad_h = xform.grad(f), xform.jit(f), xform.grad(h)
    x = np.linspace(0.0, 1.0, 4)
    calls = [lambda: grad_f(0.3), lambda: grad_f(x[0]), lambda: grad_f(np.float32(0.3)),
             lambda: jit_f(0.3), lambda: jit_f(x), lambda: grad_h(0.3, 2.0)]
    for call in calls:
        call()
    before = xform.cache_info()
    for _ in range(5):
        assert grad_f(0.3) == pytest.approx(_d_tiny(0.3))
        for call in calls[1:]:
            call()
    after = xform.cache_info()
    assert after["hits"] - before["hits"] == 5 * len(calls)
    assert after["misses"] == before["misses"] and after["builds"] == before["builds"]


def test_hit_counts_survive_eviction_and_clear():
    jitted = xform.jit(lambda x: x * 3.0)
    for _ in range(4):
        jitted(1.0)
    hits = xform.cache_info()["hits"]
    xform.clear_cache()
    assert xform.cache_info()["hits"] == hits
    xform.set_cache_size(1)
    try:
        jitted(1.0)
        jitted(1.0)
        xform.jit(lambda x: x * 4.0)(1.0)   # evicts jitted's entry, which has one hit
        assert xform.cache_info()["hits"] == hits + 1
    finally:
        xform.set_cache_size(2048)


def test_an_evicted_entry_is_rebuilt_by_the_cached_path():
    grad_f = xform.grad(lambda x: np.sin(x) * x + 1.0)
    xform.set_cache_size(1)
    try:
        grad_f(0.3)
        builds = xform.cache_info()["builds"]
        xform.jit(lambda x: x * 4.0)(1.0)   # evicts grad_f's entry
        assert grad_f(0.3) == pytest.approx(_d_tiny(0.3))
        assert xform.cache_info()["builds"] == builds + 2
    finally:
        xform.set_cache_size(2048)


def test_a_cached_function_still_composes_and_stages():
    grad_f = xform.grad(lambda x: np.sin(x) * x + 1.0)
    grad_f(0.3)   # the cached path now has a float entry
    second = -np.sin(0.3) * 0.3 + 2 * np.cos(0.3)
    assert xform.grad(grad_f)(0.3) == pytest.approx(second)
    assert xform.jit(grad_f)(0.3) == pytest.approx(_d_tiny(0.3))
    xs = np.linspace(0.0, 1.0, 5)
    np.testing.assert_allclose(xform.vmap(grad_f)(xs), _d_tiny(xs))


def test_a_cached_function_called_while_staging_is_staged_there(module_factory):
    """Called on a concrete float inside another staging, a cached function is staged into it
    (not run by its cached path), so the outer entry depends on what it reads."""
    mod = module_factory("""
        import numpy as np
        def scale():
            return 2.0
        def f(x):
            return np.sin(x) * scale()
    """)
    grad_f = xform.grad(mod.f)
    assert grad_f(0.3) == pytest.approx(2.0 * np.cos(0.3))   # the cached path has an entry
    outer = xform.jit(lambda y: y * grad_f(0.3))
    assert outer(2.0) == pytest.approx(4.0 * np.cos(0.3))
    redefine(mod, """
        def scale():
            return 5.0
    """)
    assert outer(2.0) == pytest.approx(10.0 * np.cos(0.3))
    assert grad_f(0.3) == pytest.approx(5.0 * np.cos(0.3))


def test_redefining_a_module_level_function_restages(module_factory):
    mod = module_factory("""
        import numpy as np
        def g(x):
            return x ** 2
        def f(x):
            return np.sin(g(x))
    """)
    grad_f = xform.grad(mod.f)
    assert grad_f(1.0) == pytest.approx(np.cos(1.0) * 2.0)
    redefine(mod, """
        def g(x):
            return x + 1
    """)
    assert grad_f(1.0) == pytest.approx(np.cos(2.0))
    assert xform.jit(mod.f)(1.0) == pytest.approx(np.sin(2.0))


def test_redefinition_several_calls_deep(module_factory):
    mod = module_factory("""
        import numpy as np
        def leaf(x):
            return x * 3.0
        def middle(x):
            return leaf(x) + 1.0
        def top(x):
            return np.sum(middle(x) ** 2)
    """)
    grad_top = xform.grad(mod.top)
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(grad_top(x), 2 * (3 * x + 1) * 3)
    redefine(mod, """
        def leaf(x):
            return x * 5.0
    """)
    np.testing.assert_allclose(grad_top(x), 2 * (5 * x + 1) * 5)


def test_redefining_a_callee_of_xform_function(module_factory):
    mod = module_factory("""
        import numpy as np
        import xform
        def inner(x):
            return np.sin(x)
        @xform.function
        def callee(x):
            return inner(x) * 2.0
        def f(x):
            return callee(x) + 1.0
    """)
    assert xform.grad(mod.f)(0.5) == pytest.approx(2 * np.cos(0.5))
    assert xform.jit(mod.f)(0.5) == pytest.approx(2 * np.sin(0.5) + 1)
    redefine(mod, """
        def inner(x):
            return x * x
    """)
    assert xform.grad(mod.f)(0.5) == pytest.approx(2.0)
    assert xform.jit(mod.f)(0.5) == pytest.approx(1.5)


def test_replacing_code_and_rebinding_closure_cells_restage():
    def f(x):
        return x * 2.0

    def other(x):
        return x * 3.0
    jitted = xform.jit(f)
    assert jitted(1.0) == 2.0
    f.__code__ = other.__code__
    assert jitted(1.0) == 3.0

    scale = 4.0

    def g(x):
        return x * scale
    jitted_g = xform.jit(g)
    assert jitted_g(1.0) == 4.0
    scale = 5.0  # noqa: F841  (rebinds the closure cell g reads)
    assert jitted_g(1.0) == 5.0


def _specialized_check(function):
    """The generated check of what staging `function` reads, as a cache hit runs it."""
    from xform.runtime.dependencies import recording
    with recording(function) as dependencies:
        pass
    check = dependencies.specialize()
    assert check.__code__.co_filename == "<xform-dependencies>"
    return check


def test_the_generated_check_fails_on_an_emptied_cell_and_a_dead_root():
    def emptied():
        scale = 2.0

        def f(x):
            return x * scale
        check = _specialized_check(f)
        assert check()
        del scale
        return check
    check = emptied()
    assert check() is False           # the cell `scale` was emptied: stale, no ValueError
    root_dies = _specialized_check(lambda x: x * 3.0)
    gc.collect()
    assert root_dies() is False       # no AttributeError on the dead root's None


def test_the_generated_check_sees_every_cell_and_code():
    def helper(x):
        return x + 1.0
    scale = 2.0

    def f(x):
        return helper(x) * scale
    check = _specialized_check(f)
    assert check()
    helper_code = helper.__code__
    helper.__code__ = (lambda x: x - 1.0).__code__
    assert check() is False
    helper.__code__ = helper_code
    assert check()
    f_code = f.__code__
    f.__code__ = (lambda x: helper(x) * scale).__code__
    assert check() is False
    f.__code__ = f_code
    assert check()
    scale = 3.0  # noqa: F841  (rebinds the cell f reads)
    assert check() is False


def test_many_threads_share_one_build_and_get_identical_results():
    xform.config.update("fusion", False)  # one build: no fused region sub-graphs to count
    try:
        _many_threads_share_one_build()
    finally:
        xform.config.update("fusion", True)


def _many_threads_share_one_build():
    def loss(x):
        return np.sum(np.tanh(x) * np.cos(x))
    grad_loss = xform.grad(loss)
    x = np.linspace(-1, 1, 7)
    expected = (1 - np.tanh(x) ** 2) * np.cos(x) - np.tanh(x) * np.sin(x)
    before = xform.cache_info()["builds"]
    barrier = threading.Barrier(16)
    results, errors = [], []

    def worker():
        try:
            barrier.wait()
            for _ in range(200):
                results.append(grad_loss(x))
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)
    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 16 * 200
    assert all(np.array_equal(r, results[0]) for r in results)
    np.testing.assert_allclose(results[0], expected)
    assert xform.cache_info()["builds"] == before + 1


def test_recursion_through_function_while_other_threads_run_it():
    @xform.function
    def power(x, n):
        return xform.cond(n > 0, lambda: x * power(x, n - 1), lambda: np.ones_like(x))
    grad_power = xform.grad(lambda x, n: power(x, n))
    outcomes = {}

    def worker(n):
        outcomes[n] = [grad_power(1.5, n) for _ in range(20)]
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n, values in outcomes.items():
        assert all(v == pytest.approx(n * 1.5 ** (n - 1)) for v in values)


def test_lru_eviction_and_clear():
    xform.clear_cache()
    xform.set_cache_size(3)
    try:
        functions = [lambda x, k=k: x * k for k in range(5)]
        jitted = [xform.jit(f) for f in functions]
        for j in jitted:
            j(1.0)
        info = xform.cache_info()
        assert info["entries"] == 3 and info["evictions"] >= 2
        builds = info["builds"]
        jitted[-1](2.0)  # most recent: still cached
        assert xform.cache_info()["builds"] == builds
        jitted[0](2.0)  # evicted: built again
        assert xform.cache_info()["builds"] == builds + 1
        xform.clear_cache()
        assert xform.cache_info()["entries"] == 0
        jitted[-1](2.0)
        assert xform.cache_info()["builds"] == builds + 2
    finally:
        xform.set_cache_size(2048)


def test_dead_functions_are_not_kept_alive():
    def make():
        def short_lived(x):
            return x + 1.0
        xform.jit(short_lived)(1.0)
        return short_lived
    entries = xform.cache_info()["entries"]
    f = make()
    assert xform.cache_info()["entries"] == entries + 1
    del f
    gc.collect()
    assert xform.cache_info()["entries"] == entries


def test_a_dying_function_takes_its_entries_and_no_others():
    """Its entries are found through the index of entries per function, not by a scan of
    the cache (which made every first call of a transform made anew cost as much as the
    cache is large)."""
    from xform.runtime.cache import CACHE

    keep = [xform.jit(lambda x, k=k: x * k) for k in range(50)]
    for j in keep:
        j(1.0)
        j(np.ones(3))    # two signatures: two entries per function

    def short_lived(x):
        return x + 1.0
    xform.jit(short_lived)(1.0)
    xform.jit(short_lived)(np.ones(2))
    entries, functions = xform.cache_info()["entries"], len(CACHE._keys_of)
    builds = xform.cache_info()["builds"]
    del short_lived
    gc.collect()
    assert xform.cache_info()["entries"] == entries - 2
    assert len(CACHE._keys_of) == functions - 1
    assert all(j(2.0) == 2.0 * k and j(np.ones(3))[0] == k for k, j in enumerate(keep))
    assert xform.cache_info()["builds"] == builds    # the others' entries stayed


def test_the_index_of_entries_per_function_follows_eviction_and_clear():
    from xform.runtime.cache import CACHE

    xform.clear_cache()
    assert CACHE._keys_of == {}
    xform.set_cache_size(4)
    try:
        functions = [xform.jit(lambda x, k=k: x * k) for k in range(10)]
        for j in functions:
            j(1.0)
        filed = [key for keys in CACHE._keys_of.values() for key in keys]
        assert sorted(map(repr, filed)) == sorted(map(repr, CACHE._entries))
        assert len(filed) == 4
    finally:
        xform.set_cache_size(2048)
    xform.clear_cache()
    assert CACHE._keys_of == {}


def test_dependency_check_is_cheap_and_small():
    from xform.runtime.dependencies import Dependencies, recording

    def f(x):
        return np.sin(x) * x + 1.0
    with recording(f) as deps:
        xform.make_graph(f)(1.0)
    assert isinstance(deps, Dependencies) and deps.valid()
    assert len(deps) < 20  # independent of graph size: only what the code names


# -- debug mode -------------------------------------------------------------------------------

def _wrong_jvp_primitive():
    p = xform.Primitive("wrong_jvp_sin")
    p.def_impl(np.sin)
    p.def_abstract_eval(lambda x: x)
    p.def_jvp(lambda primals, tangents: (p.bind(primals[0]), tangents[0][:2]))
    p.def_batch(lambda size, args, dims: (p.bind(args[0]), dims[0]))
    return p


def test_debug_mode_names_primitive_rule_and_user_line():
    p = _wrong_jvp_primitive()
    with xform.config.debug_mode():
        with pytest.raises(xform.RuleError, match="jvp rule of 'wrong_jvp_sin'") as info:
            xform.jvp(lambda x: p.bind(x) * 2.0, (np.ones(3),), (np.ones(3),))
        assert THIS_FILE in str(info.value)

        bad_impl = xform.Primitive("bad_impl")
        bad_impl.def_impl(lambda x: x.astype(np.float32))
        bad_impl.def_abstract_eval(lambda x: x)
        with pytest.raises(xform.RuleError, match="'bad_impl' \\(impl\\)") as info:
            xform.jit(lambda x: bad_impl.bind(x) + 1.0)(np.ones(3))
        assert THIS_FILE in str(info.value)


def test_wrong_batch_and_vjp_rules_are_caught():
    p = xform.Primitive("wrong_batch")
    p.def_impl(np.cos)
    p.def_abstract_eval(lambda x: x)
    p.def_batch(lambda size, args, dims: (p.bind(args[0])[0], dims[0]))
    with pytest.raises(xform.RuleError, match="batch rule of 'wrong_batch'"):
        xform.vmap(lambda x: p.bind(x))(np.ones((4, 3)))
    q = xform.Primitive("wrong_vjp")
    q.def_impl(np.cos)
    q.def_abstract_eval(lambda x: x)
    q.def_vjp(lambda primals, out, ct: (np.sum(ct),))
    with pytest.raises(xform.RuleError, match="vjp rule of 'wrong_vjp'") as info:
        xform.grad(lambda x: np.sum(q.bind(x)))(np.ones(3))
    assert THIS_FILE in str(info.value)


def test_debug_mode_is_off_by_default_and_generated_code_has_no_checks():
    assert xform.config.debug is False
    graph = xform.make_graph(lambda x: np.sin(x) + 1.0)(np.ones(2))
    from xform.codegen import graph_source
    assert "check_values" not in graph_source(graph)[0]
    assert "check_values" in graph_source(graph, debug=True)[0]


def test_one_cache_holds_callee_and_sub_graphs_too():
    @xform.function
    def callee(x):
        return np.sin(x) * 2.0

    def f(x):
        return xform.cond(x > 0, lambda: callee(x), lambda: x) + 1.0
    xform.grad(f)(0.5)
    assert callee.ref.stage_count == 1
    entries = xform.cache_info()["entries"]
    assert entries >= 3  # the grad entry, the callee's graph, transformed sub-graphs
    xform.clear_cache()
    assert xform.cache_info()["entries"] == 0
    assert xform.grad(f)(0.5) == pytest.approx(2 * np.cos(0.5))
    assert callee.ref.stage_count == 2  # cleared with everything else, staged again


def test_a_fused_region_runs_code_of_the_current_debug_mode(monkeypatch):
    from xform.rules.elementwise import _RUNNERS, elementwise_p
    monkeypatch.setattr(sys.modules["xform.passes.fuse"], "FUSION_MIN_SIZE", 0)  # small too
    f = xform.jit(xform.grad(lambda x: np.sum(np.sin(x) * np.exp(x) + x)))
    graph = xform.make_graph(f)(np.ones(3))
    assert any(e.primitive is elementwise_p for e in graph.equations)
    f(np.ones(3))
    assert len(_RUNNERS) > 0
    with xform.config.debug_mode():
        assert len(_RUNNERS) == 0  # compiled without checks: dropped with the compiled code
        np.testing.assert_allclose(f(np.ones(3)), (np.cos(1) + np.sin(1)) * np.e + 1)
    assert len(_RUNNERS) == 0


def _interpreted(graph):
    def run(*args):
        with using_builder(None):
            return eval_graph(graph, *args)
    return run


def _serial_map(graph, n_mapped, operands, dests, num_threads, chunk_size, axis=None,
                summed=()) -> None:
    run = _interpreted(graph)
    mapped = [np.ravel(x) if axis is None else np.asarray(x) for x in operands[:n_mapped]]
    summed = summed or (False,) * len(dests)
    for dest, is_summed in zip(dests, summed):
        if is_summed:
            dest[...] = 0
    for i in range(mapped[0].shape[0] if mapped else 0):
        values = run(*[x[i] for x in mapped], *operands[n_mapped:])
        for dest, is_summed, value in zip(dests, summed, values):
            if is_summed:
                dest += value
            else:
                dest[i] = value


def test_any_runtime_keeping_the_contract_runs_the_rules(monkeypatch):
    """The rules use only the Runtime record's contract: a runtime that interprets graphs and
    maps serially gives the same results."""
    from xform.ir import execute
    monkeypatch.setattr(execute, "_runtime", attrs.evolve(
        execute.runtime(), compiled=_interpreted, map_chunks=_serial_map))
    x = np.linspace(0.0, 1.0, 7)
    np.testing.assert_array_equal(xform.threaded_map(lambda a: np.sin(a) * 2.0, x),
                                  np.sin(x) * 2.0)
    assert xform.fori_loop(0, 3, lambda i, v: v * 2.0, 1.0) == 8.0
    assert xform.while_loop(lambda v: v < 10.0, lambda v: v * 2.0, 1.0) == 16.0


def test_user_entries_beyond_the_bound_never_evict_a_derived_graph():
    from xform.runtime.cache import CACHE, DERIVED
    from xform.transforms.derived import jvp_of

    body = xform.make_graph(lambda x: np.sin(x) * x)(1.0)
    derived = jvp_of(body, (True,))
    derived_entries = xform.cache_info()["derived_entries"]
    xform.set_cache_size(4)
    try:
        for k in range(10):      # user entries past the bound: they evict each other
            xform.jit(lambda x, k=k: x * k)(1.0)
        assert len(CACHE._entries) <= 4 and CACHE.evictions > 0
        assert xform.cache_info()["derived_entries"] == derived_entries
        builds = DERIVED.builds
        assert jvp_of(body, (True,)) is derived    # still there: not derived again
        assert DERIVED.builds == builds
    finally:
        xform.set_cache_size(2048)
    xform.clear_cache()
    assert xform.cache_info()["derived_entries"] == 0
    assert jvp_of(body, (True,)) is not derived    # cleared with the cache


def test_an_entry_discarded_while_it_merges_dependencies_stays_discarded():
    # A collection inside add_dependencies (it allocates) may run a dead function's weakref
    # callback, which discards entries on this very thread: no deadlock, and the entry stays
    # discarded (a thread, so that a deadlock fails the test instead of hanging the suite).
    from xform.runtime.cache import Entry
    from xform.runtime.dependencies import Dependencies
    entry = Entry("value", Dependencies())

    class Collecting(Dependencies):
        def merged(self, other):
            entry.discard()
            return super().merged(other)
    entry.dependencies = Collecting()
    adding = threading.Thread(target=entry.add_dependencies, args=(Dependencies(),), daemon=True)
    adding.start()
    adding.join(10)
    assert not adding.is_alive() and not entry.valid()
