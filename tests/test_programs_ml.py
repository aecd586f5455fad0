"""Machine-learning programs as a newcomer writes them in plain numpy (losses, models in
dicts, data shuffled inside the loss, logging), each the wall one of them hit: every
transformed object is called at points on both sides of its decisions, alternately, and
agrees with eager numpy, central differences and autograd where autograd runs it."""
import collections
import copy
import math
import numbers

import autograd
import autograd.numpy as anp
import numpy as np
import pytest

import xform
from tests.source_lines import assert_points_at
from tests.test_values import central_difference

RS = np.random.RandomState(0)
X = RS.randn(8, 3)
Y = (RS.rand(8) > 0.5).astype(float)
W_POINTS = [RS.randn(3), 3 * RS.randn(3), -RS.randn(3)]


@pytest.fixture(autouse=True)
def fresh_cache():
    xform.clear_cache()
    yield
    xform.clear_cache()


def _check_loss(loss, points, autograd_loss=None):
    """jit bit for bit against eager numpy, grad against central differences (and autograd),
    on one transformed object each, called at every point twice in turn."""
    jitted, grad = xform.jit(loss), xform.grad(loss)
    for w in points * 2:
        assert jitted(w) == loss(w)
        np.testing.assert_allclose(grad(w), central_difference(loss, w), rtol=1e-6,
                                   atol=1e-8)
        if autograd_loss is not None:
            np.testing.assert_allclose(grad(w), autograd.grad(autograd_loss)(w),
                                       rtol=1e-12, atol=1e-14)


def test_where_of_one_argument_selects_the_positive_scores():
    def loss(w):
        z = X @ w
        active = np.where(z > 0)[0]        # np.nonzero spelled as np.where
        return np.sum(z[active] ** 2) / max(len(active), 1)

    counts = {len(np.where(X @ w > 0)[0]) for w in W_POINTS}
    assert len(counts) > 1                 # the points select different numbers of rows
    _check_loss(loss, W_POINTS)
    got = xform.vmap(xform.grad(loss))(np.stack(W_POINTS))
    np.testing.assert_allclose(got, [central_difference(loss, w) for w in W_POINTS],
                               rtol=1e-6, atol=1e-8)


def test_tolist_of_traced_scores_keeps_their_derivative():
    def loss(w):
        scores = np.tanh(X @ w).tolist()   # Python numbers, to use Python's builtins
        return sum(s * s for s in scores) + max(scores) - min(scores)

    _check_loss(loss, W_POINTS)
    hessian = xform.hessian(loss)(W_POINTS[0])
    step = 1e-5 * np.eye(3)
    grad = xform.grad(loss)
    numeric = np.stack([(grad(W_POINTS[0] + s) - grad(W_POINTS[0] - s)) / 2e-5 for s in step])
    np.testing.assert_allclose(hessian, numeric, rtol=1e-5, atol=1e-7)


def test_tolist_of_a_matrix_nests_like_numpys():
    def f(w):
        rows = np.outer(w, w).tolist()
        return rows[0][1] + rows[2][2] + np.sum(w).tolist()

    w = W_POINTS[0]
    np.testing.assert_allclose(xform.grad(f)(w), central_difference(f, w), rtol=1e-6)
    assert xform.jit(f)(w) == f(w)


def test_convolution_by_sliding_windows():
    signal = np.sin(np.linspace(0.0, 3.0, 12))
    image = np.outer(np.cos(np.arange(5.0)), np.sin(np.arange(6.0)))

    def loss(kernel):
        windows = np.lib.stride_tricks.sliding_window_view(signal, 3)
        patches = np.lib.stride_tricks.sliding_window_view(image, (2, 2))
        rows = np.lib.stride_tricks.sliding_window_view(image, 2, axis=0)
        return (np.sum(np.maximum(windows @ kernel, 0) ** 2)
                + np.sum(np.tanh(patches * kernel[:2, None])) + np.sum(rows * kernel[2]))

    def of_signal(x):
        return np.sum(np.lib.stride_tricks.sliding_window_view(x, 4).max(axis=1) ** 2)

    _check_loss(loss, [np.array([0.2, -0.5, 0.3]), np.array([1.0, 0.5, -1.0])])
    _check_loss(of_signal, [signal, -2 * signal])        # the windows of a traced array
    batch = np.stack([signal, -signal, 0.5 * signal])
    np.testing.assert_array_equal(
        xform.vmap(lambda x: np.lib.stride_tricks.sliding_window_view(x, 3))(batch),
        np.stack([np.lib.stride_tricks.sliding_window_view(x, 3) for x in batch]))


def test_parameters_in_an_ordered_dict_and_a_defaultdict():
    def loss(params):
        w, b = params.values()             # an OrderedDict's order is its structure
        return np.mean(np.log1p(np.exp(-(2 * Y - 1) * (X @ w + b))))

    def autograd_loss(w, b):
        return anp.mean(anp.log1p(anp.exp(-(2 * Y - 1) * (anp.dot(X, w) + b))))

    for w, b in [(W_POINTS[0], 0.3), (W_POINTS[1], -0.2)]:
        params = collections.OrderedDict(w=w, b=b)
        value, grads = xform.value_and_grad(loss)(params)
        assert type(grads) is collections.OrderedDict and list(grads) == ["w", "b"]
        assert value == loss(params)
        np.testing.assert_allclose(grads["w"], autograd.grad(autograd_loss, 0)(w, b),
                                   rtol=1e-12)
        np.testing.assert_allclose(grads["b"], autograd.grad(autograd_loss, 1)(w, b),
                                   rtol=1e-12)

    per_class = collections.defaultdict(float, {0: W_POINTS[0], 1: 2.0})
    grads = xform.grad(lambda d: np.sum(d[0] ** 2) * d[1])(per_class)
    assert type(grads) is collections.defaultdict and grads.default_factory is float
    np.testing.assert_allclose(grads[0], 4.0 * W_POINTS[0])
    np.testing.assert_allclose(grads[1], np.sum(W_POINTS[0] ** 2))


def test_in_batch_negatives_drawn_by_permutation_of_traced_embeddings():
    generator = np.random.default_rng(3)
    legacy = np.random.RandomState(3)

    def contrastive(W):
        emb = np.tanh(X @ W)
        negatives = generator.permutation(emb)             # rows of a traced array
        shuffled = legacy.permutation(emb[:, 0])
        return (np.sum(np.maximum(0, 1 - np.sum(emb * emb, 1) + np.sum(emb * negatives, 1)))
                + np.sum(shuffled * np.arange(8)))

    def with_orders(W, rows, column):      # the same loss with the drawn orders fixed
        emb = np.tanh(X @ W)
        return (np.sum(np.maximum(0, 1 - np.sum(emb * emb, 1) + np.sum(emb * emb[rows], 1)))
                + np.sum(emb[column, 0] * np.arange(8)))

    value_and_grad = xform.value_and_grad(contrastive)
    for W in [RS.randn(3, 2), RS.randn(3, 2)] * 2:
        _check_drawn_gather(value_and_grad, W, with_orders, generator, legacy,
                            lambda: (generator.permutation(8), legacy.permutation(8)))


def _check_drawn_gather(value_and_grad, W, with_positions, generator, legacy, draw):
    """The transform's value and gradient at W are those of `with_positions` at the positions
    `draw()` takes from the generators' states, and the call leaves them as the draws do."""
    before = generator.bit_generator.state, legacy.get_state()
    positions = draw()
    after = generator.bit_generator.state, legacy.get_state()[1]
    generator.bit_generator.state = before[0]
    legacy.set_state(before[1])
    value, grad = value_and_grad(W)
    assert value == with_positions(W, *positions)
    np.testing.assert_allclose(grad, central_difference(
        lambda v: with_positions(v, *positions), W), rtol=1e-6, atol=1e-8)
    assert generator.bit_generator.state == after[0]     # left as eager numpy leaves them
    np.testing.assert_array_equal(legacy.get_state()[1], after[1])


class Module:
    def parameters(self):
        return [v for v in vars(self).values() if isinstance(v, np.ndarray)]


class Linear(Module):
    def __init__(self, W, b):
        self.W, self.b, self.name = W, b, "linear"

    def __call__(self, x):
        return x @ self.W + self.b


def test_parameters_found_by_isinstance_ndarray_are_regularised():
    def loss(model, lam=0.1):
        reg = sum(np.sum(p ** 2) for p in model.parameters())    # found by isinstance
        return np.mean(model(X) ** 2) + lam * reg

    def flat_loss(flat):
        return loss(Linear(flat[:6].reshape(3, 2), flat[6:]))

    value_and_grad = xform.value_and_grad(loss)
    for W, b in [(RS.randn(3, 2), np.zeros(2)), (RS.randn(3, 2), np.ones(2))] * 2:
        model = Linear(W, b)
        value, grads = value_and_grad(model)
        assert value == loss(model)
        flat = np.concatenate([W.ravel(), b])
        np.testing.assert_allclose(np.concatenate([grads.W.ravel(), grads.b]),
                                   central_difference(flat_loss, flat), rtol=1e-6, atol=1e-8)


def test_isinstance_takes_eager_numpys_branch():
    def scale(w, lr):
        if not isinstance(w, np.ndarray):       # a scalar weight: broadcast it
            w = w * np.ones(3)
        if isinstance(lr, float) and not isinstance(lr, np.ndarray):
            w = w * lr
        return np.sum((X @ w) ** 2)

    for w, lr in [(W_POINTS[0], 0.5), (W_POINTS[1], 2.0)]:
        assert xform.jit(scale)(w, lr) == scale(w, lr)
        np.testing.assert_allclose(xform.grad(scale)(w, lr),
                                   central_difference(lambda v: scale(v, lr), w), rtol=1e-6)
        np.testing.assert_allclose(xform.grad(scale, argnums=1)(w, lr),
                                   central_difference(lambda a: scale(w, a), lr), rtol=1e-6)
    np.testing.assert_allclose(xform.grad(scale)(0.7, 0.5),
                               central_difference(lambda v: scale(v, 0.5), 0.7), rtol=1e-6)


def test_scalar_checks_on_a_reduced_loss_take_eager_numpys_branch():
    def loss(w):
        value = np.sum((X @ w - Y) ** 2)
        if np.isscalar(value) and isinstance(value, numbers.Real):   # a number: normalise
            value = value / len(Y)
        return value

    _check_loss(loss, W_POINTS)


def test_ndarray_methods_in_a_classifier_loss():
    def loss(w, keep=0.4):
        p = 1 / (1 + np.exp(-(X @ w)))
        accuracy = np.mean(p.round() == Y)                  # the method, as on an ndarray
        k = math.ceil(keep * len(p))                        # how many hardest examples
        hardest = np.abs(p - Y).argsort()[-k:]
        return np.sum((p.take(hardest) - Y.take(hardest)) ** 2) * (2 - accuracy)

    accuracies = {np.mean((1 / (1 + np.exp(-(X @ w)))).round() == Y) for w in W_POINTS}
    assert len(accuracies) > 1
    _check_loss(loss, W_POINTS)


def test_inner_step_on_a_deep_copy_of_the_parameters():
    def inner_loss(params):
        return np.mean((np.tanh(X @ params["w"]) + params["b"] - Y) ** 2)

    def meta_loss(params, lr=0.5):
        adapted = copy.deepcopy(params)                     # the caller's dict untouched
        grads = {"w": X.T @ (X @ params["w"] - Y) / len(Y), "b": np.mean(params["b"] - Y)}
        for name in adapted:
            adapted[name] -= lr * grads[name]
        return inner_loss(adapted)

    def flat_loss(flat):
        return meta_loss({"w": flat[:3], "b": flat[3]})

    for w, b in [(W_POINTS[0], 0.1), (W_POINTS[1], -0.4)] * 2:
        params = {"w": w.copy(), "b": b}
        value, grads = xform.value_and_grad(meta_loss)(params)
        assert value == meta_loss(params)
        np.testing.assert_array_equal(params["w"], w)
        np.testing.assert_allclose(np.append(grads["w"], grads["b"]),
                                   central_difference(flat_loss, np.append(w, b)), rtol=1e-6,
                                   atol=1e-8)


def test_logging_the_loss_inside_it(capsys):
    # print and a format spec show the value of the call being staged, as eager numpy prints
    # it, under jit and grad alike: showing a value decides nothing (nothing is guarded or
    # cut), and a print runs while staging only
    def loss(w):
        value = np.mean((X @ w - Y) ** 2)
        print("loss", value)
        print(f"loss {value:.4f}")
        return value

    for transform in (xform.jit, xform.grad):
        w = W_POINTS[0]
        value = np.mean((X @ w - Y) ** 2)
        capsys.readouterr()
        transform(loss)(w)
        assert capsys.readouterr().out == f"loss {value}\nloss {value:.4f}\n"
        transform(loss)(W_POINTS[1])                # the cached path: no staging, no print
        assert capsys.readouterr().out == ""


def test_format_of_a_traced_vector_names_the_line():
    def loss(w):
        text = f"{w:.3f}"                                        # line: vector
        return np.sum(w) + len(text)

    with pytest.raises(xform.TypeCheckError, match="index it first") as info:
        xform.jit(loss)(W_POINTS[0])
    assert_points_at(info.value, __file__, "vector", "loss")


def test_cross_entropy_by_logaddexp_reduce():
    labels = np.array([0, 2, 1, 1, 0, 2, 2, 1])

    def loss(W):
        logits = X @ W
        log_normaliser = np.logaddexp.reduce(logits, axis=1)    # a hand-written logsumexp
        running = np.logaddexp.accumulate(logits, axis=0)[-1]
        return np.mean(log_normaliser - logits[np.arange(8), labels]) + np.sum(running)

    def autograd_loss(W):
        logits = anp.dot(X, W)
        log_normaliser = anp.log(anp.sum(anp.exp(logits), axis=1))
        running = anp.log(anp.sum(anp.exp(logits), axis=0))
        return anp.mean(log_normaliser - logits[np.arange(8), labels]) + anp.sum(running)

    jitted, grad = xform.jit(loss), xform.grad(loss)
    for W in [RS.randn(3, 3), 4 * RS.randn(3, 3)] * 2:
        assert jitted(W) == loss(W)
        np.testing.assert_allclose(grad(W), autograd.grad(autograd_loss)(W), rtol=1e-10)
        np.testing.assert_allclose(grad(W), central_difference(loss, W), rtol=1e-6, atol=1e-8)


def test_prototype_classifier_by_scipy_distances():
    from scipy.spatial.distance import cdist, pdist

    def loss(prototypes):
        logits = -cdist(X, prototypes, "sqeuclidean")            # prototypical networks
        log_normaliser = np.log(np.sum(np.exp(logits), axis=1))
        spread = np.sum(np.exp(-pdist(prototypes)))              # keep the prototypes apart
        return np.mean(log_normaliser - logits[np.arange(8), Y.astype(int)]) + spread

    jitted, grad = xform.jit(loss), xform.grad(loss)
    for prototypes in [RS.randn(2, 3), RS.randn(2, 3)] * 2:
        np.testing.assert_allclose(jitted(prototypes), loss(prototypes), rtol=1e-14)
        np.testing.assert_allclose(grad(prototypes), central_difference(loss, prototypes),
                                   rtol=1e-6, atol=1e-8)


class SlottedLogistic:
    __slots__ = ("w", "b", "name")

    def __init__(self, w, b):
        self.w, self.b, self.name = w, b, "logistic"

    def loss(self, x, y):
        z = x @ self.w + self.b
        return np.mean(np.log1p(np.exp(-(2 * y - 1) * z)))


def test_a_model_class_with_slots():
    def flat_loss(flat):
        return SlottedLogistic(flat[:3], flat[3]).loss(X, Y)

    grad = xform.grad(lambda model: model.loss(X, Y))
    for w, b in [(W_POINTS[0], 0.2), (W_POINTS[1], -0.7)] * 2:
        grads = grad(SlottedLogistic(w, b))
        assert type(grads) is SlottedLogistic and grads.name == "logistic"
        np.testing.assert_allclose(np.append(grads.w, grads.b),
                                   central_difference(flat_loss, np.append(w, b)), rtol=1e-6,
                                   atol=1e-8)


def test_an_activation_written_for_one_number_and_vectorized():
    def leaky(v):
        return v if v > 0 else 0.1 * v

    def loss(w):
        hidden = np.vectorize(leaky)(X @ w)
        grow, shift = np.vectorize(lambda a, b: (a * b, a + b))(hidden, 0.5)
        return np.sum(hidden ** 2) + np.sum(grow * shift)

    _check_loss(loss, W_POINTS)


def test_sgd_zipping_parameters_with_their_gradients():
    def init():
        rs = np.random.RandomState(1)        # inserted W1, b1, W2, b2: not sorted
        return {"W1": 0.5 * rs.randn(3, 4), "b1": np.zeros(4), "W2": 0.5 * rs.randn(4),
                "b2": 0.0}

    def loss(params):
        hidden = np.tanh(X @ params["W1"] + params["b1"])
        return np.mean((hidden @ params["W2"] + params["b2"] - Y) ** 2)

    def autograd_loss(params):
        hidden = anp.tanh(anp.dot(X, params["W1"]) + params["b1"])
        return anp.mean((anp.dot(hidden, params["W2"]) + params["b2"] - Y) ** 2)

    def step(params, grads):                 # as autograd's users write it
        return {name: value - 0.3 * grad
                for (name, value), grad in zip(params.items(), grads.values())}

    ours, theirs = init(), init()
    for _ in range(10):
        grads = xform.grad(loss)(ours)
        assert list(grads) == list(ours)
        ours, theirs = step(ours, grads), step(theirs, autograd.grad(autograd_loss)(theirs))
    for name in ours:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-10)
    assert loss(ours) < loss(init())


class TwoLayer:
    def __init__(self, seed):
        rs = np.random.RandomState(seed)
        self.W1, self.b1 = 0.5 * rs.randn(3, 4), np.zeros(4)   # not in sorted order
        self.W2, self.b2 = 0.5 * rs.randn(4), 0.0

    def __call__(self, x):
        return np.tanh(x @ self.W1 + self.b1) @ self.W2 + self.b2


def test_sgd_zipping_a_models_attributes_with_its_gradients():
    def loss(model):
        return np.mean((model(X) - Y) ** 2)

    model = TwoLayer(2)
    before = loss(model)
    for _ in range(10):
        grads = xform.grad(loss)(model)
        assert list(vars(grads)) == list(vars(model))
        for (name, value), grad in zip(list(vars(model).items()), vars(grads).values()):
            setattr(model, name, value - 0.3 * grad)
    reference = TwoLayer(2)
    for _ in range(10):
        flat = np.concatenate([reference.W1.ravel(), reference.b1, reference.W2,
                               [reference.b2]])
        step = central_difference(lambda v: loss(_two_layer_of(v)), flat)
        reference = _two_layer_of(flat - 0.3 * step)
    np.testing.assert_allclose(loss(model), loss(reference), rtol=1e-6)
    assert loss(model) < before


def _two_layer_of(flat):
    model = TwoLayer(0)
    model.W1, model.b1 = flat[:12].reshape(3, 4), flat[12:16]
    model.W2, model.b2 = flat[16:20], flat[20]
    return model


def test_a_loss_returning_metrics_without_has_aux_is_told_so():
    def loss(w):
        value = np.mean((X @ w - Y) ** 2)
        return value, {"accuracy": np.mean((X @ w > 0.5) == Y)}

    def forgot_return(w):
        np.mean((X @ w - Y) ** 2)

    with pytest.raises(xform.TypeCheckError, match="needs has_aux=True"):
        xform.grad(loss)(W_POINTS[0])
    with pytest.raises(xform.TypeCheckError, match="returned None: return the loss"):
        xform.value_and_grad(forgot_return)(W_POINTS[0])
    (value, metrics), grad = xform.value_and_grad(loss, has_aux=True)(W_POINTS[0])
    assert value == loss(W_POINTS[0])[0] and metrics["accuracy"] == loss(W_POINTS[0])[1]["accuracy"]
    np.testing.assert_allclose(grad, central_difference(lambda w: loss(w)[0], W_POINTS[0]),
                               rtol=1e-6)


def test_a_loss_that_detrends_predictions_with_polyfit():
    t = np.linspace(0.0, 1.0, 8)

    def loss(w):
        prediction = np.tanh(X @ w)
        trend = np.polyval(np.polyfit(t, prediction, 1), t)      # a fitted line, removed
        return np.sum((prediction - trend - Y) ** 2)

    def autograd_loss(w):
        prediction = anp.tanh(anp.dot(X, w))
        lhs = np.vander(t, 2)
        scale = np.sqrt((lhs * lhs).sum(axis=0))
        coefficients = anp.dot(np.linalg.pinv(lhs / scale), prediction) / scale
        return anp.sum((prediction - anp.dot(lhs, coefficients) - Y) ** 2)

    _check_loss(loss, W_POINTS)
    for w in W_POINTS:
        np.testing.assert_allclose(xform.grad(loss)(w), autograd.grad(autograd_loss)(w),
                                   rtol=1e-8, atol=1e-12)


def test_a_pairwise_margin_loss_over_the_upper_triangle():
    def loss(W):
        embeddings = np.tanh(X @ W)
        similarity = embeddings @ embeddings.T
        pairs = similarity[np.triu_indices_from(similarity, k=1)]    # each pair once
        own = similarity[np.diag_indices_from(similarity)]
        below = similarity[np.tril_indices_from(similarity, k=-1)]
        return np.sum(np.maximum(0.0, pairs - 0.2) ** 2) - np.sum(own) + np.sum(below ** 2)

    _check_loss(loss, [RS.randn(3, 2), RS.randn(3, 2)])


def test_settings_kept_with_the_parameters_are_named_as_such():
    def loss(params):
        hidden = X @ params["W"]
        for _ in range(params["depth"]):
            hidden = np.tanh(hidden) if params.get("activation", "tanh") == "tanh" else hidden
        return np.sum(hidden ** 2)

    with pytest.raises(xform.TypeCheckError, match="layer count in a dict of parameters"):
        xform.grad(loss)({"W": W_POINTS[0], "depth": 2})
    with pytest.raises(xform.TypeCheckError,
                       match=r"(?s)args\[0\]\['activation'\].*a setting kept"):
        xform.grad(loss)({"W": W_POINTS[0], "activation": "tanh"})

    class Config:                          # the fix the hints give: ints and strings static
        def __init__(self):
            self.W, self.depth, self.activation = W_POINTS[0], 2, "tanh"

        def __getitem__(self, name):
            return getattr(self, name)

        def get(self, name, default):
            return getattr(self, name, default)

    grads = xform.grad(loss)(Config())
    np.testing.assert_allclose(grads.W, central_difference(
        lambda w: loss({"W": w, "depth": 2}), W_POINTS[0]), rtol=1e-6)


def test_feature_permutation_by_a_generator_along_an_axis():
    generator = np.random.default_rng(5)

    def loss(W):                           # permuted features, the axis given either way
        features = np.tanh(X @ W)
        return (np.sum(generator.permutation(features, 1) * np.arange(2.0))
                + np.sum(generator.permutation(features, axis=1)[:, 0] ** 2))

    value_and_grad = xform.value_and_grad(loss)
    for W in [RS.randn(3, 2), RS.randn(3, 2)] * 2:
        state = generator.bit_generator.state
        expected = loss(W)
        generator.bit_generator.state = state
        assert value_and_grad(W)[0] == expected


class LinearRegression:
    def __init__(self, w, b):
        self.w, self.b = w, b

    def predict(self, x):
        return x @ self.w + self.b


def test_per_example_gradients_of_a_model_object():
    def example_loss(model, x, y):
        return (model.predict(x) - y) ** 2 + abs(model.b)

    model = LinearRegression(W_POINTS[0], 0.2)
    per_example = xform.vmap(xform.grad(example_loss), in_axes=(None, 0, 0))(model, X, Y)
    assert type(per_example) is LinearRegression and per_example.w.shape == (8, 3)
    residual = X @ model.w + model.b - Y
    np.testing.assert_allclose(per_example.w, 2 * residual[:, None] * X, rtol=1e-12)
    np.testing.assert_allclose(per_example.b, 2 * residual + 1.0, rtol=1e-12)


class Classifier:
    def __init__(self, w):
        self.w = w

    @xform.jit
    def predict(self, x):
        return 1 / (1 + np.exp(-(x @ self.w)))

    @xform.grad
    def loss_gradient(self, x, y):
        return -np.mean(y * np.log(self.predict(x)) + (1 - y) * np.log(1 - self.predict(x)))


def test_transforms_decorating_methods_bind_the_object():
    model = Classifier(W_POINTS[0])
    for w in W_POINTS * 2:
        model.w = w                                              # the next call sees it
        np.testing.assert_allclose(model.predict(X), 1 / (1 + np.exp(-(X @ w))), rtol=1e-14)
        grads = model.loss_gradient(X, Y)
        assert type(grads) is Classifier
        np.testing.assert_allclose(grads.w, X.T @ (1 / (1 + np.exp(-(X @ w))) - Y) / 8,
                                   rtol=1e-10)


def test_negatives_sampled_by_choice_of_traced_embeddings():
    generator = np.random.default_rng(8)
    legacy = np.random.RandomState(8)
    weights = np.linspace(1.0, 2.0, 8) / np.sum(np.linspace(1.0, 2.0, 8))

    def loss(W):
        emb = np.tanh(X @ W)
        negatives = generator.choice(emb, size=3, replace=False)          # rows
        weighted = legacy.choice(emb[:, 0], 4, p=weights)                 # numbers
        return np.sum(negatives ** 2) + np.sum(weighted * np.arange(4.0))

    def with_positions(W, rows, numbers):
        emb = np.tanh(X @ W)
        return np.sum(emb[rows] ** 2) + np.sum(emb[numbers, 0] * np.arange(4.0))

    value_and_grad = xform.value_and_grad(loss)
    for W in [RS.randn(3, 2), RS.randn(3, 2)] * 2:
        _check_drawn_gather(value_and_grad, W, with_positions, generator, legacy,
                            lambda: (generator.choice(8, size=3, replace=False),
                                     legacy.choice(8, 4, p=weights)))


def test_a_name_in_the_metrics_of_has_aux_comes_back_as_it_is():
    def loss(w):
        value = np.mean((X @ w - Y) ** 2)
        return value, {"model": "linear", "examples": len(Y), "loss": value}

    value_and_grad = xform.value_and_grad(loss, has_aux=True)
    for w in W_POINTS:
        (value, metrics), _ = value_and_grad(w)
        assert (metrics["model"], metrics["examples"]) == ("linear", 8)
        assert value == pytest.approx(loss(w)[0]) and metrics["loss"] == pytest.approx(value)
    with pytest.raises(xform.TypeCheckError, match="keep other objects out of them"):
        xform.value_and_grad(lambda w: (loss(w)[0], {"data": object()}),
                             has_aux=True)(W_POINTS[0])


def test_shuffling_rows_with_a_generator_made_in_the_loss():
    def rows_shuffled(W):
        rows = np.tanh(X @ W)
        np.random.default_rng(2).shuffle(rows)                   # line: shuffle
        return np.sum(rows[:, 0] * np.arange(8.0))

    def rows_permuted(W):                                        # the fix the error gives
        rows = np.tanh(X @ W)
        rows = rows[np.random.default_rng(2).permutation(len(rows))]
        return np.sum(rows[:, 0] * np.arange(8.0))

    W = RS.randn(3, 2)
    with pytest.raises(xform.UnsupportedError, match="rng.permutation") as info:
        xform.grad(rows_shuffled)(W)                 # numpy's shuffle would repeat rows
    assert_points_at(info.value, __file__, "shuffle", "rows_shuffled")
    assert rows_permuted(W) == rows_shuffled(W)
    _check_loss(rows_permuted, [W, RS.randn(3, 2)])


def test_permuting_scores_with_a_generator_made_in_the_loss():
    def loss(w):
        scores = np.tanh(X @ w)
        shuffled = np.random.default_rng(1).permutation(scores)
        legacy = np.random.RandomState(1).permutation(scores)
        return np.sum((shuffled - legacy) * np.arange(8.0)) + np.sum(shuffled * scores)

    with pytest.warns(UserWarning, match="shuffling a 'Tracer'"):   # numpy's own words
        _check_loss(loss, W_POINTS[:2])
