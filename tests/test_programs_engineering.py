"""Engineering programs as a newcomer writes them (signal and image processing, finance,
control and game physics, hand-written optimisers), run unmodified through xform's
transforms: each one a wall, a wrong value or an error naming nothing, found by trying such
programs, checked against eager numpy/SciPy, finite differences and autograd where autograd
runs the program."""
import collections

import numpy as np
import pytest

import xform
from tests.source_lines import assert_points_at
from xform.testing import check_grads
from tests.test_values import central_difference

HERE = __file__


@pytest.fixture(autouse=True)
def fresh_cache():
    xform.clear_cache()
    yield
    xform.clear_cache()


_T = np.linspace(0, 1, 64)
_SIGNAL = np.sin(2 * np.pi * 5 * _T) + 0.3 * np.cos(2 * np.pi * 13 * _T)
_IMAGE = np.outer(np.sin(np.linspace(0, 3, 8)), np.cos(np.linspace(0, 2, 8)))


def assert_matches_eager_and_differences(program, points, value_rtol=1e-13, atol=1e-7):
    """One jit and one grad, called alternately at each point twice: the values are eager
    numpy's or SciPy's (to `value_rtol`), the gradients central differences', and a compiled
    gradient call computes its first (interpreted) call's bits. Returns the grad."""
    jit, grad = xform.jit(program), xform.grad(program)
    first_calls = [grad(point) for point in points]
    for point, first in zip(points * 2, first_calls * 2):
        np.testing.assert_allclose(jit(point), program(point), rtol=value_rtol)
        gradient = grad(point)
        np.testing.assert_array_equal(gradient, first)
        np.testing.assert_allclose(gradient, central_difference(program, point), rtol=1e-6,
                                   atol=atol)
    return grad


# -- SciPy's compiled code given a Tracer raised its own TypeError or AttributeError, naming
# -- neither the SciPy function, the user's line nor a fix

def gripper_orientation(rotation_vector):
    from scipy.spatial.transform import Rotation
    return Rotation.from_rotvec(rotation_vector).as_quat()[3]  # line: rotvec


def tool_tip_height(angles):
    from scipy.spatial.transform import Rotation
    return (Rotation.from_euler("xyz", angles).as_matrix() @ np.ones(3))[2]  # line: rotation


@pytest.mark.parametrize("program, point, name, tag", [
    (gripper_orientation, np.array([0.3, -0.2, 0.1]), "Rotation.from_rotvec", "rotvec"),
    (tool_tip_height, np.array([0.1, 0.2, 0.3]), "Rotation.from_euler", "rotation"),
])
@pytest.mark.parametrize("transform", [xform.jit, xform.grad])
def test_scipy_code_refusing_a_tracer_names_the_function_and_the_line(
        program, point, name, tag, transform):
    # (SciPy's Python converts the argument first where numpy's constructors stand in for
    # the staged code, and then its compiled code refuses the Tracer: either error names it)
    with pytest.raises((xform.UnsupportedError, xform.ConcretizationError), match=name) as info:
        transform(program)(point)
    assert "which has no xform version" in str(info.value)
    assert "hint: " in str(info.value)
    assert_points_at(info.value, HERE, tag, program.__name__)


def test_a_scipy_error_about_concrete_arguments_stays_scipys():
    import scipy.signal

    def filtered(x):
        b, a = scipy.signal.butter(2, 1.5)      # a cutoff past Nyquist: SciPy's ValueError
        return np.sum(x * b[0] * a[0])

    with pytest.raises(ValueError, match="Digital filter critical frequencies") as info:
        xform.jit(filtered)(np.ones(3))
    assert not isinstance(info.value, xform.XformError)


def test_the_users_own_error_mentioning_a_tracer_stays_theirs():
    def checked(x):
        raise TypeError("expected a float, got a 'Tracer'")

    with pytest.raises(TypeError, match="expected a float") as info:
        xform.jit(checked)(1.0)
    assert not isinstance(info.value, xform.XformError)


# -- np.apply_along_axis on a concrete image with a function closing over a traced kernel:
# -- numpy's own loop put the traced rows into its own array ("numpy's own conversion")

def blur_rows_residual(sigma):
    """A Gaussian blur of each image row by a kernel of traced width."""
    offsets = np.arange(-3, 4)
    kernel = np.exp(-offsets ** 2 / (2 * sigma ** 2))
    kernel = kernel / kernel.sum()
    blurred = np.apply_along_axis(lambda row: np.convolve(row, kernel, mode="same"), 1, _IMAGE)
    return np.sum((blurred - _IMAGE) ** 2)


def test_apply_along_axis_of_a_concrete_image_with_a_traced_kernel():
    grad = assert_matches_eager_and_differences(blur_rows_residual, [1.5, 0.7], value_rtol=0)
    sigmas = np.array([1.5, 0.7])
    np.testing.assert_allclose(xform.vmap(grad)(sigmas), [grad(s) for s in sigmas], rtol=1e-14)


def test_apply_along_axis_of_constants_only_gives_numpys_results():
    matrix = np.arange(12.0).reshape(3, 4)
    row_max = xform.jit(lambda s: np.apply_along_axis(np.argmax, 1, matrix) + s)
    want = np.apply_along_axis(np.argmax, 1, matrix) + 1
    got = row_max(1)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype


# -- a deque of traced samples (a filter's delay line, a history window) given to numpy:
# -- numpy's own conversion met the tracers ("converting a traced value to a numpy array")

def fir_with_a_delay_line(signal):
    """An FIR filter as a DSP textbook writes it: a fixed-length delay line, newest first."""
    taps = [0.5, 0.3, 0.2]
    delay = collections.deque([0.0] * len(taps), maxlen=len(taps))
    out = []
    for sample in signal:
        delay.appendleft(sample)
        out.append(np.dot(taps, delay))
    return np.sum((np.array(out) - _SIGNAL[:len(out)]) ** 2)


def smoothed_trajectory_end(velocity):
    """A projectile whose last positions are kept in a bounded history, then averaged."""
    position, history = np.zeros(2), collections.deque(maxlen=4)
    for _ in range(12):
        position = position + 0.05 * velocity
        velocity = velocity + 0.05 * np.array([0.0, -9.81])
        history.append(position)
    return np.mean(history, axis=0) @ np.array([1.0, 2.0]) + np.sum(np.array(history)[:, 1])


@pytest.mark.parametrize("program, points", [
    (fir_with_a_delay_line, [_SIGNAL[:10] * 0.5, _SIGNAL[20:30]]),
    (smoothed_trajectory_end, [np.array([1.0, 5.0]), np.array([2.0, 3.0])]),
])
def test_numpy_functions_of_a_deque_of_traced_values(program, points):
    assert_matches_eager_and_differences(program, points, value_rtol=0, atol=1e-9)


# -- polynomial roots and np.poly1d: "numpy.roots / numpy.trim_zeros is not supported" --------

def internal_rate_of_return(cashflows):
    """The IRR as the positive real root of the cash-flow polynomial in 1 / (1 + r)."""
    found = np.roots(cashflows[::-1])
    real = [z.real for z in found if abs(z.imag) < 1e-9 and z.real > 0]
    return 1 / max(real) - 1


def newton_on_a_poly1d(coefficients):
    """A root of a cubic by Newton's method on np.poly1d and its derivative."""
    cubic = np.poly1d(coefficients)
    slope = cubic.deriv()
    x = 2.0
    for _ in range(30):
        x = x - cubic(x) / slope(x)
    return x + cubic(1.0)


@pytest.mark.parametrize("program, points", [
    (internal_rate_of_return, [np.array([-1000.0, 300.0, 400.0, 500.0]),
                               np.array([-800.0, 200.0, 300.0, 450.0, 20.0])]),
    (newton_on_a_poly1d, [np.array([1.0, -2.0, -1.0, 2.0]), np.array([0.5, 1.0, 0.5, -3.0])]),
])
def test_polynomial_roots_and_poly1d_match_numpy_and_finite_differences(program, points):
    assert_matches_eager_and_differences(program, points, value_rtol=1e-12, atol=1e-9)


def test_roots_and_trim_zeros_cut_as_numpy_cuts():
    for coefficients in [[1.0, -3.0, 2.0], [0.0, 1.0, 0.0, -1.0, 0.0, 0.0], [2.0, 1.0, 1.0],
                         [0.0, 0.0, 5.0], [3.0, 0.0, 0.0], [0.0, 0.0]]:
        coefficients = np.array(coefficients)
        got, want = xform.jit(np.roots)(coefficients), np.roots(coefficients)
        np.testing.assert_allclose(np.sort_complex(got), np.sort_complex(want), atol=1e-12)
        for trim in ["fb", "f", "b"]:
            np.testing.assert_array_equal(xform.jit(np.trim_zeros, static_argnums=1)(
                coefficients, trim), np.trim_zeros(coefficients, trim))
    image = np.zeros((4, 5))
    image[1:3, 2:4] = [[1.0, 0.0], [0.0, 2.0]]
    for axis in [None, 0, 1, (0, 1)]:
        np.testing.assert_array_equal(
            xform.jit(lambda m: np.trim_zeros(m, axis=axis))(image),
            np.trim_zeros(image, axis=axis))


# -- scipy.signal's IIR filters: lfilter's compiled code refused a Tracer ("could not convert
# -- b, a, and x to a common type"), and filtfilt and sosfilt with it

def ar2_power(a):
    """The output power of an AR(2) filter with traced feedback coefficients."""
    import scipy.signal
    y = scipy.signal.lfilter([1.0], np.concatenate([[1.0], -a]), _SIGNAL)
    return np.mean(y ** 2)


def butterworth_fit(coefficients):
    """A second-order filter's numerator and denominator fitted to a Butterworth response."""
    import scipy.signal
    b, a = coefficients[:3], np.concatenate([[1.0], coefficients[3:]])
    target = scipy.signal.lfilter(*scipy.signal.butter(2, 0.2), _SIGNAL)
    return np.sum((scipy.signal.lfilter(b, a, _SIGNAL) - target) ** 2)


def zero_phase_smoothing(x):
    import scipy.signal
    b, a = scipy.signal.butter(3, 0.1)
    return np.sum((scipy.signal.filtfilt(b, a, x) - _SIGNAL) ** 2)


def four_pole_energy(x):
    import scipy.signal
    return np.sum(scipy.signal.sosfilt(scipy.signal.butter(4, 0.25, output="sos"), x) ** 2)


def streamed_blocks(x):
    """A signal filtered in two blocks, the second starting from the first's final state."""
    import scipy.signal
    b, a = scipy.signal.butter(2, 0.3)
    first, state = scipy.signal.lfilter(b, a, x[:32], zi=scipy.signal.lfilter_zi(b, a) * x[0])
    second, _ = scipy.signal.lfilter(b, a, x[32:], zi=state)
    return np.sum(np.concatenate([first, second]) ** 2)


@pytest.mark.parametrize("program, points", [
    (ar2_power, [np.array([0.2, 0.3]), np.array([0.5, -0.2])]),
    (butterworth_fit, [np.array([0.2, 0.3, 0.1, -0.4, 0.2]), np.array([0.1, 0.1, 0.1, -1.1, 0.3])]),
    (zero_phase_smoothing, [_SIGNAL, np.cos(3 * _T)]),
    (four_pole_energy, [_SIGNAL, np.cos(3 * _T)]),
    (streamed_blocks, [_SIGNAL, np.cos(3 * _T)]),
])
def test_iir_filters_match_scipy_and_finite_differences(program, points):
    assert_matches_eager_and_differences(program, points)
    check_grads(program, (points[0],), order=2)


def test_lfilter_values_are_scipys_and_its_batch_is_scipys_along_an_axis():
    import scipy.signal
    b, a = scipy.signal.butter(2, 0.3)
    signals = np.stack([_SIGNAL, np.cos(3 * _T), _T])
    np.testing.assert_array_equal(xform.jit(lambda x: scipy.signal.lfilter(b, a, x))(_SIGNAL),
                                  scipy.signal.lfilter(b, a, _SIGNAL))
    np.testing.assert_array_equal(
        xform.vmap(lambda x: scipy.signal.lfilter(b, a, x))(signals),
        scipy.signal.lfilter(b, a, signals))
    np.testing.assert_array_equal(
        xform.jit(lambda x: scipy.signal.lfilter(b, a, x, axis=0))(signals.T),
        scipy.signal.lfilter(b, a, signals.T, axis=0))
    # lanes with their own coefficients
    feedback = np.array([[0.2, 0.3], [0.5, -0.2]])
    np.testing.assert_allclose(xform.vmap(xform.grad(ar2_power))(feedback),
                               [xform.grad(ar2_power)(f) for f in feedback], rtol=1e-14)


# -- scipy.ndimage's filters: "scipy.ndimage.gaussian_filter (which has no xform version)" ----

def edge_energy(image):
    """The gradient magnitude by Sobel filters of a Gaussian-smoothed image."""
    import scipy.ndimage
    smooth = scipy.ndimage.gaussian_filter(image, sigma=1.0)
    gx = scipy.ndimage.sobel(smooth, axis=0)
    gy = scipy.ndimage.sobel(smooth, axis=1)
    return np.sum(np.sqrt(gx ** 2 + gy ** 2 + 1e-9))


def denoising_loss(image):
    """A data term on a box-averaged image plus a Laplacian smoothness term."""
    import scipy.ndimage
    kernel = np.array([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]])
    data = np.sum((scipy.ndimage.uniform_filter(image, 3, mode="nearest") - _IMAGE) ** 2)
    return data + 0.1 * np.sum(scipy.ndimage.convolve(image, kernel, mode="reflect") ** 2)


def robust_background(image):
    """An image less its 3x3 median background (a rank filter: ties aside, differentiable)."""
    import scipy.ndimage
    return np.sum((image - scipy.ndimage.median_filter(image, size=3)) ** 2)


_IMAGES = [_IMAGE + 0.01 * np.arange(64).reshape(8, 8) ** 1.5, np.cos(3 * _IMAGE) + _T[:8]]


@pytest.mark.parametrize("program", [edge_energy, denoising_loss, robust_background])
def test_ndimage_filters_match_scipy_and_finite_differences(program):
    assert_matches_eager_and_differences(program, _IMAGES)
    check_grads(program, (_IMAGES[0],), order=2)


@pytest.mark.parametrize("mode", ["reflect", "mirror", "nearest", "wrap", "constant"])
def test_ndimage_filters_match_scipy_in_every_mode(mode):
    import scipy.ndimage as ndimage
    filters = [
        lambda x: ndimage.correlate1d(x, [1.0, 2.0, -0.5, 0.3], axis=0, mode=mode),
        lambda x: ndimage.convolve1d(x, [1.0, 2.0, -0.5], axis=1, mode=mode, origin=1),
        lambda x: ndimage.convolve(x, np.arange(6.0).reshape(2, 3), mode=mode, cval=0.5),
        lambda x: ndimage.correlate(x, np.arange(9.0).reshape(3, 3), mode=mode, origin=(1, -1)),
        lambda x: ndimage.gaussian_filter(x, (0.7, 1.3), order=(0, 1), mode=mode),
        lambda x: ndimage.gaussian_filter1d(x, 1.5, axis=0, mode=mode),
        lambda x: ndimage.uniform_filter(x, 4, mode=mode),
        lambda x: ndimage.prewitt(x, mode=mode) + ndimage.laplace(x, mode=mode),
        lambda x: ndimage.median_filter(x, size=(2, 3), mode=mode),
        lambda x: ndimage.minimum_filter(x, 3, mode=mode) * ndimage.maximum_filter(x, 2,
                                                                                   mode=mode),
    ]
    image = np.random.default_rng(0).standard_normal((6, 7))
    for filtered in filters:
        np.testing.assert_allclose(xform.jit(filtered)(image), filtered(image), rtol=1e-13,
                                   atol=1e-14)


# -- LQR by SciPy's Riccati solvers: "scipy.linalg.solve_discrete_are (which has no xform
# -- version)"

def lqr_closed_loop_cost(weights):
    """The discrete LQR gain of a double integrator for state weights, and the cost of the
    closed loop from one initial state."""
    import scipy.linalg
    a = np.array([[1.0, 0.1], [0.0, 1.0]])
    b = np.array([[0.0], [0.1]])
    p = scipy.linalg.solve_discrete_are(a, b, np.diag(weights), np.array([[0.5]]))
    gain = np.linalg.solve(0.5 + b.T @ p @ b, b.T @ p @ a)
    x, cost = np.array([1.0, 0.0]), 0.0
    for _ in range(30):
        u = -gain @ x
        cost += x @ x + 0.1 * u @ u
        x = a @ x + b @ u
    return cost


def pole_placement_energy(damping):
    """The continuous LQR of a mass-spring-damper whose damping and stiffness are traced."""
    import scipy.linalg
    a = np.array([[0.0, 1.0], [-damping[0], -damping[1]]])
    b = np.array([[0.0], [1.0]])
    p = scipy.linalg.solve_continuous_are(a, b, np.eye(2), np.array([[1.0]]))
    return np.sum((b.T @ p) ** 2) + np.trace(p)


@pytest.mark.parametrize("program, points", [
    (lqr_closed_loop_cost, [np.array([1.0, 1.0]), np.array([3.0, 0.2])]),
    (pole_placement_energy, [np.array([2.0, 0.5]), np.array([0.5, 1.5])]),
])
def test_riccati_solutions_match_scipy_and_finite_differences(program, points):
    grad = assert_matches_eager_and_differences(program, points, value_rtol=1e-12, atol=1e-8)
    check_grads(program, (points[0],), order=2)
    np.testing.assert_allclose(xform.vmap(grad)(np.stack(points)),
                               [grad(point) for point in points], rtol=1e-12)


# -- SciPy's own Python on a traced signal (scipy.signal.hilbert's np.zeros, resample's):
# -- numpy's constructors were left out of stagings whose code spells only SciPy's names

def envelope_mean(x):
    from scipy.signal import hilbert
    return np.mean(np.abs(hilbert(x)))


def resampled_energy(x):
    import scipy.signal
    return np.sum(scipy.signal.resample(x, 100) ** 2)


def smoothed_slope_energy(x):
    """A Savitzky-Golay derivative of the detrended signal (both fit by scipy.linalg.lstsq)."""
    import scipy.signal
    trend_free = scipy.signal.detrend(x)
    return np.sum(scipy.signal.savgol_filter(trend_free, 9, 3, deriv=1) ** 2)


@pytest.mark.parametrize("program", [envelope_mean, resampled_energy, smoothed_slope_energy])
def test_scipy_signal_functions_written_in_numpy_stage(program):
    assert_matches_eager_and_differences(program, [_SIGNAL, np.cos(3 * _T) + _T])


# -- spectral estimates: scipy.signal.welch and periodogram wrote traced segments into SciPy's
# -- own arrays

def spectrum_match(x):
    """A signal's Welch spectrum matched to a target's (a relative squared error)."""
    import scipy.signal
    _, target = scipy.signal.welch(_SIGNAL, fs=64.0, nperseg=16)
    _, power = scipy.signal.welch(x, fs=64.0, nperseg=16)
    return np.sum((power - target) ** 2) / np.sum(target ** 2)


def band_power_fraction(x):
    import scipy.signal
    freqs, power = scipy.signal.periodogram(x, fs=64.0, window="hann")
    band = (freqs > 3) & (freqs < 8)
    return np.sum(power[band]) / np.sum(power)


@pytest.mark.parametrize("program", [spectrum_match, band_power_fraction])
def test_spectral_estimates_match_scipy_and_finite_differences(program):
    assert_matches_eager_and_differences(program, [np.cos(9 * _T) + _T, _SIGNAL + 0.1 * _T],
                                         value_rtol=1e-12)


# -- scipy.signal.dlsim of a system with traced matrices, or of a traced input: SciPy wrote the
# -- states into its own array

_INPUT = np.sin(np.arange(20) * 0.4)


def tracking_cost(gains):
    """A discrete plant's response, its feedback and input gains traced, to a step."""
    import scipy.signal
    a = np.array([[gains[0], 0.1], [0.0, 0.8]])
    b = np.array([[0.0], [gains[1]]])
    plant = scipy.signal.dlti(a, b, np.array([[1.0, 0.0]]), np.zeros((1, 1)), dt=0.1)
    _, y, x = scipy.signal.dlsim(plant, np.ones(20))
    return np.sum((y[:, 0] - 0.5) ** 2) + 0.1 * np.sum(x[:, 1] ** 2)


def filtered_input_energy(u):
    """A transfer function's response to a traced input (no states returned, as SciPy's)."""
    import scipy.signal
    t, y = scipy.signal.dlsim(([1.0, 0.5], [1.0, -0.5], 0.5), u)
    return np.sum(y ** 2) + t[-1]


@pytest.mark.parametrize("program, points", [
    (tracking_cost, [np.array([0.9, 0.1]), np.array([0.7, 0.3])]),
    (filtered_input_energy, [_INPUT, np.cos(np.arange(20.0))]),
])
def test_dlsim_matches_scipy_and_finite_differences(program, points):
    assert_matches_eager_and_differences(program, points, value_rtol=0)
    check_grads(program, (points[0],), order=2)


# -- image warps of order 1: scipy.ndimage.map_coordinates, shift and zoom wrote traced values
# -- into SciPy's own arrays

def registration_error(motion):
    """An image warped by a traced translation and shear, compared with a reference."""
    import scipy.ndimage
    rows, cols = np.meshgrid(np.arange(8.0), np.arange(8.0), indexing="ij")
    grid = np.stack([rows + motion[0] + motion[2] * cols, cols + motion[1]])
    warped = scipy.ndimage.map_coordinates(_IMAGE, grid, order=1, mode="nearest")
    return np.sum((warped - np.roll(_IMAGE, 1, axis=0)) ** 2)


def resampled_image_energy(image):
    import scipy.ndimage
    enlarged = scipy.ndimage.zoom(image, 1.5, order=1)
    moved = scipy.ndimage.shift(image, (0.3, -0.6), order=1, mode="reflect")
    return np.sum(enlarged ** 2) + np.sum(moved ** 3)


@pytest.mark.parametrize("program, points", [
    (registration_error, [np.array([0.31, -0.22, 0.05]), np.array([-0.4, 0.15, -0.13])]),
    (resampled_image_energy, _IMAGES),
])
def test_order_one_warps_match_scipy_and_finite_differences(program, points):
    assert_matches_eager_and_differences(program, points)
    check_grads(program, (points[0],), order=2)


@pytest.mark.parametrize("mode", ["constant", "grid-constant", "nearest", "reflect", "mirror"])
def test_order_one_warps_match_scipy_in_every_mode(mode):
    import scipy.ndimage as ndimage
    rng = np.random.default_rng(1)
    image = rng.standard_normal((5, 6))
    # points inside, on the edges and past them
    points = np.concatenate([[[0.0, 4.0, 4.0, -1.0, 2.0], [0.0, 5.0, 0.0, 2.0, 6.0]],
                             np.stack([rng.uniform(-2.5, 7.5, 50), rng.uniform(-2.5, 8.5, 50)])],
                            axis=1)
    warps = [
        lambda x, c: ndimage.map_coordinates(x, c, order=1, mode=mode, cval=-0.5),
        lambda x, c: ndimage.shift(x, (2.5, 0.25), order=1, mode=mode, cval=0.2),
        lambda x, c: ndimage.zoom(x, (2, 0.7), order=1, mode=mode),
    ]
    for warp in warps:
        np.testing.assert_allclose(xform.jit(warp)(image, points), warp(image, points),
                                   rtol=1e-13, atol=1e-15)


# -- binary morphology of a traced mask: scipy.ndimage.binary_dilation's compiled code refused
# -- a Tracer ("'Tracer' object has no attribute 'flags'")

def ring_energy(image):
    """The energy in the ring a thresholded region grows by, as an outline feature."""
    import scipy.ndimage
    region = image > 0.3
    grown = scipy.ndimage.binary_dilation(region, iterations=2)
    core = scipy.ndimage.binary_erosion(region)
    return np.sum(image[grown & ~core] ** 2)


def test_binary_morphology_of_a_traced_mask():
    grad = assert_matches_eager_and_differences(ring_energy, _IMAGES, value_rtol=0)
    import scipy.ndimage
    for image in _IMAGES:
        ring = (scipy.ndimage.binary_dilation(image > 0.3, iterations=2)
                & ~scipy.ndimage.binary_erosion(image > 0.3))
        np.testing.assert_array_equal(grad(image), np.where(ring, 2 * image, 0.0))


@pytest.mark.parametrize("structure", [None, np.ones((3, 3)), np.array([[0, 1, 0]] * 3),
                                       np.ones((1, 5))])
def test_binary_dilation_and_erosion_match_scipy(structure):
    import scipy.ndimage as ndimage
    image = np.random.default_rng(2).standard_normal((7, 8))
    for iterations in (1, 3):
        operations = [
            lambda x: ndimage.binary_dilation(x > 0.3, structure, iterations),
            lambda x: ndimage.binary_erosion(x > -0.3, structure, iterations),
            lambda x: ndimage.binary_erosion(x > -0.3, structure, iterations, border_value=1),
        ]
        for operation in operations:
            np.testing.assert_array_equal(xform.jit(operation)(image), operation(image))


# -- peak finding: scipy.signal.find_peaks's compiled code refused a Tracer

def peak_energy(x):
    """The energy of a signal's peaks above a height, as a spectral-line feature."""
    import scipy.signal
    peaks, properties = scipy.signal.find_peaks(x, height=0.1)
    return np.sum(properties["peak_heights"] ** 2) + np.sum(x[peaks]) / max(len(peaks), 1)


def test_find_peaks_by_height_matches_scipy_and_finite_differences():
    # two signals with different numbers of peaks: one path each, called alternately
    assert_matches_eager_and_differences(peak_energy, [_SIGNAL, np.cos(9 * _T) + 0.2 * _T],
                                         value_rtol=0)
    import scipy.signal
    rng = np.random.default_rng(3)
    for size in (3, 17, 40):
        x = rng.standard_normal(size)
        for height in [None, 0.1, (0.0, 1.0), (None, 0.5)]:
            got = xform.jit(lambda v: scipy.signal.find_peaks(v, height=height))(x)
            want = scipy.signal.find_peaks(x, height=height)
            np.testing.assert_array_equal(got[0], want[0])
            assert got[1].keys() == want[1].keys()
            for key in want[1]:
                np.testing.assert_array_equal(got[1][key], want[1][key])
    with pytest.raises(xform.UnsupportedError, match="two equal neighbours"):
        xform.jit(lambda v: scipy.signal.find_peaks(v)[0])(np.array([0.0, 1.0, 1.0, 0.0]))


def test_an_array_s_dot_method_where_the_code_also_spells_np_dot():
    # np.dot is a numpy builtin whose stand-in (of lists: np.dot(taps, window)) is its module
    # attribute while staging; a traced row's .dot looked np.dot up then and found none
    def loss(w):
        rows = np.array([[1.0, 0.5, -1.2], [0.3, -0.7, 2.0]])
        taps = [w[0], w[1], w[2]]
        return np.dot(taps, rows[0]) + sum(row.dot(w) ** 2 for row in rows)
    grad = xform.grad(loss)
    for w in (np.array([0.2, -0.5, 1.0]), np.array([-1.0, 0.3, 0.1])):
        assert xform.jit(loss)(w) == loss(w)
        fd = [(loss(w + 1e-6 * e) - loss(w - 1e-6 * e)) / 2e-6 for e in np.eye(3)]
        np.testing.assert_allclose(grad(w), fd, rtol=1e-6)
