"""The dependency recorder (sys.setprofile while staging) coexists with other tools that use
Python's profile and trace hooks: cProfile, another library's profile function, and a trace
function such as pdb's. Each keeps working, and redefinitions are still noticed."""
import cProfile
import pstats
import sys

import numpy as np

import xform


def innermost(x):
    return x * 2.0


def middle(x):
    return innermost(x) + 1.0


def outer(x):
    return np.sin(middle(x))


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


def test_under_cprofile():
    profiler = cProfile.Profile()

    def under(call):
        profiler.enable()
        try:
            return call()
        finally:
            profiler.disable()
    check_redefinition_is_noticed(under)
    assert sys.getprofile() is None
    names = {function for _, _, function in pstats.Stats(profiler).stats}
    assert "outer" in names and "middle" in names     # cProfile saw the staged user code


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
