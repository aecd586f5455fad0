"""The examples gallery (examples/*.py) at small sizes: each program runs as written, its
training makes progress, and its gradient agrees with central differences of the eager
(plain numpy) program along random directions."""
import importlib

import numpy as np
import pytest

import xform
from xform import tree

GALLERY = ["mlp_minibatch", "cnn_signal", "lstm", "vae", "bbvi", "gp_regression", "gmm", "hmm",
           "heat_inverse", "neural_ode", "dask_logistic"]

# The examples whose loss draws random numbers, with the generator it draws from.
DRAWING = {"vae": "rng", "bbvi": "rs"}

# What "progress" means per example: (key before, key after, direction).
PROGRESS = {"gmm": ("start", "end", "up"), "hmm": ("start", "end", "up")}


def test_every_problem_example_is_listed():
    import pathlib
    examples = pathlib.Path(__file__).resolve().parent.parent / "examples"
    defined = {p.stem for p in examples.glob("*.py") if "\ndef problem(" in p.read_text()}
    assert defined == set(GALLERY)


def _example(name):
    return importlib.import_module(f"examples.{name}")


def _get_state(generator):
    if generator is None:
        return None
    if isinstance(generator, np.random.RandomState):
        return generator.get_state()
    return generator.bit_generator.state


def _set_state(generator, state):
    if isinstance(generator, np.random.RandomState):
        generator.set_state(state)
    elif generator is not None:
        generator.bit_generator.state = state


def _directional_fd(f, params, direction, step=1e-6):
    leaves, treedef = tree.tree_flatten(params)
    shifted = [tree.tree_unflatten(treedef, [p + s * step * d for p, d in zip(leaves, direction)])
               for s in (1.0, -1.0)]
    return (float(f(shifted[0])) - float(f(shifted[1]))) / (2 * step)   # dask: computed


@pytest.mark.parametrize("name", GALLERY)
def test_gradient_matches_central_differences(name):
    example = _example(name)
    loss, (params, *rest) = example.problem(small=True)
    generator = getattr(example, DRAWING[name]) if name in DRAWING else None
    grad = xform.grad(loss)
    grad(params, *rest)     # stages (and draws); a draw frozen here would differ below
    state = _get_state(generator)

    def eager(p):
        # Each evaluation draws the same noise, so the differences see one fixed sample.
        _set_state(generator, state)
        return loss(p, *rest)

    _set_state(generator, state)
    gradient = grad(params, *rest)
    rng = np.random.default_rng(7)
    leaves = tree.tree_leaves(params)
    for _ in range(2):
        direction = [rng.normal(size=np.shape(leaf)) for leaf in leaves]
        along = sum(np.sum(g * d) for g, d in zip(tree.tree_leaves(gradient), direction))
        np.testing.assert_allclose(along, _directional_fd(eager, params, direction),
                                   rtol=2e-4, atol=1e-7)


@pytest.mark.parametrize("name", GALLERY)
def test_training_makes_progress(name):
    result = _example(name).main(small=True)
    before, after, direction = PROGRESS.get(name, (None, None, "down"))
    keys = [k for k in result if k.endswith("start")], [k for k in result if k.endswith("end")]
    before, after = before or keys[0][0], after or keys[1][0]
    assert np.isfinite(result[after])
    if direction == "down":
        assert result[after] < result[before]
    else:
        assert result[after] > result[before]


def test_gp_regression_fits_the_curve():
    result = _example("gp_regression").main(small=True)
    assert result["converged"] and result["rms_error"] < 0.5
