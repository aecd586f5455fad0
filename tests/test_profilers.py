"""The dependency recorder (sys.setprofile while staging) coexists with other tools that use
Python's profile and trace hooks: cProfile, the pure-Python profile module, another library's
profile function, a trace function, coverage and pdb with a breakpoint in the staged code.
Each keeps working, the hooks are restored after, and redefinitions are still noticed."""
import cProfile
import gc
import os
import pstats
import sys

import attrs
import numpy as np

import xform


def innermost(x):
    return x * 2.0


def middle(x):
    return innermost(x) + 1.0


def outer(x):
    return np.sin(middle(x))


class _Holder:
    def call(self, x):
        return middle(x)


_HOLDER = _Holder()


def outer_through_an_object(x):   # a method: the walk cannot see what runs, the hook must
    return np.sin(_HOLDER.call(x))


def _redefine_innermost(factor):
    def innermost(x):
        return x * factor
    globals()["innermost"] = innermost


def check_redefinition_is_noticed(under):
    """`under(call)` runs `call` with the other tool active."""
    _redefine_innermost(2.0)
    grad = xform.grad(outer)
    first = under(lambda: grad(0.3))
    assert np.isclose(first, np.cos(0.3 * 2.0 + 1.0) * 2.0)
    _redefine_innermost(5.0)           # two calls down from the staged function
    second = under(lambda: grad(0.3))
    assert np.isclose(second, np.cos(0.3 * 5.0 + 1.0) * 5.0)


def under_profiler(profiler):
    """`under(call)`: `call()` with `profiler` (cProfile's) enabled."""
    def under(call):
        profiler.enable()
        try:
            return call()
        finally:
            profiler.disable()
    return under


def test_under_cprofile():
    profiler = cProfile.Profile()
    check_redefinition_is_noticed(under_profiler(profiler))
    assert sys.getprofile() is None
    names = {function for _, _, function in pstats.Stats(profiler).stats}
    assert "outer" in names and "middle" in names     # cProfile saw the staged user code


def test_under_cprofile_a_redefinition_through_an_object_is_noticed():
    """Under a profiler xform cannot install its hook: what the walk of the function found is
    recorded, the methods of the objects it reads and their callees included (before, the
    functions named by code alone: the cached gradient went stale)."""
    under = under_profiler(cProfile.Profile())
    _redefine_innermost(2.0)
    grad = xform.grad(outer_through_an_object)
    assert np.isclose(under(lambda: grad(0.3)), np.cos(0.3 * 2.0 + 1.0) * 2.0)
    _redefine_innermost(5.0)           # three calls down, through a method
    assert np.isclose(under(lambda: grad(0.3)), np.cos(0.3 * 5.0 + 1.0) * 5.0)


def test_under_another_librarys_profile_function():
    events = []

    def profile(frame, event, arg):
        events.append((event, frame.f_code.co_name))

    def under(call):
        sys.setprofile(profile)
        try:
            return call()
        finally:
            assert sys.getprofile() is profile       # xform left it in place
            sys.setprofile(None)
    check_redefinition_is_noticed(under)
    assert ("call", "middle") in events


def test_under_a_trace_function_as_pdb_installs():
    lines = []

    def trace(frame, event, arg):
        if event == "line" and frame.f_code.co_name == "middle":
            lines.append(frame.f_lineno)
        return trace

    def under(call):
        sys.settrace(trace)
        try:
            return call()
        finally:
            sys.settrace(None)
    check_redefinition_is_noticed(under)
    assert lines                                     # the tracer saw the staged user code
    assert sys.getprofile() is None


def test_under_coverage():
    import coverage
    previous_trace = sys.gettrace()
    cov = coverage.Coverage(data_file=None, config_file=False)

    def under(call):
        cov.start()
        try:
            return call()
        finally:
            cov.stop()
    check_redefinition_is_noticed(under)
    assert sys.gettrace() is previous_trace and sys.getprofile() is None
    measured = cov.get_data().lines(__file__) or []
    middle_body = middle.__code__.co_firstlineno + 1
    assert middle_body in measured                   # coverage saw the staged user code


def test_under_pdb_with_a_breakpoint_in_the_staged_function():
    import io
    import pdb
    out = io.StringIO()
    debugger = pdb.Pdb(stdin=io.StringIO("p x\nc\n" * 4), stdout=out, nosigint=True)
    middle_body = middle.__code__.co_firstlineno + 1
    assert debugger.set_break(__file__, middle_body) is None      # None: the break is set
    try:
        grad = xform.grad(outer)
        _redefine_innermost(2.0)
        first = debugger.runcall(grad, 0.3)
        assert np.isclose(first, np.cos(0.3 * 2.0 + 1.0) * 2.0)
        _redefine_innermost(5.0)
        second = debugger.runcall(grad, 0.3)
        assert np.isclose(second, np.cos(0.3 * 5.0 + 1.0) * 5.0)
    finally:
        debugger.clear_all_breaks()
        sys.settrace(None)
    assert sys.gettrace() is None and sys.getprofile() is None
    shown = out.getvalue()
    assert f"({middle_body})middle()" in shown       # the breakpoint stopped there, twice
    assert shown.count(f"({middle_body})middle()") == 2
    assert "Tracer" in shown or "f64" in shown       # `p x` printed the traced value


def test_under_the_pure_python_profile_module():
    import profile
    profilers = []

    def under(call):
        profilers.append(profile.Profile())   # one per run: the stdlib's cannot be reused
        # A collection can start while a frame is made, before its call event: a gc callback
        # written in Python (hypothesis installs one) then reaches profile.py as a call from a
        # frame it has not seen, trips its "Bad call" assertion and loses later events. That is
        # the stdlib profiler's limit, not xform's, so no collection runs under it here.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return profilers[-1].runcall(call)
        finally:
            if collecting:
                gc.enable()
    check_redefinition_is_noticed(under)
    assert sys.getprofile() is None
    for profiler in profilers:
        names = {function for (_, _, function) in profiler.timings}
        assert "middle" in names and "innermost" in names


def test_the_recorders_hook_sees_the_staged_code_and_not_stagings_own():
    """Each event of the recorder's profile hook costs a frame object and a dict of locals
    in CPython 3.11, so staging keeps the hook's window to the user's call: its Python
    frames are the staged functions and numpy's, xform's only in the pause around each of
    xform's entry points and the Tracer's operators the user's code calls (the scopes are
    entered and left outside the window)."""
    from xform.ir import execute

    seen = []
    original = execute.runtime()

    def spy(frame, event, arg):
        if event == "call":
            seen.append((frame.f_code.co_filename, frame.f_code.co_name))
        return original.profile_hook(frame, event, arg)

    execute.install(attrs.evolve(original, profile_hook=spy))
    try:
        _redefine_innermost(2.0)
        xform.grad(outer_through_an_object)(0.3)
    finally:
        execute.install(original)
    names = {name for _, name in seen}
    assert {"outer_through_an_object", "call", "middle", "innermost"} <= names
    package = os.path.dirname(xform.__file__)
    xform_frames = {name for filename, name in seen
                    if filename.startswith(package) and not filename.endswith("tracer.py")}
    assert xform_frames <= {"paused"}, xform_frames


def _make(g):
    return lambda x: np.sin(g(x))


_NESTED = _make(_make(middle))     # a closure of `_make`'s code holding another


def _nested_gradient(x, factor):
    inner = x * factor + 1.0
    return np.cos(np.sin(inner)) * np.cos(inner) * factor


def test_code_the_walk_sees_whole_is_recorded_with_no_hook_and_stays_sound():
    """A function whose code, closures and callees the walk followed to the end (no object's
    method, no library's function) is recorded statically: no profile hook is installed, and
    a redefinition two calls down, or of a closure's callee, is still noticed."""
    from xform.ir import execute

    events = []
    original = execute.runtime()

    def spy(frame, event, arg):
        events.append(event)
        return original.profile_hook(frame, event, arg)

    execute.install(attrs.evolve(original, profile_hook=spy))
    try:
        check_redefinition_is_noticed(lambda call: call())
        assert events == []
        scale = {"f": lambda x: x * 2.0}

        grad = xform.grad(_make(lambda x: scale["f"](x)))    # reads a dict
        assert np.isclose(grad(0.3), np.cos(0.6) * 2.0)
        assert events                                      # a dict: the hook watched it
        events.clear()
        staged = xform.jit(lambda x, g: np.sin(g(x)), static_argnums=1)
        assert np.isclose(staged(0.3, middle), np.sin(0.3 * 5.0 + 1.0))
        _redefine_innermost(4.0)          # read by the function given as a static argument
        assert np.isclose(staged(0.3, middle), np.sin(0.3 * 4.0 + 1.0))
        _redefine_innermost(5.0)
        grad_nested = xform.grad(_NESTED)
        assert np.isclose(grad_nested(0.3), _nested_gradient(0.3, 5.0))
        _redefine_innermost(3.0)          # read three calls down, through two cells
        assert np.isclose(grad_nested(0.3), _nested_gradient(0.3, 3.0))
        assert events == []
    finally:
        execute.install(original)
