"""The XLA backend: a finished graph run by XLA through jax (`lower`, `describe_split`).

`lower(graph)` returns a graph again, which xform.codegen.emit compiles as any other: each
maximal run of equations that XLA can run becomes one `xla_call` equation (its segment,
staged once by `jax.jit` and compiled by XLA on the first call); the others stay as they are
and run their numpy impls on the host: random draws and other effects, primitives without a
lowering (SciPy's LAPACK kernels, threaded_map, dask maps, odeint, callbacks), the reverse
pass of a while_loop with a run-time trip count (xform's own scheme), and any equation whose
lowering fails or disagrees with its abstract value. With placement "auto" (numpy arguments,
xform.config.xla_placement), a run of equations whose numpy code costs less than a call into
XLA, by a cost model estimated from the graph (`_xla_pays`), stays on the host too. A Python
loop over elements, unrolled into one chain of equations per element, is re-rolled: the
equations computing the same from corresponding values become one operation on a vector
(`_groups`), so that XLA compiles and runs one chain. Graphs of over MAX_EQUATIONS
operations after that stay on numpy whole: XLA's compile time grows faster than the run
time it saves there.

A primitive's lowering is the `xla` hook of its registration (`hooks=Hooks(xla=fn)`, for
library authors), else this module's table by primitive name (`_table`), else, for an impl
that is numpy's own function (a ufunc, numpy.linalg), jax.numpy's of the same name. A lowering has the impl's signature and calls
jax.numpy/jax.lax. Values are float64 as in numpy: every call enters jax's x64 mode for its
own duration (`jax.enable_x64`), never changing the user's jax configuration. jax is
imported on first use only (the `xla` extra).
"""
from __future__ import annotations

import functools
import math
import sys
import threading
import weakref

import numpy as np

from xform.errors import UnsupportedError
from xform.ir.core import Equation, Graph, Literal, Primitive, Var
from xform.ir.index_params import numpy_index
from xform.ir.registry import (RULES, has_effects, hooks_named, is_elementwise, register,
                            scalar_math_rules)
from xform.source_info import user_frame_info

#: Graphs of more operations, once re-rolled (`_rerolled_count`: a loop over elements is one
#: group per equation of its body; sub-graphs counted), stay on the numpy backend: XLA
#: compiles unrolled scalar code slowly (a chain of 900 dependent scalar equations: seconds,
#: bench/XLA.md), and more so with every equation, so that beyond this a first call would
#: cost tens of seconds or minutes.
MAX_EQUATIONS = 3000

#: The cost model (`_xla_pays`): with no jax array among a call's arguments, a run of
#: equations goes to XLA only if the numpy work it saves, estimated from the graph alone
#: (element counts, equation kinds, loops' trip counts), exceeds the price of one call into
#: XLA. Never a timing: which code runs, and so a call's bits, depends on the graph only.
#: Nanoseconds, measured on the project's CPU machine (bench/XLA.md).
XLA_CALL_NS = 15_000        # one call into XLA: jax's dispatch, transfers, reading results
HOST_CALL_NS = 1_000        # one numpy call on an array (the generated code's statement)
HOST_SCALAR_CALL_NS = 400   # one numpy call on a 0-d or one-element value
HOST_FLOAT_NS = 50          # one Python float operation (0-d float64 work emit holds as floats)
XLA_OP_NS = 50              # one operation in XLA's code (unfused scalar code costs about this)
FUSED_ELEMENT_NS = 1        # per element of an element-wise equation: a pass over memory XLA
                            # saves by fusing it
XLA_MAC_NS = 0.025          # on a CPU XLA's matrix products are slower than numpy's BLAS
XLA_CUBE_NS = 0.05          # and its factorizations and solves than LAPACK (per n**3)
UNKNOWN_TRIPS = 16          # a while_loop's trip count, which its graph does not tell

#: Primitives that always run on the host: the reverse pass of a while_loop with a run-time
#: trip count keeps xform's scheme (its recorded carries), the rest have effects or call back
#: into Python or SciPy.
HOST_ONLY = frozenset({"while_loop_grad", "threaded_map", "odeint", "odeint_adjoint",
                       "random_draw", "nondifferentiable", "psum", "pmax", "all_gather",
                       "lu_factor", "lu_pivots_to_permutation", "sylvester", "sqrtm",
                       "expm"})


# What numpy code passes around: never a jax array, known without isinstance(., jax.Array)
# (an abstract class's check, several times a cheap type lookup on every call's path).
_HOST_TYPES = frozenset({np.ndarray, float, int, bool, complex, np.float64, np.float32,
                         np.int64, np.int32, np.bool_, np.complex128})


def is_device_array(value) -> bool:
    """Whether `value` is a jax array (which only exists once jax is imported)."""
    if type(value) in _HOST_TYPES:
        return False
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(value, jax.Array)


#: [jax's array type], once the backend has imported jax ([None] before): the cached call
#: path files jax arrays by it (xform.api.dispatch).
DEVICE_ARRAY = [None]


@functools.cache
def _jax():
    try:
        import jax
        import jax.numpy as jnp
        import jax.scipy.linalg
        import jax.scipy.special  # noqa: F401
        from jax import lax
    except ImportError as err:
        raise UnsupportedError("backend='xla' needs jax, which is not installed",
                               user_frame_info(), "pip install -e '.[xla]' (jax and jaxlib, "
                               "CPU wheels from the package index)") from err
    DEVICE_ARRAY[0] = type(jnp.zeros(()))
    return jax, jnp, lax


# == lowerings ===================================================================================

class _Unlowerable(Exception):
    """An equation XLA cannot run; `eqn` is the top-level equation it belongs to."""

    def __init__(self, eqn):
        super().__init__(eqn.primitive.name)
        self.eqn = eqn


def _pad_sum(*operands, shape, dtype, windows):
    """pad_sum (xform.rules.accumulate): each operand added into its window of zeros; the
    one-element windows' scalars in one scatter. Takes a re-rolled loop's lanes as they are
    (`_Lane`): its scalars are then one vector already."""
    jax, jnp, _ = _jax()
    out = jnp.zeros(shape, dtype)
    scalars, starts = [], []
    for x, window in zip(operands, windows):
        if math.prod(max(0, -(-(stop - start) // step)) for start, stop, step in window) == 1:
            scalars.append(x)
            starts.append(tuple(start for start, _, _ in window))
        else:
            out = out.at[tuple(slice(*bounds) for bounds in window)].add(
                jnp.asarray(_value(x), dtype))
    if scalars:
        flat = (np.ravel_multi_index(tuple(np.array(axis, np.intp) for axis in zip(*starts)),
                                     shape) if shape else np.zeros(len(scalars), np.intp))
        if len(flat) == math.prod(shape) and len(np.unique(flat)) == len(flat):
            # one scalar per element (a loop's cotangents): a permutation, not a scatter,
            # which XLA compiles and runs several times slower
            order = np.argsort(flat)
            stacked = _stacked([scalars[i] for i in order]).astype(dtype).reshape(shape)
            return stacked if len(scalars) == len(operands) else out + stacked
        out = out.reshape(-1).at[flat].add(
            _stacked(scalars).astype(dtype).reshape(-1)).reshape(shape)
    return out


def _cumulative(name):
    def lowering(x, *, axis, reverse=False, exclusive=False):
        _, jnp, lax = _jax()
        out = getattr(lax, name)(x, axis=axis, reverse=reverse)
        if exclusive:
            identity = 0 if name == "cumsum" else 1
            widths = [(0, 0, 0)] * out.ndim
            widths[axis] = (-1, 1, 0) if reverse else (1, -1, 0)   # shifted by one
            out = lax.pad(out, jnp.asarray(identity, out.dtype), widths)
        return out
    return lowering


def _cond(index, *operands, branches):
    _, jnp, lax = _jax()
    functions = [functools.partial(_call_graph, branch) for branch in branches]
    if len(functions) == 1:
        return functions[0](*operands)
    return lax.switch(jnp.asarray(index, np.int32), functions, *operands)


def _call_graph(graph, *args):
    return _evaluate(graph, args)


def _as_avals(values, avals):
    _, jnp, _ = _jax()
    return tuple(jnp.asarray(v, a.dtype) for v, a in zip(values, avals))


def _while(*args, cond_graph, body_graph, n_carry, n_cond_consts):
    _, jnp, lax = _jax()
    cond_consts = args[:n_cond_consts]
    body_consts = args[n_cond_consts:len(args) - n_carry]
    carry = _as_avals(args[len(args) - n_carry:], body_graph.out_avals)
    return list(lax.while_loop(
        lambda c: jnp.asarray(_evaluate(cond_graph, (*cond_consts, *c))[0], bool),
        lambda c: tuple(_evaluate(body_graph, (*body_consts, *c))), carry))


def _scan(*args, body, n_carry, n_xs, length, reverse):
    _, _, lax = _jax()
    n_consts = len(args) - n_carry - n_xs
    consts = args[:n_consts]
    carry = _as_avals(args[n_consts:n_consts + n_carry], body.out_avals[:n_carry])
    xs = tuple(args[n_consts + n_carry:])

    def step(c, x):
        outs = _evaluate(body, (*consts, *c, *x))
        return tuple(outs[:n_carry]), tuple(outs[n_carry:])
    carry, ys = lax.scan(step, carry, xs, length=length, reverse=reverse)
    return [*carry, *ys]


def _cholesky_cotangent(factor, ct):
    """cholesky's vjp (xform.rules.linalg_scipy.cholesky_cotangent) by its formula, where the
    numpy backend runs Murray's blocked recursion on BLAS: phi(S + S^T) with
    S = L^-T phi(L^T Lbar) L^-1 (phi: the lower triangle, half the diagonal)."""
    _, jnp, lax = _jax()
    dtype = jnp.result_type(factor, ct, jnp.float32)
    batch = jnp.broadcast_shapes(factor.shape[:-2], ct.shape[:-2])
    factor = jnp.broadcast_to(factor, batch + factor.shape[-2:]).astype(dtype)
    ct = jnp.broadcast_to(ct, batch + ct.shape[-2:]).astype(dtype)
    n = factor.shape[-1]
    phi = jnp.tril(jnp.ones((n, n), dtype)) - 0.5 * jnp.eye(n, dtype=dtype)

    def sandwich(x):    # L^-T x L^-1, as two solves with L^T
        y = lax.linalg.triangular_solve(factor, x, left_side=True, lower=True,
                                        transpose_a=True)
        return jnp.swapaxes(lax.linalg.triangular_solve(
            factor, jnp.swapaxes(y, -1, -2), left_side=True, lower=True, transpose_a=True),
            -1, -2)
    product = jnp.matmul(jnp.swapaxes(factor, -1, -2), ct, precision=lax.Precision.HIGHEST)
    total = sandwich(product * phi)
    return (total + jnp.swapaxes(total, -1, -2)) * phi


def _triangular_solve(a, b, *, lower, trans, unit_diagonal):
    jax, _, _ = _jax()
    return jax.scipy.linalg.solve_triangular(a, b, trans=trans, lower=lower,
                                             unit_diagonal=unit_diagonal)


@functools.cache
def _table() -> dict:
    jax, jnp, lax = _jax()
    highest = lax.Precision.HIGHEST
    return {
        "broadcast_to": lambda x, *, shape: jnp.broadcast_to(x, shape),
        "reshape": lambda x, *, shape: jnp.reshape(x, shape),
        "slice": lambda x, *, starts, stops, steps:
            jnp.asarray(x)[tuple(map(slice, starts, stops, steps))],
        "transpose": lambda x, *, axes: jnp.transpose(x, axes),
        # XLA's values are immutable: a copy is the value itself
        "copy": lambda x: jnp.asarray(x),
        "stop_gradient": lambda x: x,
        "checkpoint_name": lambda x, *, name: x,
        "convert": lambda x, *, dtype: jnp.asarray(x).astype(dtype),
        "sum": lambda x, *, axes, dtype=None: jnp.sum(x, axis=axes, dtype=dtype),
        "prod": lambda x, *, axes, dtype=None: jnp.prod(x, axis=axes, dtype=dtype),
        "reduce_max": lambda x, *, axes: jnp.max(x, axis=axes),
        "reduce_min": lambda x, *, axes: jnp.min(x, axis=axes),
        "reduce_any": lambda x, *, axes: jnp.any(x, axis=axes),
        "reduce_all": lambda x, *, axes: jnp.all(x, axis=axes),
        "argmax": lambda x, *, axis: jnp.argmax(x, axis=axis),
        "argmin": lambda x, *, axis: jnp.argmin(x, axis=axis),
        "concatenate": lambda *xs, axis: jnp.concatenate(xs, axis),
        "diagonal": lambda x, *, offset, axis1, axis2: jnp.diagonal(x, offset, axis1, axis2),
        "flip": lambda x, *, axes: jnp.flip(x, axes),
        "roll": lambda x, *, shifts, axes: jnp.roll(x, shifts, axes),
        "repeat": lambda x, *, repeats, axis: jnp.repeat(x, repeats, axis),
        "split": lambda x, *, sizes, axis: jnp.split(x, np.cumsum(sizes[:-1]), axis),
        "gather": lambda x, *arrays, index: jnp.asarray(x)[numpy_index(index, arrays)],
        "scatter": lambda x, updates, *arrays, index:
            jnp.asarray(x).at[numpy_index(index, arrays)].set(updates),
        "scatter_add": lambda updates, *arrays, index, shape:
            jnp.zeros(shape, jnp.asarray(updates).dtype).at[numpy_index(index, arrays)]
            .add(updates),
        "pad": lambda x, value, *, widths:
            lax.pad(jnp.asarray(x), jnp.asarray(value, jnp.asarray(x).dtype), widths),
        "pad_sum": _pad_sum,
        "cumsum": _cumulative("cumsum"),
        "cumprod": _cumulative("cumprod"),
        "dot": lambda a, b: jnp.dot(a, b, precision=highest),
        "matmul": lambda a, b: jnp.matmul(a, b, precision=highest),
        "einsum": lambda *operands, subscripts:
            jnp.einsum(subscripts, *operands, precision=highest),
        "solve": lambda a, b, triangle=None: jnp.linalg.solve(a, b),
        "cholesky": lambda a, *, upper: jnp.linalg.cholesky(a, upper=upper),
        "cholesky_lapack": lambda a, **params: jnp.linalg.cholesky(a, **params),
        "triangular_solve": _triangular_solve,
        "cholesky_cotangent": _cholesky_cotangent,
        "eigh": lambda a, *, uplo: list(jnp.linalg.eigh(a, UPLO=uplo)),
        "sort": lambda x, *, axis: jnp.sort(x, axis=axis),
        "logsumexp": lambda x, *, axes: jax.scipy.special.logsumexp(x, axis=axes),
        "softplus": lambda x: jnp.logaddexp(x, 0.0),
        "cond": _cond,
        "while_loop": _while,
        "scan": _scan,
        "elementwise": lambda *args, region, **params: _evaluate(region, args),
        "call": lambda *args, callee, key: _evaluate(callee.graph(key), args),
        "custom_jvp_call": lambda *args, callee, key: _evaluate(callee.primal_graph(key), args),
        "custom_vjp_call": lambda *args, callee, key: _evaluate(callee.primal_graph(key), args),
        "checkpoint": lambda *args, graph, base, parts, saved, policy: _evaluate(graph, args),
    }


def lowering_for(prim):
    """The lowering of `prim`, or None (it runs on the host)."""
    if prim.name in HOST_ONLY:
        return None
    hook = hooks_named("xla").get(prim)
    if hook is not None:
        return hook
    table = _table()
    if prim.name in table:
        return table[prim.name]
    rules = RULES.get(prim)
    impl = getattr(rules, "impl", None)
    _, jnp, _ = _jax()
    if isinstance(impl, np.ufunc):
        return getattr(jnp, impl.__name__, None)
    module = getattr(impl, "__module__", None)
    namespace = {"numpy": jnp, "numpy.linalg": jnp.linalg}.get(module)
    return None if namespace is None else getattr(namespace, impl.__name__, None)


def _sub_graphs(eqn):
    for value in eqn.params.values():
        if type(value) is Graph:
            yield value
        elif type(value) is tuple:
            yield from (v for v in value if type(v) is Graph)


def _lowerable(eqn) -> bool:
    """Whether `eqn` may go to XLA, as far as can be told without staging it."""
    if lowering_for(eqn.primitive) is None or has_effects(eqn):
        return False
    return all(_lowerable(inner) for graph in _sub_graphs(eqn) for inner in graph.equations)


def _literal(atom):
    # A weak literal stays a Python number, so that it takes its operand's dtype in jax too.
    return atom.value if atom.aval.weak_type else np.asarray(atom.value, atom.aval.dtype)


def _evaluate(graph, args, consts=None, top=False) -> list:
    """`graph` on jax values (tracers): the outputs, each with its abstract value's dtype.
    `top`: a failing equation raises _Unlowerable of itself (what a segment splits at)."""
    _, jnp, _ = _jax()
    env = dict(zip(graph.inputs, args))
    env.update(graph.consts if consts is None else consts)
    for eqn in graph.equations:
        _evaluate_equation(eqn, env, top)
    return [jnp.asarray(_read(env, atom), atom.aval.dtype) for atom in graph.outputs]


def _read(env, atom):
    return _literal(atom) if type(atom) is Literal else _value(env[atom])


def _evaluate_equation(eqn, env, top) -> None:
    """`eqn` on the jax values of `env`, its outputs added to it. Lanes of a re-rolled loop
    (`_Lane`) are read as values, except by pad_sum, which takes them as they are."""
    _, jnp, _ = _jax()
    try:
        lowering = lowering_for(eqn.primitive)
        if lowering is None or has_effects(eqn):
            raise _Unlowerable(eqn)
        if eqn.primitive.name == "pad_sum":
            ins = [_literal(a) if type(a) is Literal else env[a] for a in eqn.inputs]
        else:
            ins = [_read(env, a) for a in eqn.inputs]
        outs = lowering(*ins, **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = (outs,)
        for var, out in zip(eqn.outputs, outs, strict=True):
            out = jnp.asarray(out)
            if out.shape != var.aval.shape:
                raise _Unlowerable(eqn)
            env[var] = out if out.dtype == var.aval.dtype else out.astype(var.aval.dtype)
    except Exception as err:
        if top:
            raise _Unlowerable(eqn) from err
        raise


# == re-rolled loops ==============================================================================
# A Python loop over elements unrolls into one chain of scalar equations per element. Lowered
# one by one, XLA gets thousands of scalar operations, which it compiles in seconds; grouped
# (the equations computing the same from corresponding values: the loop's iterations), each
# group is one operation on a vector of lanes, and the loop is one chain again.

class _Lane:
    """One equation's value in a group's: element `lane` of `vector`'s first axis."""

    __slots__ = ("vector", "lane")

    def __init__(self, vector, lane):
        self.vector = vector
        self.lane = lane


def _value(x):
    return x.vector[x.lane] if type(x) is _Lane else x


def _stacked(values):
    """The values as one array along a new first axis: a group's vector itself (or its lanes
    reordered) when they are its lanes."""
    _, jnp, _ = _jax()
    first = values[0]
    if type(first) is _Lane and all(type(v) is _Lane and v.vector is first.vector
                                    for v in values):
        lanes = np.array([v.lane for v in values])
        steps = np.diff(lanes)
        if len(lanes) > 1 and steps[0] != 0 and np.all(steps == steps[0]):
            # in order, reversed (a reverse pass reads a loop's lanes backwards), strided
            stop = lanes[-1] + np.sign(steps[0])
            return first.vector[lanes[0]:None if stop < 0 else stop:steps[0]]
        return jnp.take(first.vector, lanes, axis=0, mode="promise_in_bounds")
    return jnp.stack([jnp.asarray(_value(v)) for v in values])


def _rerollable(eqn) -> bool:
    prim = eqn.primitive
    return (not prim.multiple_results
            and (is_elementwise(prim) or prim.name in ("reshape", "slice"))
            and not has_effects(eqn))


def _signature(eqn, made_by):
    """What equations of one group share: the primitive, params, and for each input the
    group and output that made it (its lane may differ), the variable itself where no group
    made it, a literal's value; a slice's source must be one array, its starts may differ.
    None: the equation is a group of its own."""
    if not _rerollable(eqn):
        return None
    inputs = []
    for atom in eqn.inputs:
        if type(atom) is Literal:
            inputs.append((atom.aval, type(atom.value), repr(atom.value)))
        else:
            inputs.append((made_by.get(atom, atom), atom.aval))
    if eqn.primitive.name == "slice":
        starts, stops, steps = eqn.params["starts"], eqn.params["stops"], eqn.params["steps"]
        return (eqn.primitive, eqn.inputs[0], steps,
                tuple(stop - start for start, stop in zip(starts, stops)))
    return (eqn.primitive, eqn.params, tuple(inputs), eqn.outputs[0].aval)


def _groups(equations) -> list:
    """The equations as groups of indices, in an order that keeps every dependency: each
    group's inputs are made by earlier groups (a group's number exceeds those in its
    signature), so no member of a group reads another."""
    made_by, numbers, groups = {}, {}, []
    for i, eqn in enumerate(equations):
        signature = _signature(eqn, made_by)
        number = numbers.get(signature) if signature is not None else None
        if number is None:
            number = len(groups)
            groups.append([])
            if signature is not None:
                numbers[signature] = number
        groups[number].append(i)
        for position, var in enumerate(eqn.outputs):
            made_by[var] = (number, position)
    return groups


def _sliced_lanes(x, members):
    """The slices `members` of `x` as one vector of lanes: one strided slice or gather along
    the axis where their one-element windows differ, else the slices stacked."""
    _, jnp, lax = _jax()
    params = [eqn.params for eqn in members]
    starts = np.array([p["starts"] for p in params])
    varying = [axis for axis in range(starts.shape[1]) if len(set(starts[:, axis])) > 1]
    first = params[0]
    if len(varying) == 1 and first["stops"][varying[0]] - first["starts"][varying[0]] == 1:
        (axis,) = varying
        common = tuple(slice(None) if a == axis else slice(start, stop, step) for a, (
            start, stop, step) in enumerate(zip(first["starts"], first["stops"],
                                                first["steps"])))
        along = starts[:, axis]
        stride = along[1] - along[0]
        if stride > 0 and np.array_equal(np.diff(along), np.full(len(along) - 1, stride)):
            # x[i] for i in range(...): a strided slice (often all of x), not a gather
            taken = lax.slice_in_dim(jnp.asarray(x)[common], int(along[0]),
                                     int(along[-1]) + 1, int(stride), axis)
        else:
            taken = jnp.take(jnp.asarray(x)[common], along, axis=axis)
        return jnp.moveaxis(taken, axis, 0).reshape(
            (len(members), *members[0].outputs[0].aval.shape))
    return jnp.stack([jnp.asarray(x)[tuple(map(slice, p["starts"], p["stops"], p["steps"]))]
                      for p in params])


def _evaluate_group(members, env) -> None:
    """The group `members` (two or more) as one operation on vectors of lanes."""
    _, jnp, _ = _jax()
    first = members[0]
    aval = first.outputs[0].aval
    if first.primitive.name == "slice":
        out = _sliced_lanes(_read(env, first.inputs[0]), members)
    else:
        args = []
        for position, atom in enumerate(first.inputs):
            if type(atom) is Literal or all(eqn.inputs[position] is atom for eqn in members):
                args.append(_read(env, atom))
                continue
            vector = _stacked([env[eqn.inputs[position]] for eqn in members])
            if first.primitive.name != "reshape":    # lanes first, then numpy's broadcasting
                vector = vector.reshape((len(members),) + (1,) * (len(aval.shape)
                                        - len(atom.aval.shape)) + atom.aval.shape)
            args.append(vector)
        if first.primitive.name == "reshape":
            out = jnp.reshape(args[0], (len(members), *aval.shape))
        else:
            out = jnp.asarray(lowering_for(first.primitive)(*args, **first.params))
    if out.shape != (len(members), *aval.shape):
        raise _Unlowerable(first)
    out = out if out.dtype == aval.dtype else out.astype(aval.dtype)
    for lane, eqn in enumerate(members):
        env[eqn.outputs[0]] = _Lane(out, lane)


def _evaluate_rerolled(graph, args, consts) -> list:
    """`graph` on jax values, as `_evaluate` (its failing equation raises _Unlowerable), each
    group of equations (`_groups`) as one operation on vectors."""
    _, jnp, _ = _jax()
    env = dict(zip(graph.inputs, args))
    env.update(consts)
    shared = _shared_factorizations(graph.equations)
    factors = {}
    for indices in _groups(graph.equations):
        members = [graph.equations[i] for i in indices]
        if len(members) > 1:
            try:
                _evaluate_group(members, env)
                continue
            except Exception:   # one by one, so that the failing equation is found
                pass
        for eqn in members:
            if eqn in shared:
                _solve_with_shared_factors(eqn, *shared[eqn], env, factors)
            else:
                _evaluate_equation(eqn, env, top=True)
    return [jnp.asarray(_read(env, atom), atom.aval.dtype) for atom in graph.outputs]


# == solves sharing a factorization ===============================================================
# A gradient through solve(A, b) solves with A forward and with A^T backward. JAX factors A
# once for both; the two `solve` equations would factor it twice.

def _shared_factorizations(equations) -> dict:
    """solve eqn -> (matrix, transposed) for the solves with one square matrix, or its
    transpose, where two or more solve with it."""
    transposed = {eqn.outputs[0]: eqn.inputs[0] for eqn in equations
                  if eqn.primitive.name == "transpose" and eqn.params["axes"] == (1, 0)
                  and type(eqn.inputs[0]) is Var}
    users = {}
    for eqn in equations:
        matrix = eqn.inputs[0] if eqn.primitive.name == "solve" else None
        if type(matrix) is Var and len(matrix.aval.shape) == 2:
            source = transposed.get(matrix, matrix)
            users.setdefault(source, []).append((eqn, source is not matrix))
    return {eqn: (matrix, flag) for matrix, solves in users.items() if len(solves) > 1
            for eqn, flag in solves}


def _solve_with_shared_factors(eqn, matrix, transposed, env, factors) -> None:
    """`eqn`, a solve with `matrix` (or its transpose), from its LU factors, computed once."""
    jax, jnp, _ = _jax()
    try:
        if matrix not in factors:
            factors[matrix] = jax.scipy.linalg.lu_factor(_read(env, matrix))
        out = jnp.asarray(jax.scipy.linalg.lu_solve(factors[matrix], _read(env, eqn.inputs[1]),
                                                    trans=1 if transposed else 0))
        aval = eqn.outputs[0].aval
        if out.shape != aval.shape:
            raise _Unlowerable(eqn)
        env[eqn.outputs[0]] = out.astype(aval.dtype)
    except Exception as err:
        raise _Unlowerable(eqn) from err


# == the cost model ==============================================================================

_PRODUCTS = frozenset({"dot", "matmul", "einsum"})
_FACTORIZATIONS = frozenset({"cholesky", "cholesky_lapack", "cholesky_cotangent",
                             "triangular_solve", "eigh"})


def _size(atom) -> int:
    return math.prod(atom.aval.shape)


def _is_factorization(prim) -> bool:
    if prim.name in _FACTORIZATIONS:
        return True
    module = getattr(getattr(RULES.get(prim), "impl", None), "__module__", None) or ""
    return module == "numpy.linalg" or module.startswith("scipy.linalg")


def _trips(eqn) -> int:
    """How many times a loop runs its body (1 for any other equation)."""
    if eqn.primitive.name == "scan":
        return eqn.params["length"]
    return UNKNOWN_TRIPS if eqn.primitive.name == "while_loop" else 1


def _saved_ns(eqn, on_cpu: bool) -> float:
    """The estimated time XLA saves on `eqn` against the numpy backend's code (negative:
    what it costs more), its sub-graphs' equations included, for each trip of a loop."""
    inner = [sum(_saved_ns(e, on_cpu) for e in graph.equations) for graph in _sub_graphs(eqn)]
    # a cond runs one branch (the dearest, to be safe); other sub-graphs all run
    inner_ns = max(inner) if eqn.primitive.name == "cond" and inner else sum(inner)
    elements = max(map(_size, (*eqn.inputs, *eqn.outputs)), default=1)
    if elements > 1:
        host_ns = HOST_CALL_NS
    else:
        rules = scalar_math_rules().get(eqn.primitive)
        as_float = (rules is not None and rules[1].exact
                    and all(var.aval.dtype == np.float64 for var in eqn.outputs))
        host_ns = HOST_FLOAT_NS if as_float else HOST_SCALAR_CALL_NS
    saved = host_ns - XLA_OP_NS + _trips(eqn) * inner_ns
    if is_elementwise(eqn.primitive):
        saved += FUSED_ELEMENT_NS * elements
    if on_cpu and eqn.primitive.name in _PRODUCTS and len(eqn.inputs) == 2:
        # each index of a product is in two of its three arrays: sqrt(|a| |b| |out|) = m k n
        saved -= XLA_MAC_NS * math.sqrt(math.prod(map(_size, (*eqn.inputs, *eqn.outputs))))
    elif on_cpu and _is_factorization(eqn.primitive) and eqn.inputs[0].aval.shape:
        saved -= XLA_CUBE_NS * _size(eqn.inputs[0]) * eqn.inputs[0].aval.shape[-1]
    return saved


def _xla_on_cpu() -> bool:
    """Whether XLA's default device is the CPU (the numpy backend's own)."""
    return _jax()[0].default_backend() == "cpu"


def _xla_pays(equations) -> bool:
    """Whether the run `equations` is worth a call into XLA (the cost model, XLA_CALL_NS)."""
    on_cpu = _xla_on_cpu()
    return sum(_saved_ns(eqn, on_cpu) for eqn in equations) > XLA_CALL_NS


# == segments ====================================================================================

xla_call_p = Primitive("xla_call", multiple_results=True)
to_host_p = Primitive("to_host")
to_caller_p = Primitive("to_caller", multiple_results=True)


class Executable:
    """A segment's code: `jax.jit` of its lowering, called in x64 mode; the outputs numpy
    code reads come back as numpy arrays (`host_reads`), the others stay jax arrays (on
    their device). Compares by identity (a param)."""

    __slots__ = ("jitted", "host_reads", "equations", "_x64", "__weakref__")

    def __init__(self, jitted, host_reads, equations):
        self.jitted = jitted
        self.host_reads = host_reads
        self.equations = equations
        self._x64 = _jax()[0].enable_x64

    def __call__(self, *args):
        with self._x64(True):
            outs = self.jitted(*args)
        for i in self.host_reads:
            outs[i] = np.asarray(outs[i])
        return outs

    def __repr__(self) -> str:
        return f"<XLA: {self.equations} equations>"


def _xla_call_impl(*args, graph, executable):
    return executable(*args)


def _to_host(x):
    return np.asarray(x) if is_device_array(x) else x


def _to_caller_impl(*inputs_and_outputs, n_inputs):
    """The outputs as numpy arrays, unless a jax array came in: then as jax arrays on its
    device (the caller works with jax arrays; XLA's outputs are there already, those of host
    equations are put there)."""
    outputs = inputs_and_outputs[n_inputs:]
    for x in inputs_and_outputs[:n_inputs]:
        if type(x) not in _HOST_TYPES and is_device_array(x):
            return _on_device_of(x, outputs)
    return [x if type(x) in _HOST_TYPES or not is_device_array(x) else np.asarray(x)
            for x in outputs]


def _on_device_of(array, outputs):
    jax, _, _ = _jax()
    if all(map(is_device_array, outputs)):
        return list(outputs)
    with jax.enable_x64(True):
        device = next(iter(array.devices()))
        return [x if is_device_array(x) else jax.device_put(x, device) for x in outputs]


register(xla_call_p, impl=_xla_call_impl,
         abstract_eval=lambda *avals, graph, executable: list(graph.out_avals))
register(to_host_p, impl=_to_host, abstract_eval=lambda x: x)
register(to_caller_p, impl=_to_caller_impl,
         abstract_eval=lambda *avals, n_inputs: list(avals[n_inputs:]))


def _spec(aval):
    jax, _, _ = _jax()
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)


def _count(graph) -> int:
    return sum(1 + sum(_count(g) for g in _sub_graphs(eqn)) for eqn in graph.equations)


def _rerolled_count(graph) -> int:
    """How many operations XLA compiles for `graph`: its groups (`_groups`), sub-graphs'
    equations counted."""
    return len(_groups(graph.equations)) + sum(_count(g) for eqn in graph.equations
                                               for g in _sub_graphs(eqn))


def _segment(graph, run, later_reads, consts):
    """The xla_call equation of the equations `run` of `graph` (staged now: raises
    _Unlowerable at the first equation that fails)."""
    jax, _, _ = _jax()
    defined, inputs = set(), {}
    for eqn in run:
        for atom in eqn.inputs:
            if type(atom) is Var and atom not in defined and atom not in consts:
                inputs.setdefault(atom, None)
        defined.update(eqn.outputs)
    used_consts = {atom: consts[atom] for eqn in run for atom in eqn.inputs
                   if type(atom) is Var and atom in consts}
    outputs = [var for eqn in run for var in eqn.outputs if var in later_reads]
    segment = Graph(tuple(inputs), (), run, outputs)
    with jax.enable_x64(True):
        # on the device once, not passed from the host on every call
        device_consts = tuple((var, jax.device_put(value))
                              for var, value in used_consts.items())

        def lowered(*args):
            return _evaluate_rerolled(segment, args, device_consts)
        jitted = jax.jit(lowered)
        jitted.trace(*[_spec(var.aval) for var in segment.inputs])
    host_reads = tuple(i for i, var in enumerate(outputs) if later_reads[var] == "host")
    executable = Executable(jitted, host_reads, len(run))
    return Equation(xla_call_p, segment.inputs, outputs,
                    {"graph": segment, "executable": executable}, source=run[0].source)


def lower(graph: Graph, placement: str = "always") -> Graph:
    """`graph` split into XLA segments (`xla_call` equations) and host equations; all of it
    host equations when it is too large (MAX_EQUATIONS), nothing in it can go to XLA, or,
    with placement "auto", where no run of it pays for a call into XLA (`_xla_pays`).
    `placement` (xform.config.xla_placement): "auto" puts the equations XLA can run where the
    cost model says XLA pays; "always" puts them all on XLA (as for jax arrays passed in,
    which stay on their device).
    Either way, jax arrays passed in are read into numpy where host equations read them, and
    the results come back as the arguments came (`to_caller`); with placement "auto", which
    is for numpy arguments only, a graph left whole to the host is returned as it is."""
    cache = _LOWERED.get(placement)
    lowered = None if cache is None else cache.get(graph)
    if lowered is None:
        with _lock:
            cache = _LOWERED.setdefault(placement, weakref.WeakKeyDictionary())
            lowered = cache.get(graph)
            if lowered is None:
                lowered = cache[graph] = _lower(graph, placement)
    return lowered


_LOWERED = {}       # placement -> graph -> its lowered graph
_lock = threading.RLock()


def _on_host(graph, placement):
    """`graph` as numpy code whole. Placement "auto" lowers for numpy arguments only (jax
    arrays passed in choose "always"): its numpy code then needs no conversions."""
    return graph if placement == "auto" else _at_the_boundaries(graph)


def _lower(graph, placement):
    if _rerolled_count(graph) > MAX_EQUATIONS:
        return _on_host(graph, placement)
    equations = graph.equations
    host = {i for i, eqn in enumerate(equations) if not _lowerable(eqn)}
    consts = dict(graph.consts)
    while True:
        runs = _runs(equations, host)
        unpaid = [i for kind, indices in runs if kind == "xla" and placement == "auto"
                  and not _xla_pays([equations[i] for i in indices]) for i in indices]
        if unpaid:      # left to the host: its runs merge, so the loop ends
            host.update(unpaid)
            continue
        if len(host) == len(equations):
            return _on_host(graph, placement)
        later_reads = _later_reads(graph, runs, host)
        try:
            new_equations = []
            for kind, indices in runs:
                if kind == "host":
                    new_equations.extend(equations[i] for i in indices)
                else:
                    new_equations.append(_segment(graph, [equations[i] for i in indices],
                                                  later_reads, consts))
        except _Unlowerable as failure:
            host.add(next(i for i, eqn in enumerate(equations) if eqn is failure.eqn))
            continue
        break
    return _at_the_boundaries(Graph(graph.inputs, graph.consts, new_equations, graph.outputs))


def _runs(equations, host):
    """Maximal runs of equations of one kind, [("host"|"xla", indices)], in an order that
    keeps every dependency: a host equation that reads nothing of the XLA run before it
    moves ahead of that run, so that runs merge. Host equations keep their own order (so
    effects do)."""
    runs, hoisted, run, made_in_run = [], [], [], set()

    def flush():
        if hoisted:
            runs.append(("host", list(hoisted)))
        if run:
            runs.append(("xla", list(run)))
        hoisted.clear(), run.clear(), made_in_run.clear()
    for i, eqn in enumerate(equations):
        if i not in host:
            run.append(i)
            made_in_run.update(eqn.outputs)
        elif any(type(a) is Var and a in made_in_run for a in eqn.inputs):
            flush()
            runs.append(("host", [i]))
        else:
            hoisted.append(i)
    flush()
    merged = []
    for kind, indices in runs:
        if merged and merged[-1][0] == kind:
            merged[-1][1].extend(indices)
        else:
            merged.append((kind, indices))
    return merged


def _later_reads(graph, runs, host):
    """var -> "host" or "xla": how each variable made in an XLA run is read after it
    ("host" if any host equation reads it; "xla" if only later runs or the outputs)."""
    run_of = {}
    for number, (_, indices) in enumerate(runs):
        for i in indices:
            for var in graph.equations[i].outputs:
                run_of[var] = number
    reads = {}
    for number, (kind, indices) in enumerate(runs):
        for i in indices:
            for atom in graph.equations[i].inputs:
                if type(atom) is Var and run_of.get(atom, number) != number:
                    if kind == "host":
                        reads[atom] = "host"
                    else:
                        reads.setdefault(atom, "xla")
    for atom in graph.outputs:
        if type(atom) is Var and atom in run_of:
            reads.setdefault(atom, "xla")
    return reads


def _at_the_boundaries(lowered):
    """`lowered` with each input a host equation reads converted to numpy first (a jax array
    passed in; numpy values pass through), and its outputs made numpy arrays unless a jax
    array was passed in (`to_caller`)."""
    inputs = set(lowered.inputs)
    host_read = {atom for eqn in lowered.equations if eqn.primitive is not xla_call_p
                 for atom in eqn.inputs if type(atom) is Var and atom in inputs}
    converted = {var: Var(var.aval) for var in lowered.inputs if var in host_read}
    equations = [Equation(to_host_p, [var], [converted[var]]) for var in converted]
    equations += [eqn if eqn.primitive is xla_call_p or not converted else
                  Equation(eqn.primitive, [converted.get(a, a) if type(a) is Var else a
                                           for a in eqn.inputs], eqn.outputs, eqn.params,
                           eqn.source, eqn.origin)
                  for eqn in lowered.equations]
    outputs = list(lowered.outputs)
    returned = [i for i, atom in enumerate(outputs) if type(atom) is Var]
    if returned:
        results = [Var(outputs[i].aval) for i in returned]
        equations.append(Equation(to_caller_p, [*lowered.inputs, *(outputs[i] for i in returned)],
                                  results, {"n_inputs": len(lowered.inputs)}))
        for i, var in zip(returned, results):
            outputs[i] = var
    return Graph(lowered.inputs, lowered.consts, equations, outputs)


def describe_split(graph: Graph, lines: bool = False) -> str:
    """One line per segment of a graph `split_graph` made: each XLA segment with its number
    of equations, each host equation with its primitive (and, with `lines`, the user's line
    that made it), in the order they run.

    Two numpy calls cost less than one call into XLA (the cost model; "always" sends all
    XLA can run to it):

    >>> print(xform.describe_split(xform.split_graph(lambda x: np.sin(x) * 2.0)(1.0)))
    host: sin
    host: multiply
    >>> xform.config.update("xla_placement", "always")
    >>> print(xform.describe_split(xform.split_graph(lambda x: np.sin(x) * 2.0)(1.0)))
    xla: 2 equations
    >>> xform.config.update("xla_placement", "auto")
    """
    described = []
    for eqn in graph.equations:
        if eqn.primitive is xla_call_p:
            described.append(f"xla: {len(eqn.params['graph'].equations)} equations")
        elif eqn.primitive is not to_host_p and eqn.primitive is not to_caller_p:
            where = (f" at {eqn.source.filename}:{eqn.source.lineno}"
                     if lines and eqn.source is not None else "")
            described.append(f"host: {eqn.primitive.name}{where}")
    return "\n".join(described)
