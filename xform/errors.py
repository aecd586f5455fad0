"""Every exception a user can cause. One place; each class says how it is triggered and fixed.

Messages read: the cause, then `file:line (function): source text`, then a hint.
"""
from __future__ import annotations

import re

from xform.source_info import (SourceInfo, is_excluded, scipy_callee, user_frame,
                                user_frame_info)


class XformError(Exception):
    """Base of all xform errors. `.source` is the user's line (a SourceInfo) or None."""

    def __init__(self, message: str, source=None, hint: str | None = None):
        self.cause = message
        self.source = source
        self.hint = hint
        parts = [message]
        if source is not None:
            parts.append(f"  at {source}")
        if hint:
            parts.append(f"  hint: {hint}")
        super().__init__("\n".join(parts))

    def __reduce__(self):
        # Subclasses take other __init__ arguments, so rebuild from the state, not from args.
        return _rebuild, (type(self), self.args, self.__dict__)


def _rebuild(cls, args, state):
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class ConcretizationError(XformError, TypeError):
    """A traced value was used where Python needs a concrete one.

    Triggered by `if x > 0:`, `bool(x)`, `float(x)` or `np.asarray(x)` inside a staged
    function. Fix: use `xform.cond` / `np.where` for data-dependent choices, or mark the
    argument static with `static_argnums`.
    """


class UnsupportedError(XformError, NotImplementedError):
    """A numpy function or option has no xform primitive.

    Triggered by e.g. `np.spacing(x)` on a traced value or `np.sin(x, where=m)`. Fix: write
    it with supported operations, or make it a primitive (`xform.Primitive`, `def_impl`,
    `def_abstract_eval`) that `@xform.implements(np.spacing)` binds (a SciPy function:
    `@xform.overlay(scipy.signal.medfilt)`).
    """


class MissingRuleError(XformError, NotImplementedError):
    """A transform needs a rule the primitive does not have.

    Triggered by `grad` through a primitive registered without jvp/vjp, or by a transform a
    construct of xform does not support yet (e.g. differentiating the reverse-mode derivative
    of a construct that has only first-order reverse mode). Fix: for your own primitive,
    define the rule (`p.def_jvp(...)`) or mark it non-differentiable; for a construct of
    xform's, rewrite that part with constructs that support the transform.
    """

    def __init__(self, primitive, rule_kind: str, source=None, hint: str | None = None):
        self.primitive = primitive
        self.rule_kind = rule_kind
        self.construct = construct_of(primitive)
        if self.construct is None:
            message = f"primitive '{primitive}' has no {rule_kind} rule"
            hint = hint or f"define it with p.def_{rule_kind}(...) or xform.extend.register"
        else:
            message = (f"{self.construct} does not support "
                       f"{TRANSFORM_OF_RULE_KIND.get(rule_kind, rule_kind)} yet")
            hint = hint or ("a limitation of xform, not an error in your code: rewrite this "
                            "part with constructs that support this transform (the guide "
                            "'Composing transforms', docs/composing.md)")
        super().__init__(message, source, hint)


#: What a user did when a transform needed a rule of this kind.
TRANSFORM_OF_RULE_KIND = {
    "jvp": "forward-mode differentiation (jvp, jacfwd, hessian, linearize, or "
           "differentiating a derivative, e.g. grad(grad(f)))",
    "transpose": "transposition (reverse-mode differentiation: grad, vjp, jacrev; forward "
                 "mode through a custom_vjp function transposes its bwd)",
    "vjp": "reverse-mode differentiation (grad, vjp, jacrev)",
    "batch": "vmap",
    "impl": "evaluation",
    "abstract_eval": "staging",
}


def _no_construct(primitive):
    return None


_construct_namer = [_no_construct]


def construct_of(primitive) -> str | None:
    """The user-facing construct an internal primitive implements (its `construct` trait,
    e.g. "xform.while_loop"), which errors name instead of the primitive; None for others."""
    return _construct_namer[0](primitive)


def install_construct_namer(namer) -> None:
    """Set how `construct_of` finds a primitive's construct (xform.ir.registry installs the
    rule table's trait; errors stay a leaf)."""
    _construct_namer[0] = namer


class ShapeError(XformError, ValueError):
    """Shapes or dtypes do not fit together at staging time.

    Triggered by `x + y` with shapes (3,) and (4,), or a branch of `cond` returning another
    shape. Fix: reshape/broadcast explicitly so the shapes agree.
    """


class TreeMismatchError(XformError, ValueError):
    """Two pytrees that must match do not.

    Triggered by a `vjp_fn` cotangent with another structure than the output, or `in_axes`
    that does not fit the arguments. Fix: pass values of the expected structure.
    """


class GraphCheckError(XformError, AssertionError):
    """A graph is malformed (a var used before definition, an aval that its rule denies).

    Triggered by hand-built graphs or a buggy pass/rule; the message lists the equations
    around the bad one. Fix: correct the graph or the rule that produced it.
    """


class RuleError(XformError, RuntimeError):
    """A rule produced a value that does not match its abstract value (debug mode).

    Triggered by a user rule whose jvp returns the wrong shape. Fix: correct that rule.
    """


class TypeCheckError(XformError, TypeError):
    """An argument is not a valid array or pytree leaf (e.g. a string passed to grad)."""


class RegistrationError(XformError, ValueError):
    """A primitive or rule cannot be registered as asked.

    Triggered by registering the same primitive twice (`xform.extend.register(p, ...)`).
    Fix: pass `replace=True` to replace its rules, or `xform.extend.extend(p, ...)` to add some.
    """


class StagingRecursionError(XformError, RecursionError):
    """Staging a function recursed past Python's recursion limit.

    Triggered by a recursive function whose base case is never reached while staging (none,
    or one decided by a traced value in a staging without values, e.g. under make_graph of
    shapes). Fix: give it a base case it reaches (on the arguments' values when the transform
    is called on arrays, on a static argument or a shape always), or write the iteration with
    `xform.while_loop`, `fori_loop` or `scan`.
    """


class OutOfMemoryError(XformError, MemoryError):
    """An array of the requested shape does not fit in memory.

    Triggered by e.g. `np.zeros((10**6, 10**6))` inside a staged function, or by calling a
    compiled function on inputs whose intermediates are too large. Fix: reduce the sizes,
    process the data in chunks (`xform.map`, `threaded_map`), or use a smaller dtype.
    """


class SideEffectError(XformError, RuntimeError):
    """A staged function wrote into a numpy array it captured.

    Staging runs the function once; the write happens then and not on the cached calls
    that follow, so they would silently differ from calling the function eagerly. Fix: pass
    the array as an argument and return the new values, or do the write outside.
    """


def captured_write_error(array, name, source) -> SideEffectError:
    """The SideEffectError of a write into the captured `array` (`name`d when known) at
    `source`."""
    what = f"'{name}' ({array.dtype}{list(array.shape)})" if name else f"of shape {array.shape}"
    return SideEffectError(
        f"the staged function wrote into a numpy array it captured, {what}: the write "
        "happens once, while staging, not on the cached calls", source,
        "pass the array as an argument and return the new values (y = np.where(...), "
        "xform.index_add), or do the write outside the staged function")


class SolverError(XformError, RuntimeError):
    """A SciPy solver inside a transformed function failed where its result is needed.

    Triggered by `scipy.optimize.brentq` (or fsolve, minimize, quad, ...) not converging on
    the values of this call, or by a derivative of a root or minimum whose Jacobian (Hessian)
    is singular there, so the implicit function theorem gives no derivative. Fix: loosen or
    correct the solver's options (bracket, start, tolerances, maxiter), or reformulate so
    the solution is isolated.
    """


def not_callable_error(fun, transform: str) -> TypeCheckError:
    """`transform` was given `fun`, which cannot be called (checked when the transform is
    made, as JAX does, not at its first call)."""
    return TypeCheckError(
        f"{transform} needs a function, got {type(fun).__name__}", user_frame_info(),
        f"pass the function itself: {transform}(f), then call the result: {transform}(f)(x)")


# -- errors raised while staging, located at the user's line -------------------------------------

def unsupported_error(what: str, hint: str | None = None) -> UnsupportedError:
    """`what` (e.g. "numpy.fft.fft") has no staged form; the hint (by default, how to add
    one) says what to do. Reached inside a SciPy function the user called, the message names
    that function too, unless `hint` is given (`what` then names it already)."""
    frame = user_frame()
    callee = scipy_callee(frame) if frame is not None and hint is None else None
    if callee is not None and not what.startswith(callee):
        what = f"{callee} (which uses {what})"
    return UnsupportedError(f"{what} is not supported on traced values", user_frame_info(),
                            hint or own_definition_hint(callee or what))


def own_definition_hint(function: str) -> str:
    """How to stage `function` ("numpy.spacing", "scipy.signal.medfilt") anyway, as code to
    copy: a primitive of the user's own, which a numpy function reaches through
    `xform.implements` (numpy's dispatch), any other (SciPy's Python) through an overlay."""
    if not re.fullmatch(r"[A-Za-z_][\w.]*", function):     # an option, not a function
        return ("write it with supported operations (without that option), or give staging "
                "a definition of your own: xform.overlay(<the function>, <your definition>)")
    is_numpy = function.startswith("numpy.")
    name = "np." + function[len("numpy."):] if is_numpy else function
    decorator = "xform.implements" if is_numpy else "xform.overlay"
    return (f"write it with supported operations, or make it a primitive of your own: "
            f"p = xform.Primitive(\"{name.rsplit('.', 1)[-1]}\"); p.def_impl({name}); "
            f"p.def_abstract_eval(lambda x: x) (the output's shape and dtype from the "
            f"input's); @{decorator}({name}) on def _(x): return p.bind(x) "
            f"(a derivative: p.def_jvp)")


def concretization_error(what: str) -> ConcretizationError:
    """`what` (e.g. "float()") needs a concrete value, but got a traced one."""
    return ConcretizationError(
        f"{what} needs a concrete value, but this value is traced", user_frame_info(),
        "use xform.cond / xform.while_loop or np.where for data-dependent choices, "
        "or mark the argument static with static_argnums")


def shape_error(message: str) -> ShapeError:
    """A ShapeError naming the user's line, for argument checks outside abstract eval."""
    return ShapeError(message, user_frame_info())


class RestagingWarning(UserWarning):
    """A transformed function was staged again for many different values of its static
    arguments (Python ints at non-differentiated positions, `static_argnums`).

    Triggered by e.g. `grad(loss)(w, step)` in a loop with a new Python int `step` each time.
    Fix: pass the varying number as an array (`np.asarray(step)`), which is traced.
    """


class CapturedArrayWarning(UserWarning):
    """A staged function reads a large writeable numpy array it captures (a global, a closure
    cell): each cached call hashes it to notice a change made in place, which then costs
    more than the call.

    Fix: pass the array as an argument, or make it read-only (`a.flags.writeable = False`)
    if it never changes.
    """


class UnstagedEffectWarning(UserWarning):
    """A function xform could not follow entirely (a function held as a value, one deeper
    than the walk, getattr/eval) computed different constants on two calls taking the same
    path: an effect no equation stands for, such as a draw from a generator xform did
    not find. It is staged anew on every call, so every call computes what eager numpy
    computes, at about autograd's cost.

    Fix: pass the generator as an argument (under jit, named in `static_argnums`), or draw
    outside the function.
    """


class PathLimitWarning(UserWarning):
    """A function's decisions on data (`if x > 0:`, `while err > tol:`, `range(n)` of a
    traced n) took more paths than `xform.config.max_paths` for one signature: past it, each
    call is staged and interpreted anew (correct, at about autograd's cost).

    Triggered by e.g. a `while` loop whose trip count changes with the data. Fix: stage the
    decision (`np.where`, `xform.cond`, `xform.while_loop`), or raise the bound
    (`xform.config.update("max_paths", 32)`).
    """


class PathLimitError(XformError, RuntimeError):
    """The strict form of PathLimitWarning (`xform.config.update("path_limit", "raise")`):
    a call needed a path past `xform.config.max_paths`.

    Fix: stage the decision named (`np.where`, `xform.cond`, `xform.while_loop`), or raise
    the bound.
    """


def _deepest_user_source(err: BaseException):
    """The deepest line of the user's code in `err`'s traceback (where staging was when it
    failed), or the user's line of the current call when the traceback has none."""
    deepest = None
    tb = err.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not (is_excluded(filename) or filename.startswith("<")):
            deepest = tb
        tb = tb.tb_next
    if deepest is None:
        return user_frame_info()
    return SourceInfo(deepest.tb_frame.f_code.co_filename, deepest.tb_lineno,
                      deepest.tb_frame.f_code.co_name)


def recursion_error(err: RecursionError) -> StagingRecursionError:
    """The StagingRecursionError for `err`, located at the recursive call (the deepest user
    line in its traceback), not at the line that started staging."""
    return StagingRecursionError(
        "staging recursed past Python's recursion limit (a recursive function with no base "
        "case that is reached while staging)", _deepest_user_source(err),
        "give the recursion a base case it reaches (`if` on the arguments' values works when "
        "the transform is called on arrays; on a static argument or a shape always), or "
        "write the iteration with xform.while_loop, xform.fori_loop or xform.scan")


def out_of_memory_error(err: MemoryError) -> OutOfMemoryError:
    """The OutOfMemoryError for numpy's `err`, at the user's line that made the array while
    staging, else at the call."""
    return OutOfMemoryError(
        f"out of memory: {err}", _deepest_user_source(err),
        "reduce the sizes, process the data in chunks (xform.map, xform.threaded_map), or "
        "use a smaller dtype (float32)")
