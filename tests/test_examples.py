"""The examples gallery (examples/*.py): each program runs at its small size, its gradient
agrees with finite differences and (where autograd covers its numpy) with autograd, and the
program's own result is right (the model fits, Newton converges)."""
import importlib.util
import pathlib

import autograd
import autograd.numpy as anp
import autograd.scipy.special as asp
import numpy as np
import pytest

import xform
from xform.testing import check_grads

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
# Examples that define `problem(small)` are checked by tests/test_examples_gallery.py.
PATHS = sorted(p for p in EXAMPLES.glob("*.py")
               if not p.name.startswith("_") and "\ndef problem(" not in p.read_text())


def load(path):
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_RESULTS = {}


def run(path):
    """main(small=True) of one example, run once per test session."""
    if path not in _RESULTS:
        module = load(path)
        _RESULTS[path] = module, module.main(small=True)
    return _RESULTS[path]


def partial_objective(result):
    """The objective as a function of its differentiated argument only."""
    args, argnums = list(result["args"]), result["argnums"]

    def f(x):
        return result["objective"](*args[:argnums], x, *args[argnums + 1:])
    return f, args[argnums]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_example_runs_and_documents_itself(path):
    module, result = run(path)
    assert (module.__doc__ or "").strip(), "the docstring is the example's page"
    assert {"objective", "args", "argnums"} <= set(result)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_example_gradient_against_finite_differences(path):
    _, result = run(path)
    f, x = partial_objective(result)
    check_grads(f, (x,), order=1, modes=("rev",))


def test_logistic_regression_gradient_against_autograd(monkeypatch):
    module, result = run(EXAMPLES / "logistic_regression.py")
    params, X, y, batch = result["args"]
    expected = xform.grad(module.loss)(params, X, y, batch)
    monkeypatch.setattr(module, "np", anp)    # the same source, on autograd's numpy
    oracle = autograd.grad(module.loss)(params, X, y, batch)
    np.testing.assert_allclose(expected["w"], oracle["w"], rtol=1e-10)
    np.testing.assert_allclose(expected["b"], oracle["b"], rtol=1e-10)


def test_logistic_regression_fits():
    module, result = run(EXAMPLES / "logistic_regression.py")
    params, X, y, _ = result["args"]
    everyone = np.arange(len(X))
    fitted = module.loss(params, X, y, everyone)
    at_truth = module.loss({"w": result["true_w"], "b": 0.5}, X, y, everyone)
    assert fitted < np.log(2.0)                   # better than the untrained model
    assert fitted < at_truth + 0.01               # about as good as the generating weights
    assert np.mean(result["history"][-10:]) < np.mean(result["history"][:10])


def test_newton_poisson_hessian_against_autograd(monkeypatch):
    module, result = run(EXAMPLES / "newton_poisson.py")
    w, X, y = result["args"]
    expected = xform.hessian(module.negative_log_likelihood)(w, X, y)
    monkeypatch.setattr(module, "np", anp)
    monkeypatch.setattr(module, "scipy", type("scipy", (), {"special": asp}))
    oracle = autograd.hessian(module.negative_log_likelihood)(w, X, y)
    np.testing.assert_allclose(expected, oracle, rtol=1e-10, atol=1e-12)


def test_newton_poisson_converges_to_the_stationary_point():
    module, result = run(EXAMPLES / "newton_poisson.py")
    _, X, y = result["args"]
    w = result["w"]
    # the gradient written out by hand: X^T (exp(X w) - y) / n + 2 l2 w
    by_hand = X.T @ (np.exp(X @ w) - y) / len(y) + 2 * 1e-2 * w
    np.testing.assert_allclose(by_hand, 0.0, atol=1e-10)
    norms = result["norms"]
    assert norms[-1] < 1e-10 and len(norms) <= 10
    assert norms[-1] < norms[-2] ** 1.5           # quadratic convergence at the end
