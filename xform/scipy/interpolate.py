"""scipy.interpolate on tracers: CubicSpline, make_interp_spline, interp1d, PchipInterpolator
and griddata (linear), differentiable in the data values and the query points; calling an
interpolator of concrete data (a PPoly, a BSpline, interp1d) at traced points, too.
RegularGridInterpolator at traced points or of traced values (linear, nearest, slinear and
the legacy spline methods; cubic and quintic solve for their spline iteratively and pchip is
not linear in the values, so those are refused on traced values).

The knots (x, the points) must be concrete. An interpolator of traced data evaluates SciPy's
own interpolator of the concrete data (SciPy's values, xform/rules/interpolate.py); its
derivative in the data is a weight matrix, SciPy's interpolant of the identity's columns at
the query points, times the data's tangent (these interpolators are linear in their data;
PCHIP is a cubic Hermite spline, linear in its values and slopes, whose slopes' tangent comes
from SciPy's slope formula written in numpy). griddata and RegularGridInterpolator of traced
values are that weight matrix times the values (SciPy's values up to rounding). A traced-data
object supports calls and `derivative()`; the rest of SciPy's interface (coefficients,
integrate, roots, ...) is refused by name.
"""
from __future__ import annotations

import copy
import itertools

import numpy as np

from xform.errors import unsupported_error
from xform.ir.ad import aval
from xform.ir.tracer import Tracer
from xform.numpy.protocol import with_constants_read
from xform.numpy.stand_ins import contains_tracer, stand_in, stand_in_when_imported
from xform.ir.avals import ShapedArray
from xform.ir.interpret import eval_graph
from xform.rules.interpolate import (DataInterpolator, Interpolant, interpolant_of_data_p,
                                     interpolant_p, query_axes_at)
from xform.rules.subgraphs import stage_flat
from xform.scipy import SCIPY_GROUP
from xform.scipy.staging import arguments, as_float
from xform.transforms.derived import jvp_of


def _interpolate():
    import scipy.interpolate
    return scipy.interpolate


def _concrete(x, what, name):
    x = with_constants_read(x)      # knots the function made: np.linspace(0, 1, 6)
    if type(x) is Tracer:
        raise unsupported_error(f"{name} with traced {what}")
    return np.asarray(x, np.float64)


def _weights(interpolant, query, nu):
    return interpolant_p.bind(as_float(query), interpolant=interpolant, nu=nu)


class _TracedData:
    """An interpolator whose data is traced: SciPy's interpolator of the concrete data at each
    call (xform/rules/interpolate.py), differentiable in the data and the query points."""

    def _traced(self, interpolator, data, nu=0):
        self._interpolator, self._data, self._nu = interpolator, data, nu
        self._name = interpolator.name

    def __call__(self, x, nu=0, extrapolate=None):
        if extrapolate is not None:
            raise unsupported_error(f"{self._name}(..., extrapolate=...) on traced data")
        return interpolant_of_data_p.bind(as_float(x), self._data,
                                          interpolator=self._interpolator, nu=self._nu + nu)

    def derivative(self, nu=1):
        derived = copy.copy(self)
        derived._nu = self._nu + nu
        return derived


def _refused(attribute):
    def refuse(self):
        raise unsupported_error(f"{self._name}.{attribute} on traced data (calls and "
                                "derivative() are supported)")
    return property(refuse)


_REFUSED = ("c", "x", "y", "t", "k", "integrate", "antiderivative", "roots", "solve",
            "extend", "insert_knot", "fill_value")
# FITPACK's UnivariateSpline family: the rest of its interface
_SPLINE_REFUSED = ("get_knots", "get_coeffs", "get_residual", "integral", "derivatives",
                   "set_smoothing_factor")
_subclasses: dict = {}


def _traced_class(cls, refused=_REFUSED):
    """`cls` with _TracedData's calls first and its other interface refused
    (isinstance(obj, cls) stays true)."""
    if cls not in _subclasses:
        namespace = {name: _refused(name) for name in refused}
        _subclasses[cls] = type(cls.__name__, (_TracedData, cls), namespace)
    return _subclasses[cls]


def _along(y, axis, name):
    """y as float64 and its interpolation axis, made non-negative."""
    y = as_float(y)
    ndim = aval(y).ndim
    if not -ndim <= axis < ndim:
        raise unsupported_error(f"{name} with axis={axis} for {ndim}-d data")
    return y, axis % ndim


def _flat(y, axis):
    """y with its interpolation axis first, flattened to (n, K); the other axes."""
    moved = np.moveaxis(y, axis, 0)
    return np.reshape(moved, (aval(moved).shape[0], -1)), aval(moved).shape[1:]


def _basis(name, interpolator_of, n):
    """The Interpolant of the identity's columns: row j of its weights is data point j's."""
    identity = interpolator_of(np.eye(n))
    return Interpolant(lambda q, nu: identity(q, nu), (n,), name)


# -- constructors of traced data --------------------------------------------------------------

def _cubic_spline_init(self, x, y, axis=0, bc_type="not-a-knot", extrapolate=None):
    name = "scipy.interpolate.CubicSpline"
    x = _concrete(x, "knots x", name)
    if not isinstance(bc_type, str) or bc_type == "periodic":
        raise unsupported_error(f"{name}(..., bc_type={bc_type!r}) on traced data")
    y, axis = _along(y, axis, name)

    def spline(data, axis):
        return _interpolate().CubicSpline(x, data, axis=axis, bc_type=bc_type,
                                          extrapolate=extrapolate)
    interpolator = DataInterpolator(lambda data, q, nu: spline(data, axis)(q, nu),
                                    _basis(name, lambda data: spline(data, 0), len(x)), axis,
                                    name)
    self.__class__ = _traced_class(type(self))
    self._traced(interpolator, y)


def _pchip_init(self, x, y, axis=0, extrapolate=None):
    name = "scipy.interpolate.PchipInterpolator"
    x = _concrete(x, "knots x", name)
    y, axis = _along(y, axis, name)
    n = len(x)
    hermite = _interpolate().CubicHermiteSpline(
        x, np.concatenate([np.eye(n), np.zeros((n, n))], 1),
        np.concatenate([np.zeros((n, n)), np.eye(n)], 1), extrapolate=extrapolate)
    interpolator = DataInterpolator(
        lambda data, q, nu: _interpolate().PchipInterpolator(
            x, data, axis=axis, extrapolate=extrapolate)(q, nu),
        Interpolant(lambda q, nu: hermite(q, nu), (2 * n,), name), axis, name,
        _pchip_tangent(x))
    self.__class__ = _traced_class(type(self))
    self._traced(interpolator, y)


def _pchip_tangent(x):
    """(values, their tangent), both (n, K) -> the tangents of the values and of PCHIP's
    slopes, stacked: what the Hermite weights multiply."""
    slopes = {}

    def tangent(values, values_dot):
        shape = aval(values).shape
        if shape not in slopes:
            slopes[shape] = stage_flat(lambda v: pchip_slopes(x, v),
                                       [ShapedArray(shape, np.dtype(np.float64))])
        slopes_dot = eval_graph(jvp_of(slopes[shape], (True,)), values, values_dot)[1]
        return np.concatenate([values_dot, slopes_dot], 0)
    return tangent


def pchip_slopes(x, y):
    """PCHIP's slopes at the knots (Fritsch-Carlson, SciPy's edge rule) of y (n, K), in numpy
    operations: y may be traced."""
    h = (x[1:] - x[:-1])[:, None]
    m = (y[1:] - y[:-1]) / h
    if len(x) == 2:
        return np.concatenate([m, m], 0)
    w1, w2 = 2 * h[1:] + h[:-1], h[1:] + 2 * h[:-1]
    flat = (np.sign(m[1:]) != np.sign(m[:-1])) | (m[1:] == 0) | (m[:-1] == 0)
    safe_next, safe_prev = np.where(flat, 1.0, m[1:]), np.where(flat, 1.0, m[:-1])
    inner = np.where(flat, 0.0, (w1 + w2) / (w1 / safe_prev + w2 / safe_next))
    return np.concatenate([_pchip_edge(h[0], h[1], m[0], m[1])[None], inner,
                           _pchip_edge(h[-1], h[-2], m[-1], m[-2])[None]], 0)


def _pchip_edge(h0, h1, m0, m1):
    d = ((2 * h0 + h1) * m0 - h0 * m1) / (h0 + h1)
    opposite = np.sign(d) != np.sign(m0)
    overshoot = (np.sign(m0) != np.sign(m1)) & (np.abs(d) > 3.0 * np.abs(m0))
    return np.where(opposite, 0.0, np.where(overshoot, 3.0 * m0, d))


def make_interp_spline(x, y, k=3, t=None, bc_type=None, axis=0, check_finite=True):
    """scipy.interpolate.make_interp_spline of traced data: a BSpline-like object."""
    name = "scipy.interpolate.make_interp_spline"
    x = _concrete(x, "knots x", name)
    if not (bc_type is None or isinstance(bc_type, str)):
        raise unsupported_error(f"{name}(..., bc_type={bc_type!r}) on traced data")
    y, axis = _along(y, axis, name)

    def spline(data, axis):
        return _interpolate().make_interp_spline(x, data, k=k, t=t, bc_type=bc_type,
                                                 axis=axis, check_finite=check_finite)
    interpolator = DataInterpolator(lambda data, q, nu: spline(data, axis)(q, nu),
                                    _basis(name, lambda data: spline(data, 0), len(x)), axis,
                                    name)
    result = object.__new__(_traced_class(_interpolate().BSpline))
    result._traced(interpolator, y)
    return result


_PIECEWISE_CONSTANT = ("nearest", "nearest-up", "zero", "previous", "next")
_SPLINE_DEGREE = {"linear": 1, "slinear": 1, "quadratic": 2, "cubic": 3}


def _interp1d_evaluator(interpolator, x, data, kind):
    """(q, nu) -> the nu-th derivative of SciPy's interp1d of `data` (axis 0): its own values,
    and derivatives from the spline of the same degree through the same points."""
    order = np.argsort(x, kind="stable")
    degree = 0 if kind in _PIECEWISE_CONSTANT else _SPLINE_DEGREE.get(kind, kind)
    spline = None if degree == 0 else _interpolate().make_interp_spline(
        x[order], data[order], k=degree)

    def evaluate(q, nu):
        if nu == 0:
            return interpolator(q)
        if spline is None:
            return np.zeros(np.shape(q) + np.shape(data)[1:])
        return spline(q, nu)
    return evaluate


def _interp1d_init(self, x, y, kind="linear", axis=-1, copy=True, bounds_error=None,
                   fill_value=np.nan, assume_sorted=False):
    name = "scipy.interpolate.interp1d"
    x = _concrete(x, "knots x", name)
    if not (isinstance(fill_value, str) or np.all(np.isnan(fill_value))):
        raise unsupported_error(f"{name}(..., fill_value=<a number>) on traced data (an "
                                "affine, not linear, function of the data)")
    y, axis = _along(y, axis, name)

    def table(data, axis):
        return _interpolate().interp1d(x, data, kind=kind, axis=axis,
                                       bounds_error=bounds_error, fill_value=fill_value,
                                       assume_sorted=assume_sorted)

    def evaluate(data, q, nu):
        if nu == 0:
            return table(data, axis)(q)
        moved = np.moveaxis(data, axis, 0)
        out = _interp1d_evaluator(None, x, moved, kind)(q, nu)
        return query_axes_at(out, np.ndim(q), axis)
    n = len(x)
    weights = Interpolant(_interp1d_evaluator(table(np.eye(n), 0), x, np.eye(n), kind), (n,),
                          name)
    self.__class__ = _traced_class(type(self))
    self._traced(DataInterpolator(evaluate, weights, axis, name), y)


# -- concrete interpolators at traced points --------------------------------------------------

def _ppoly_call(self, x, nu=0, extrapolate=None):
    if getattr(self, "axis", 0) != 0:
        raise unsupported_error(f"{type(self).__name__} with axis != 0 at traced points")
    out_shape = np.shape(self.c)[2:]
    name = f"scipy.interpolate.{type(self).__name__}"
    return _weights(Interpolant(lambda q, n: self(q, n, extrapolate), out_shape, name), x, nu)


def _bspline_call(self, x, nu=0, extrapolate=None):
    if self.axis != 0:
        raise unsupported_error("BSpline with axis != 0 at traced points")
    interpolant = Interpolant(lambda q, n: self(q, n, extrapolate), np.shape(self.c)[1:],
                              "scipy.interpolate.BSpline")
    return _weights(interpolant, x, nu)


def _fitpack_at(spline, q, nu, ext=None):
    """A FITPACK spline's nu-th derivative at q; zero above its degree (as a BSpline's is),
    where FITPACK raises (a derivative in the query points asks for one more)."""
    if nu > spline._eval_args[2]:
        return np.zeros(np.shape(q))
    return spline(q, nu, ext)


def _univariate_call(self, x, nu=0, ext=None):
    """A FITPACK spline of concrete data (UnivariateSpline and its kin, smoothing included)
    at traced points."""
    if isinstance(self, _TracedData):
        if ext is not None:
            raise unsupported_error(f"{self._name}(..., ext=...) on traced data (give ext to "
                                    "the constructor)")
        return _TracedData.__call__(self, x, nu)
    name = f"scipy.interpolate.{type(self).__name__}"
    return _weights(Interpolant(lambda q, n: _fitpack_at(self, q, n, ext), (), name), x, nu)


def _fitpack_init(kind):
    """The constructor of InterpolatedUnivariateSpline, LSQUnivariateSpline or (with s=0)
    UnivariateSpline of traced y: these fits are linear in y (their knots come from x, or t,
    alone), so SciPy's spline of the concrete y is evaluated and its derivative in y is the
    splines of the identity's columns. A smoothing UnivariateSpline (s > 0, the default)
    chooses its knots from y's values and is refused with its differentiable alternatives."""
    def init(self, x, y, *args, **kwargs):
        cls = getattr(_interpolate(), kind)
        options = arguments(cls.__init__, (self, x, y) + args, kwargs)
        del options["self"], options["x"], options["y"]
        name = f"scipy.interpolate.{kind}"
        x = _concrete(x, "knots x", name)
        for option in {"w", "t", "bbox", "s"} & options.keys():
            options[option] = with_constants_read(options[option])
            if contains_tracer(options[option]):
                raise unsupported_error(f"{name} with traced {option}",
                                        f"give {option} as concrete values (a closure "
                                        "constant or static argument); y may be traced")
        if kind == "UnivariateSpline" and options["s"] != 0:
            raise unsupported_error(
                f"{name} of traced y with smoothing (s={options['s']}; FITPACK picks its "
                "knots from y's values)",
                "fix the knots: scipy.interpolate.LSQUnivariateSpline(x, y, t) (t the "
                "interior knots, e.g. those of a fit of concrete data: "
                "spl.get_knots()[1:-1]), or interpolate: UnivariateSpline(x, y, s=0), "
                "CubicSpline(x, y) or make_interp_spline(x, y); these are linear in y")
        y, _ = _along(y, 0, name)
        if aval(y).ndim != 1:
            raise unsupported_error(f"{name} of {aval(y).ndim}-d traced y")

        def spline(data):
            return cls(x, data, **options)

        def columns(q, nu):
            return np.stack([_fitpack_at(basis, q, nu) for basis in bases], axis=-1)
        bases = [spline(column) for column in np.eye(len(x))]
        interpolator = DataInterpolator(lambda data, q, nu: _fitpack_at(spline(data), q, nu),
                                        Interpolant(columns, (len(x),), name), 0, name)
        self.__class__ = _traced_class(type(self), _REFUSED + _SPLINE_REFUSED)
        self._traced(interpolator, y)
    return init


def _interp1d_call(self, x):
    if not isinstance(self, _interpolate().interp1d):
        raise unsupported_error(f"scipy.interpolate.{type(self).__name__} at traced points")
    data = np.moveaxis(self.y, self.axis, 0)
    evaluate = _interp1d_evaluator(
        lambda q: np.moveaxis(self(q), tuple(range(self.axis, self.axis + np.ndim(q))),
                              tuple(range(np.ndim(q)))), self.x, data, self._kind)
    out = _weights(Interpolant(evaluate, np.shape(data)[1:], "scipy.interpolate.interp1d"),
                   x, 0)
    return query_axes_at(out, aval(as_float(x)).ndim, self.axis)


# -- griddata ---------------------------------------------------------------------------------

def _barycentric(triangulation, n_points):
    """(q, nu) -> weights (nu = 0: barycentric coordinates on the enclosing simplex; nan
    outside the hull) or their gradients in q (nu = 1; piecewise constant, so 0 above)."""
    d = triangulation.ndim

    def evaluate(q, nu):
        flat = np.reshape(q, (-1, d))
        simplex = triangulation.find_simplex(flat)
        transform = triangulation.transform[simplex]
        vertices = triangulation.simplices[simplex]
        rows = np.arange(len(flat))[:, None]
        inside = simplex >= 0
        if nu == 0:
            inner = np.einsum("pij,pj->pi", transform[:, :d], flat - transform[:, d])
            coordinates = np.concatenate([inner, 1 - inner.sum(1, keepdims=True)], 1)
            weights = np.zeros((len(flat), n_points))
            weights[rows, vertices] = coordinates
            weights[~inside] = np.nan
            return weights
        gradients = np.zeros((len(flat), n_points) + (d,) * nu)
        if nu == 1:
            inner = transform[:, :d, :]
            slopes = np.concatenate([inner, -inner.sum(1, keepdims=True)], 1)
            gradients[rows, vertices] = slopes
        gradients[~inside] = np.nan
        return gradients
    return evaluate


def griddata(points, values, xi, method="linear", fill_value=np.nan, rescale=False):
    """scipy.interpolate.griddata, linear, points concrete: differentiable in values and xi."""
    name = "scipy.interpolate.griddata"
    if method != "linear" or rescale or not np.isnan(fill_value):
        raise unsupported_error(f"{name} on traced values other than method='linear' "
                                "(with fill_value=nan, rescale=False)")
    points = _concrete(points, "points", name)
    if isinstance(xi, tuple):
        xi = np.stack(np.broadcast_arrays(*[as_float(v) for v in xi]), -1)
    xi = as_float(xi)
    if points.ndim == 1 or points.shape[1] == 1:
        x = np.ravel(points)
        identity = _interpolate().interp1d(x, np.eye(len(x)), axis=0, bounds_error=False)
        basis = Interpolant(_interp1d_evaluator(identity, x, np.eye(len(x)), "linear"),
                            (len(x),), name)
        if points.ndim == 2 and aval(xi).ndim > 1:
            xi = xi[..., 0]
    else:
        import scipy.spatial
        basis = Interpolant(_barycentric(scipy.spatial.Delaunay(points), len(points)),
                            (len(points),), name, query_rank=1)
    data, trailing = _flat(as_float(values), 0)
    weights = _weights(basis, xi, 0)
    return np.reshape(np.matmul(weights, data), aval(weights).shape[:-1] + trailing)


# -- RegularGridInterpolator at traced points ---------------------------------------------------

def _grid_evaluator(grid_interpolator, method):
    """(q, nu) -> the nu-th partial derivatives of a RegularGridInterpolator at points q:
    its own values; for the linear method divided differences across the enclosing cell
    (exact: multilinear), for the spline methods SciPy's `nu`, for nearest zeros."""
    grid = grid_interpolator.grid
    d = len(grid)

    def difference(points, axes):
        if not axes:
            return grid_interpolator(points, method=method)
        knots = grid[axes[0]]
        cell = np.clip(np.searchsorted(knots, points[:, axes[0]], side="right") - 1, 0,
                       len(knots) - 2)
        low, high = points.copy(), points.copy()
        low[:, axes[0]], high[:, axes[0]] = knots[cell], knots[cell + 1]
        step = knots[cell + 1] - knots[cell]
        change = difference(high, axes[1:]) - difference(low, axes[1:])
        return change / np.reshape(step, step.shape + (1,) * (np.ndim(change) - 1))

    def evaluate(q, nu):
        flat = np.reshape(q, (-1, d))
        if nu == 0:
            return grid_interpolator(flat, method=method)
        first = grid_interpolator(flat, method=method)
        out = np.zeros(np.shape(first) + (d,) * nu)
        for axes in itertools.product(range(d), repeat=nu):
            if method == "nearest" or (method == "linear" and len(set(axes)) < nu):
                continue        # piecewise constant, or linear along that axis
            if method == "linear":
                value = difference(flat, axes)
            else:
                value = grid_interpolator(flat, method=method,
                                          nu=tuple(axes.count(k) for k in range(d)))
            out[(Ellipsis,) + axes] = value
        return out
    return evaluate


# Methods whose derivative in the points SciPy computes (the others are piecewise constant or
# have none); methods linear in the values by a direct solve (cubic and quintic solve
# iteratively, pchip is not linear)
_GRID_POINT_DERIVATIVES = ("linear", "nearest", "slinear", "cubic", "quintic")
_GRID_LINEAR_IN_VALUES = ("linear", "nearest", "slinear", "slinear_legacy", "cubic_legacy",
                          "quintic_legacy")


def _grid_call(self, xi, method=None, *, nu=None):
    name = "scipy.interpolate.RegularGridInterpolator"
    if nu is not None:
        raise unsupported_error(f"{name}(..., nu=...) at traced points")
    method = method or self.method
    d = len(self.grid)
    xi = as_float(xi)
    if aval(xi).ndim == 1:      # SciPy's reading of a vector: points of d coordinates
        xi = np.reshape(xi, (-1, d))
    max_nu = None if method in _GRID_POINT_DERIVATIVES else 0
    if type(self.values) is not Tracer:
        interpolant = Interpolant(_grid_evaluator(self, method),
                                  np.shape(self.values)[d:], name, query_rank=1,
                                  max_nu=max_nu)
        return _weights(interpolant, xi, 0)
    if method not in _GRID_LINEAR_IN_VALUES:
        raise unsupported_error(f"{name}(..., method={method!r}) on traced values (use "
                                "'linear', 'slinear' or 'cubic_legacy')")
    if self.fill_value is not None and not np.isnan(self.fill_value):
        raise unsupported_error(f"{name}(..., fill_value=<a number>) on traced values and "
                                "points (an affine, not linear, function of the values)")
    grid_shape = tuple(len(g) for g in self.grid)
    n = int(np.prod(grid_shape))
    identity = _interpolate().RegularGridInterpolator(
        self.grid, np.reshape(np.eye(n), grid_shape + (n,)), method=method,
        bounds_error=self.bounds_error, fill_value=self.fill_value)
    weights = _weights(Interpolant(_grid_evaluator(identity, method), (n,), name,
                                   query_rank=1, max_nu=max_nu), xi, 0)
    data = np.reshape(self.values, (n, -1))
    return np.reshape(np.matmul(weights, data),
                      aval(weights).shape[:-1] + aval(self.values).shape[d:])


def _grid_init(self, points, values, method="linear", bounds_error=True, fill_value=np.nan,
               **solver):
    """RegularGridInterpolator of traced values with a method that precomputes a spline from
    them: SciPy's checks on zeros of the values' shape, then the traced values kept (calls
    go through `_grid_call`: the identity's interpolant times the values). Grid points the
    function made (np.linspace) are read as the constants they are."""
    name = "scipy.interpolate.RegularGridInterpolator"
    original = _interpolate().RegularGridInterpolator.__init__
    points = tuple(_concrete(p, "grid points", name) for p in points)
    if not _precomputes_from_traced_values((self, points, values, method), {}):
        return original(self, points, values, method=method, bounds_error=bounds_error,
                        fill_value=fill_value, **solver)
    if solver:
        raise unsupported_error(f"{name}(..., solver=...) on traced values")
    values = as_float(values)
    original(self, points, np.zeros(aval(values).shape), method=method,
             bounds_error=bounds_error, fill_value=fill_value)
    if self._descending_dimensions:
        values = np.flip(values, axis=self._descending_dimensions)
    self._values = values


def _precomputes_from_traced_values(args, kwargs) -> bool:
    """RegularGridInterpolator.__init__ on traced values with a spline method (which SciPy
    builds from the values at once)."""
    values = args[2] if len(args) > 2 else kwargs.get("values")
    method = args[3] if len(args) > 3 else kwargs.get("method", "linear")
    methods = _interpolate().RegularGridInterpolator._SPLINE_METHODS
    return type(values) is Tracer and method in methods


def _grid_init_needed(args, kwargs) -> bool:
    """`_precomputes_from_traced_values`, or grid points among which a traced one."""
    points = args[1] if len(args) > 1 else kwargs.get("points", ())
    return (_precomputes_from_traced_values(args, kwargs)
            or any(type(p) is Tracer for p in points))


def _grid_call_needed(args, kwargs) -> bool:
    """A call at traced points, or of an interpolator holding traced values (SciPy's code
    reads their memory layout)."""
    return type(getattr(args[0], "_values", None)) is Tracer or any(
        type(a) is Tracer for a in args[1:]) or any(type(v) is Tracer for v in kwargs.values())


def _univariate_call_needed(args, kwargs) -> bool:
    """A call at traced points, or of a spline of traced data."""
    return isinstance(args[0], _TracedData) or contains_tracer(args[1:]) or \
        contains_tracer(kwargs)


def _install():
    scipy_interpolate = _interpolate()
    from scipy.interpolate._bsplines import BSpline
    from scipy.interpolate._interpolate import _PPolyBase
    from scipy.interpolate._polyint import _Interpolator1D
    stand_in(scipy_interpolate.CubicSpline.__init__, _cubic_spline_init)
    stand_in(scipy_interpolate.PchipInterpolator.__init__, _pchip_init)
    stand_in(scipy_interpolate.interp1d.__init__, _interp1d_init)
    stand_in(scipy_interpolate.make_interp_spline, make_interp_spline)
    stand_in(scipy_interpolate.griddata, griddata)
    stand_in(_PPolyBase.__call__, _ppoly_call)
    stand_in(BSpline.__call__, _bspline_call)
    stand_in(_Interpolator1D.__call__, _interp1d_call)
    for kind in ("UnivariateSpline", "InterpolatedUnivariateSpline", "LSQUnivariateSpline"):
        stand_in(getattr(scipy_interpolate, kind).__init__, _fitpack_init(kind))
    stand_in(scipy_interpolate.UnivariateSpline.__call__, _univariate_call,
             when=_univariate_call_needed)
    stand_in(scipy_interpolate.RegularGridInterpolator.__call__, _grid_call,
             when=_grid_call_needed)
    stand_in(scipy_interpolate.RegularGridInterpolator.__init__, _grid_init,
             when=_grid_init_needed)


stand_in_when_imported("scipy.interpolate", _install, SCIPY_GROUP)
