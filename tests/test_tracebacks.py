"""Tracebacks of errors raised for the user's code show the user's frames, not xform's
(xform/tracebacks.py); the setting and the environment variable show everything."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import xform
from xform.tracebacks import NOTE

REPO = Path(__file__).resolve().parents[1]
XFORM_DIR = str(REPO / "xform") + os.sep

# Each script fails at the line marked `# fails here`; the call that starts xform is marked
# `# called here`.
SCRIPTS = {
    "grad of a float()": """
        import math
        import numpy as np
        import xform

        def loss(w):
            if w > 0:
                return math.sin(w)                  # fails here
            return w

        xform.grad(loss)(1.0)                       # called here
        """,
    "jit, a shape error through numpy's dispatch": """
        import numpy as np
        import xform

        def f(w):
            return np.sum(np.reshape(w, (5,)))      # fails here

        xform.jit(f)(np.ones(3))                    # called here
        """,
    "vjp, nested under vmap": """
        import numpy as np
        import xform

        def f(w):
            return np.ones(4) + w                   # fails here

        xform.vmap(lambda w: xform.vjp(f, w)[0])(np.ones((2, 3)))    # called here
        """,
    "the user's own exception while staging": """
        import numpy as np
        import xform

        def f(w, table):
            return w * table["missing"]             # fails here

        xform.grad(f)(1.0, {"present": 2.0})        # called here
        """,
    "keyword arguments": """
        import numpy as np
        import xform

        def f(w, *, scale=1.0):
            return np.sum(w @ np.ones((4, 4))) * scale    # fails here

        xform.grad(f)(np.ones(3), scale=2.0)        # called here
        """,
}


def _run(tmp_path, source, env_extra=None, prelude=""):
    script = tmp_path / "user_script.py"
    script.write_text(prelude + textwrap.dedent(source))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("XFORM_TRACEBACK_FILTERING", None)
    env.update(env_extra or {})
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode != 0, done.stdout
    lines = script.read_text().splitlines()
    failing = next(i for i, line in enumerate(lines, 1) if "# fails here" in line)
    calling = next(i for i, line in enumerate(lines, 1) if "# called here" in line)
    return done.stderr, script, failing, calling


@pytest.mark.parametrize("name", SCRIPTS)
def test_stderr_shows_the_users_lines_and_no_xform_frame(tmp_path, name):
    stderr, script, failing, calling = _run(tmp_path, SCRIPTS[name])
    assert f'File "{script}", line {calling}, in <module>' in stderr, stderr
    assert f'File "{script}", line {failing}' in stderr, stderr
    assert XFORM_DIR not in stderr, stderr
    assert 'File "<xform' not in stderr, stderr
    assert NOTE in stderr


def test_the_message_keeps_its_hint(tmp_path):
    stderr, script, failing, _ = _run(tmp_path, SCRIPTS["grad of a float()"])
    assert "ConcretizationError" in stderr
    assert f"at {script}:{failing} (loss)" in stderr
    assert "hint:" in stderr


@pytest.mark.parametrize("how", ["environment", "config"])
def test_filtering_off_shows_xforms_frames(tmp_path, how):
    if how == "environment":
        stderr, script, failing, _ = _run(tmp_path, SCRIPTS["grad of a float()"],
                                          {"XFORM_TRACEBACK_FILTERING": "off"})
    else:
        stderr, script, failing, _ = _run(
            tmp_path, SCRIPTS["grad of a float()"],
            prelude="import xform; xform.config.update('traceback_filtering', 'off')\n")
    assert f'File "{XFORM_DIR}' in stderr, stderr
    assert f'File "{script}", line {failing}' in stderr
    assert NOTE not in stderr


def test_an_internal_fault_keeps_every_frame():
    """An exception whose innermost frame is xform's (not an XformError) is a fault of xform's:
    its traceback is left whole."""
    from xform import tracebacks

    # compiled under a file name inside the package: the innermost frame is xform's
    namespace = {}
    exec(compile("def fault(f):\n    f()\n    raise RuntimeError('a fault inside xform')\n",
                 XFORM_DIR + "fault.py", "exec"), namespace)
    with pytest.raises(RuntimeError) as info:
        namespace["fault"](lambda: None)
    before = _filenames(info.value.__traceback__)
    assert not tracebacks.raised_for_user(info.value)
    tracebacks.hide_internal_frames(info.value)
    assert _filenames(info.value.__traceback__) == before
    assert XFORM_DIR + "fault.py" in before


def _filenames(tb):
    out = []
    while tb is not None:
        out.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    return out


def test_in_process_traceback_of_a_caught_error_is_filtered():
    """pytest, IPython and `traceback.print_exc` see the same filtered traceback."""
    def loss(w):
        return np.ones(4) + w
    with pytest.raises(xform.ShapeError) as info:
        xform.grad(lambda w: np.sum(loss(w)))(np.ones(3))
    names = _filenames(info.value.__traceback__)
    assert __file__ in names
    assert not any(name.startswith(XFORM_DIR) for name in names), names


def test_unknown_environment_value_is_refused(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "XFORM_TRACEBACK_FILTERING": "maybe"}
    done = subprocess.run([sys.executable, "-c", "import xform"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode != 0
    assert "XFORM_TRACEBACK_FILTERING takes 'on' or 'off'" in done.stderr


def test_ipython_shows_the_users_frames(tmp_path):
    pytest.importorskip("IPython")
    cell = textwrap.dedent("""
        import numpy as np, xform
        def loss(w):
            return np.ones(4) + w
        xform.grad(lambda w: np.sum(loss(w)))(np.ones(3))
        """)
    script = tmp_path / "cell.ipy"
    script.write_text(cell)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("XFORM_TRACEBACK_FILTERING", None)
    done = subprocess.run([sys.executable, "-m", "IPython", "--colors=NoColor", "--quick",
                           str(script)], capture_output=True, text=True, env=env, timeout=120)
    output = done.stdout + done.stderr
    assert "ShapeError" in output, output
    assert "return np.ones(4) + w" in output
    assert XFORM_DIR not in output, output


# -- numpy's RuntimeWarnings raised while xform runs a graph name the user's line -----------

def _std_of_one(x):
    return np.std(x)                                # the line every call's warnings name


def _line_of(text: str) -> int:
    return next(i for i, line in enumerate(open(__file__).read().splitlines(), 1)
                if text in line)


def _recorded(call):
    import warnings
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        result = call()
    return result, [(w.filename, w.lineno, w.category) for w in log]


def test_warnings_of_a_derivative_name_the_users_line():
    grad = xform.grad(_std_of_one)
    std_line = _line_of("return np.std(x)  ")
    for _ in range(3):       # the first call interprets, later ones run compiled code
        value, warned = _recorded(lambda: grad(np.array([2.0])))
        # np.std of one element: nan (sqrt's derivative at 0), as JAX (docs/differences.md)
        assert np.isnan(value).all()
        assert warned, "numpy's RuntimeWarning disappeared"
        # the equation's own line, not this caller's
        assert {(filename, lineno, category) for filename, lineno, category in warned} == \
            {(__file__, std_line, RuntimeWarning)}, warned


def _log_then_scale(x):
    y = x * 3.0
    z = np.log(y)                                   # the line the compiled warnings name
    return z * 2.0


def test_warnings_of_compiled_code_name_the_equations_line():
    f = xform.jit(_log_then_scale)
    for _ in range(3):
        _, warned = _recorded(lambda: f(np.array([-1.0, 2.0])))   # a caller's line
        assert warned == [(__file__, _line_of("z = np.log(y)  "), RuntimeWarning)], warned


def test_a_warning_of_a_scalar_runs_numpy_fallback_names_the_equations_line():
    """0-d float64 work runs as Python floats; a run that meets nan runs again in numpy's
    statements, compiled apart, whose warnings name the equation's line too."""
    f = xform.jit(_log_then_scale)
    for _ in range(3):
        _, warned = _recorded(lambda: f(-1.0))
        assert warned == [(__file__, _line_of("z = np.log(y)  "), RuntimeWarning)], warned


fan_out_p = xform.Primitive("test_tracebacks_fan_out")
fan_out_p.def_impl(np.sin)
fan_out_p.def_abstract_eval(lambda x: x)
# a jvp without a vjp: reverse mode transposes it
fan_out_p.def_jvp(lambda primals, tangents: (
    fan_out_p.bind(primals[0]), np.cos(primals[0]) * tangents[0] + tangents[0] * primals[0]))


def _fanning_out(x):
    spread = np.std(x)             # rewritten by passes: a one-element sum of squares
    z = fan_out_p.bind(x)
    return spread + np.sum(z * z)  # z read twice: its cotangents are summed


def _equations(graph):
    for eqn in graph.equations:
        yield eqn
        for value in eqn.params.values():
            if isinstance(value, xform.Graph):
                yield from _equations(value)


@pytest.mark.parametrize("size", [1, 3])
def test_every_equation_of_a_gradient_names_a_line_of_the_function(size):
    """The equations passes rewrite and the sums of cotangents that reverse mode adds carry
    the user's line they compute, not the caller's: what a warning raised there names."""
    first = _line_of("def _fanning_out(x):")
    body = range(first + 1, first + 4)
    graph = xform.make_graph(xform.grad(_fanning_out))(np.linspace(1.0, 2.0, size))
    for eqn in _equations(graph):
        assert eqn.source is not None and eqn.source.filename == __file__, eqn
        assert eqn.source.lineno in body, (eqn, eqn.source)


def test_warnings_with_filtering_off_name_xforms_code():
    xform.config.update("traceback_filtering", "off")
    try:
        _, warned = _recorded(lambda: xform.grad(_std_of_one)(np.array([3.0])))
    finally:
        xform.config.update("traceback_filtering", "on")
    assert any(filename.startswith(XFORM_DIR) or filename.startswith("<xform")
               for filename, _, _ in warned), warned


def test_a_warning_filter_sees_the_users_module():
    import warnings
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="test_tracebacks")
        xform.jit(lambda x: np.log(x))(-2.0)
    assert not log, [str(w.message) for w in log]


def test_a_scipy_warning_inside_a_solve_names_the_users_line():
    import scipy.integrate

    def end_state(k):
        return scipy.integrate.odeint(lambda y, t: -k * y, np.ones(1),         # the solve
                                      np.array([0.0, 50.0]), mxstep=3)[-1, 0]
    _, warned = _recorded(lambda: xform.grad(end_state)(0.5))
    assert warned, "SciPy's ODEintWarning disappeared"
    assert all(filename == __file__ for filename, _, _ in warned), warned
