"""Random whole numpy programs for differential testing: `programs()`, a hypothesis strategy
of `Program`s (source text from a small shape-typed grammar, exec'd into a real function whose
lines tracebacks and xform's errors can name), and `Program`'s derived functions."""
from __future__ import annotations

import hashlib
import linecache
import math

import attrs
import numpy
from hypothesis import strategies as st

# Element-wise templates smooth and finite on any moderate input ({0}: the operand): logs and
# roots of values bounded away from 0, divisions by values bounded away from 0.
UNARY = (
    "np.sin({0})", "np.cos({0})", "np.tanh({0})", "np.exp(np.tanh({0}))",
    "np.log(1.0 + {0} * {0})", "np.sqrt(1.5 + {0} * {0})", "1.0 / (2.0 + np.cos({0}))",
    "np.arctan({0})", "np.expm1(np.sin({0}))", "np.square({0})", "-{0}", "0.5 * {0}",
    "np.exp(-{0} * {0})", "np.cbrt(2.0 + np.sin({0}))", "np.power(1.5 + np.cos({0}), 1.5)",
    "np.log2(3.0 + np.sin({0}))", "{0} ** 2", "np.sinh(np.tanh({0}))", "np.abs({0})",
)
BINARY = (
    "{0} + {1}", "{0} - {1}", "{0} * {1}", "{0} / (1.0 + {1} * {1})", "np.maximum({0}, {1})",
    "np.minimum({0}, {1})", "np.arctan2({0}, 2.0 + np.cos({1}))", "np.hypot({0}, 1.0 + {1})",
    "np.add({0}, {1})", "np.multiply({0}, np.tanh({1}))",
)
# (value, derivative) pairs for custom rules, in the argument `t`.
CUSTOM_RULES = (
    ("np.sin(t) * t", "np.cos(t) * t + np.sin(t)"),
    ("np.tanh(t) ** 2", "2.0 * np.tanh(t) * (1.0 - np.tanh(t) ** 2)"),
    ("np.log(1.0 + np.exp(t))", "1.0 / (1.0 + np.exp(-t))"),
)
MAX_SIZE = 48
# float32 values make finite differences too coarse for the derivative checks' tolerances.
NOT_DIFFERENTIABLE_TO_FLOAT64 = frozenset({"float32"})
# Features autograd cannot run (in-place writes, xform's constructs) or finite differences
# cannot check (a generator outside the program draws anew on every call).
NOT_AUTOGRAD = frozenset({"inplace", "cond", "while_loop", "fori_loop", "scan", "function",
                          "custom_jvp", "custom_vjp", "random_state", "grad", "jit",
                          "switch", "vmap", "fill", "numpy_options", "scipy"})


@attrs.frozen
class Program:
    """A generated program `program(x)` of one float64 array of `shape` returning one of
    `out_shape`, its `source` text and the `features` (constructs) it uses; `fun` is it
    exec'd against numpy.

    >>> from hypothesis import given
    >>> @given(programs())
    ... def test_jit(program):
    ...     x = program.input()
    ...     np.testing.assert_array_equal(xform.jit(program.fun)(x), program.fun(x))
    >>> test_jit()
    """

    source: str
    shape: tuple
    out_shape: tuple
    features: frozenset
    seed: int
    fun: object = attrs.field(eq=False, repr=False)

    @property
    def autograd_ok(self) -> bool:
        """Whether autograd can run the program's constructs (`build(autograd.numpy)`); it
        lacks some rules (cbrt, take, broadcasting in where), which raise inside autograd."""
        return not self.features & NOT_AUTOGRAD

    @property
    def filename(self) -> str:
        return _filename(self.source)

    def build(self, np_module=numpy, source=None):
        """A fresh copy of the program (its own helpers and generators) against `np_module`."""
        return _exec(self.source if source is None else source, np_module)

    def input(self, seed_offset=0, batch=None):
        """A read-only input: uniform in [-1, 1] from the program's seed (values from a seed,
        not from hypothesis, so kinks and ties are hit with probability 0)."""
        rng = numpy.random.default_rng(self.seed + seed_offset)
        shape = self.shape if batch is None else (batch, *self.shape)
        x = rng.uniform(-1.0, 1.0, shape)
        x.flags.writeable = False
        return x

    def _statement_lines(self) -> list:
        lines = self.source.splitlines()
        start = lines.index("def program(x):") + 1
        # (a clause continuing a compound statement, `else:` or `elif`, starts no statement)
        return [i for i in range(start, len(lines)) if lines[i][4] != " "
                and not lines[i][4:].startswith(("else:", "elif ", "except", "finally:"))]

    @property
    def statements(self) -> int:
        """How many top-level statements the program's body has, its return included."""
        return len(self._statement_lines())

    def failing(self, position=-1, kind="if"):
        """The program with a mistake inserted before its `position`-th top-level statement
        (-1: before the return), and where it is ("file:line"). Kinds: "if", a Python `if`
        on numpy's own conversion of the value computed last (fine eagerly, a
        ConcretizationError under staging);
        "write", writing into the argument `x` (an xform TypeCheckError; eagerly numpy's
        error, `x` being read-only)."""
        lines = self.source.splitlines()
        start = lines.index("def program(x):") + 1
        at = self._statement_lines()[position]
        value = "x"
        for line in lines[start:at]:
            target, _, made = line.partition(" = ")
            # (an array made by a constructor holds no traced value until a write)
            if line[4] != " " and made and target.strip().isidentifier() \
                    and not made.startswith("np.zeros("):
                value = target.strip()
        if kind == "if":
            # numpy's own conversion of a value that depends on the input: the staging
            # cannot freeze it into an array (Python's `if` itself is answered from values)
            bad = [f"    if {value}.__array__().sum() > 1e9:", f"        {value} = {value} * 2.0"]
        else:
            bad = ["    x[...] = 0.0"]
        source = "\n".join(lines[:at] + bad + lines[at:]) + "\n"
        return _exec(source, numpy), f"{_filename(source)}:{at + 1}"

    def __str__(self) -> str:
        return (f"# input shape {self.shape}, seed {self.seed}, "
                f"features {sorted(self.features)}\n{self.source}")


def _filename(source: str) -> str:
    # Not "<xform...": xform's own generated code is never the user's line.
    return f"<random-program-{hashlib.sha1(source.encode()).hexdigest()[:10]}>"


def _exec(source: str, np_module):
    filename = _filename(source)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    import xform  # the program's own namespace names it, as user code does
    namespace = {"np": np_module, "npr": numpy.random, "xform": xform}
    if "scipy." in source:   # only then: `import xform` imports no SciPy
        import scipy.linalg
        import scipy.special
        namespace["scipy"] = scipy
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102  (generated test code)
    return namespace["program"]


def _size(shape) -> int:
    return math.prod(shape)


class _Writer:
    """Accumulates a program: helper definitions, body lines, typed variables."""

    def __init__(self, draw, shape):
        self.draw = draw
        self.helpers: list[str] = []
        self.body: list[str] = []
        self.env: list[tuple[str, tuple]] = [("x", shape)]
        self.features: set[str] = set()
        self._count = 0

    def fresh(self, prefix="v") -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def pick(self, accept=lambda shape: True):
        """A variable whose shape `accept`s, preferring recent ones; None if there is none."""
        choices = [(n, s) for n, s in self.env if accept(s)]
        if not choices:
            return None
        # Recent variables first, so that programs chain rather than fan out from x.
        index = self.draw(st.integers(0, len(choices) - 1))
        return choices[len(choices) - 1 - index]

    def unary(self, operand: str) -> str:
        return self.draw(st.sampled_from(UNARY)).format(operand)

    def assign(self, expr: str, shape, *features) -> None:
        name = self.fresh()
        self.body.append(f"{name} = {expr}")
        self.env.append((name, tuple(shape)))
        self.features.update(features)


def _broadcast(a, b):
    try:
        return numpy.broadcast_shapes(a, b)
    except ValueError:
        return None


# Statements: each takes the writer and returns False when it does not apply.

def _elementwise(w):
    name, shape = w.pick()
    w.assign(w.unary(name), shape, "elementwise")
    return True


def _binary(w):
    a, sa = w.pick()
    template = w.draw(st.sampled_from(BINARY))
    kind = w.draw(st.sampled_from(("var", "var", "literal", "linspace")))
    if kind == "literal":
        b, sb = repr(w.draw(st.sampled_from((0.5, 2.0, -1.25, 3.0)))), ()
    elif kind == "linspace" and sa:
        b, sb = f"np.linspace(-1.0, 1.0, {sa[-1]})", (sa[-1],)
    else:
        picked = w.pick(lambda s: _broadcast(sa, s) is not None)
        b, sb = picked
    shape = _broadcast(sa, sb)
    if _size(shape) > MAX_SIZE:
        return False
    operands = (a, b) if w.draw(st.booleans()) else (b, a)
    w.assign(template.format(*operands), shape, "broadcasting" if sa != sb else "elementwise")
    return True


def _reduction(w):
    name, shape = w.pick()
    if not shape:
        w.assign(f"np.sum({name})", (), "reduction")
        return True
    axis = w.draw(st.integers(0, len(shape) - 1))
    kept = shape[:axis] + shape[axis + 1:]
    keep = shape[:axis] + (1,) + shape[axis + 1:]
    options = [
        (f"np.sum({name}, axis={axis})", kept), (f"np.mean({name}, axis={axis})", kept),
        (f"np.sum({name}, axis={axis}, keepdims=True)", keep),
        (f"np.max({name}, axis={axis})", kept), (f"np.min({name}, axis={axis})", kept),
        (f"{name}.sum()", ()), (f"np.mean({name})", ()),
        (f"np.prod(1.0 + 0.25 * np.tanh({name}), axis={axis})", kept),
        (f"np.cumsum({name}, axis={axis})", shape),
        (f"np.log(np.sum(np.exp({name}), axis={axis}))", kept),
        (f"np.linalg.norm({name})", ()),
    ]
    if shape[axis] >= 2:  # a spread over one element is 0, where sqrt has no derivative
        options.append((f"np.std({name}, axis={axis})", kept))
        options.append((f"np.var({name}, axis={axis}, keepdims=True)", keep))
    expr, out = w.draw(st.sampled_from(options))
    w.assign(expr, out, "reduction")
    return True


def _shape_op(w):
    name, shape = w.pick()
    nd = len(shape)
    options = [(f"{name}.reshape(-1)", (_size(shape),)),
               (f"np.expand_dims({name}, 0)", (1, *shape)), (f"{name}[..., None]", (*shape, 1))]
    if nd >= 1:
        axis = w.draw(st.integers(0, nd - 1))
        options += [(f"np.flip({name}, axis={axis})", shape),
                    (f"np.roll({name}, 1, axis={axis})", shape),
                    (f"np.repeat({name}, 2, axis={axis})",
                     shape[:axis] + (2 * shape[axis],) + shape[axis + 1:]),
                    (f"np.concatenate([{name}, np.sin({name})], axis={axis})",
                     shape[:axis] + (2 * shape[axis],) + shape[axis + 1:]),
                    (f"np.stack([{name}, np.cos({name})], axis={axis})",
                     shape[:axis] + (2,) + shape[axis:]),
                    (f"np.broadcast_to({name}, (2, *{name}.shape))", (2, *shape)),
                    (f"{name}.reshape({tuple(reversed(shape))})", tuple(reversed(shape)))]
        if 1 in shape:
            options.append((f"np.squeeze({name})", tuple(s for s in shape if s != 1)))
    if nd >= 2:
        options += [(f"{name}.T", tuple(reversed(shape))),
                    (f"np.swapaxes({name}, 0, 1)", (shape[1], shape[0], *shape[2:])),
                    (f"np.moveaxis({name}, 0, -1)", (*shape[1:], shape[0]))]
    expr, out = w.draw(st.sampled_from(options))
    if _size(out) > MAX_SIZE or len(out) > 3:
        return False
    w.assign(expr, out, "shape")
    return True


def _indexing(w):
    picked = w.pick(lambda s: len(s) >= 1)
    if picked is None:
        return False
    name, shape = picked
    n = shape[0]
    options = [(f"{name}[0]", shape[1:]), (f"{name}[::-1]", shape),
               (f"{name}[-1, ...]", shape[1:]),
               (f"{name}[np.array([0, {n - 1}, 0])]", (3, *shape[1:])),
               (f"np.take({name}, [{n - 1}, 0], axis=0)", (2, *shape[1:]))]
    if n >= 2:
        options += [(f"{name}[1:]", (n - 1, *shape[1:])),
                    (f"{name}[::2]", ((n + 1) // 2, *shape[1:]))]
    if len(shape) >= 2:
        options += [(f"{name}[:, 0]", (n, *shape[2:])),
                    (f"{name}[..., -1]", shape[:-1]),
                    (f"{name}[:, ::-1]", shape)]
    expr, out = w.draw(st.sampled_from(options))
    w.assign(expr, out, "indexing")
    return True


def _inplace(w):
    picked = w.pick(lambda s: len(s) >= 1 and s[0] >= 2)
    if picked is None:
        return False
    name, shape = picked
    target = w.fresh("y")
    rhs = w.pick(lambda s: _broadcast((shape[0] - 1, *shape[1:]), s) ==
                 (shape[0] - 1, *shape[1:]))
    operand = rhs[0] if rhs is not None and rhs[0] != name else "0.5"
    updates = [f"{target}[1:] += np.sin({operand})" if rhs else f"{target}[1:] += 0.5",
               f"{target}[0] = np.cos({name}[-1])", f"{target}[::2] *= 1.5",
               f"{target}[-1] -= {target}[0]"]
    chosen = w.draw(st.lists(st.sampled_from(updates), min_size=1, max_size=3))
    w.body.append(f"{target} = {name}.copy()")
    w.body.extend(chosen)
    w.env.append((target, shape))
    w.features.add("inplace")
    return True


def _contraction(w):
    picked = w.pick(lambda s: len(s) in (1, 2))
    if picked is None:
        return False
    name, shape = picked
    if len(shape) == 1:
        other = w.pick(lambda s: s == shape)[0]
        options = [(f"np.dot({name}, {other})", ()),
                   (f"np.outer({name}, {other})", (shape[0], shape[0])),
                   (f"np.einsum('i,i->', {name}, {other})", ())]
    else:
        m, n = shape
        options = [(f"{name} @ {name}.T", (m, m)), (f"{name}.T @ {name}", (n, n)),
                   (f"np.einsum('ij,ij->i', {name}, {name})", (m,)),
                   (f"np.einsum('ij->j', {name})", (n,))]
        vector = w.pick(lambda s: s == (n,))
        if vector is not None:
            options += [(f"{name} @ {vector[0]}", (m,)),
                        (f"np.einsum('ij,j->i', {name}, {vector[0]})", (m,))]
        matrix = w.pick(lambda s: len(s) == 2 and s[1] == n)
        if matrix is not None:
            options += [(f"np.einsum('ij,kj->ik', {name}, {matrix[0]})", (m, matrix[1][0])),
                        (f"np.matmul({name}, {matrix[0]}.T)", (m, matrix[1][0]))]
    expr, out = w.draw(st.sampled_from(options))
    if _size(out) > MAX_SIZE:
        return False
    w.assign(expr, out, "contraction")
    return True


def _linalg(w):
    picked = w.pick(lambda s: len(s) == 2 and s[0] <= 4)
    if picked is None:
        return False
    name, (m, n) = picked
    matrix = w.fresh("A")
    # Symmetric positive definite with eigenvalues >= m: well conditioned.
    w.body.append(f"{matrix} = {name} @ {name}.T + {m}.0 * np.eye({m})")
    rhs = w.pick(lambda s: len(s) in (1, 2) and s[0] == m and _size(s) <= MAX_SIZE)
    b, sb = rhs if rhs is not None else (name, (m, n))
    options = [(f"np.linalg.solve({matrix}, {b})", sb), (f"np.linalg.inv({matrix})", (m, m)),
               (f"np.linalg.det({matrix}) / {m ** m}.0", ()),
               (f"np.linalg.slogdet({matrix})[1]", ()),
               (f"np.linalg.cholesky({matrix})", (m, m)),
               (f"np.trace(np.linalg.inv({matrix}))", ())]
    expr, out = w.draw(st.sampled_from(options))
    w.assign(expr, out, "linalg")
    return True


def _misc(w):
    """numpy functions with less regular derivatives: piecewise, permuting, padding."""
    name, shape = w.pick()
    options = [(f"np.clip({name}, -0.5, 0.5)", shape)]
    if shape:
        axis = w.draw(st.integers(0, len(shape) - 1))
        grown = shape[:axis] + (shape[axis] + 2,) + shape[axis + 1:]
        pads = tuple((1, 1) if k == axis else (0, 0) for k in range(len(shape)))
        options += [(f"np.sort({name}, axis={axis})", shape),
                    (f"np.pad({name}, {pads})", grown),
                    (f"np.take_along_axis({name}, np.argsort({name}, axis={axis}), "
                     f"axis={axis})", shape)]
        if shape[axis] >= 2:
            options.append((f"np.diff({name}, axis={axis})",
                            shape[:axis] + (shape[axis] - 1,) + shape[axis + 1:]))
    if len(shape) == 2:
        options += [(f"np.triu({name})", shape), (f"np.tril({name}, -1)", shape)]
    expr, out = w.draw(st.sampled_from(options))
    if _size(out) > MAX_SIZE:
        return False
    w.assign(expr, out, "misc")
    return True


def _where_mask(name, shape, axis):
    """A traced mask of `name` that keeps the first element of every slice along `axis` (so
    a mean or variance over it is never of nothing)."""
    first = (shape[axis],) + (1,) * (len(shape) - axis - 1)
    return f"(({name} > 0.1) | (np.arange({shape[axis]}).reshape({first}) == 0))"


def _numpy_options(w):
    """numpy's functions and options whose compiled values are numpy's by construction:
    correlate/convolve, pad's copying and ramp modes, reductions with where= and initial=,
    Fortran-order reshapes, ufunc.at (a float into any array), hfft, writes through a traced
    mask, putmask and place."""
    name, shape = w.pick()
    size = _size(shape)
    flat = f"{name}.ravel()"
    k = min(3, size)
    options = [
        (f"np.correlate({flat}, {flat}[:{k}], 'full')", (size + k - 1,)),
        (f"np.correlate({flat}, np.cos({flat})[:{k}], 'same')", (size,)),
        (f"np.convolve(np.sin({flat})[:{k}], {flat})", (size + k - 1,)),
        (f"np.convolve({flat}, {flat}[:{k}], 'valid')", (size - k + 1,)),
        (f"np.sum({name}, where={name} > 0.1)", ()),
        (f"np.max({name}, initial=0.25)", ()),
        (f"{name}.ravel(order='F')", (size,)),
        (f"{name}.reshape({tuple(reversed(shape))}, order='F')", tuple(reversed(shape))),
    ]
    if size >= 2:
        options.append((f"np.fft.hfft({flat})", (2 * (size - 1),)))
    if shape:
        axis = w.draw(st.integers(0, len(shape) - 1))
        kept = shape[:axis] + shape[axis + 1:]
        keep = shape[:axis] + (1,) + shape[axis + 1:]
        grown = shape[:axis] + (shape[axis] + 3,) + shape[axis + 1:]
        pads = tuple((1, 2) if d == axis else (0, 0) for d in range(len(shape)))
        mask = _where_mask(name, shape, axis)
        mode = w.draw(st.sampled_from(("edge", "wrap", "reflect", "symmetric", "linear_ramp")))
        options += [
            (f"np.pad({name}, {pads}, mode='{mode}')", grown),
            (f"np.sum({name}, axis={axis}, where={mask}, initial=-0.5)", kept),
            (f"np.mean({name}, axis={axis}, where={mask}, keepdims=True)", keep),
            (f"np.var({name}, axis={axis}, where={mask})", kept),
            (f"np.prod(1.0 + 0.25 * np.tanh({name}), axis={axis}, where={name} < 0.3)", kept),
            (f"np.min({name}, axis={axis}, initial=0.5, where={name} > -0.3)", kept),
            (f"{name}.flatten('F')", (size,)),
        ]
    expr, out = w.draw(st.sampled_from(options))
    if _size(out) > MAX_SIZE or not _size(out) or len(out) > 3:
        return False
    w.assign(expr, out, "numpy_options")
    return True


def _options_inplace(w):
    """In-place writes numpy stages only with care: ufunc.at (an int array takes float values,
    truncated per result), writes through traced masks, putmask and place."""
    picked = w.pick(lambda s: len(s) >= 1 and s[0] >= 2)
    if picked is None:
        return False
    name, shape = picked
    n, target = shape[0], w.fresh("y")
    updates = [f"np.multiply.at({target}, [0, {n - 1}, 0], 1.0 + 0.5 * np.tanh({name}[0]))",
               f"np.add.at({target}, [1, 1, 0], np.sin({name}[:1]))",
               f"np.subtract.at({target}, [{n - 1}, {n - 1}], 0.75)",
               f"{target}[{name} > 0.2] = 0.5",
               f"{target}[..., {name}[0] < 0.0] = np.cos({name}.reshape({n}, -1)[:, :1])"
               if len(shape) >= 2 else f"{target}[{name} < 0.0] = {name}[0]"]
    integer = w.draw(st.booleans())
    if not integer:     # numpy casts their values only safely
        updates += [f"np.putmask({target}, {name} > 0.4, 2.0 * {name})",
                    f"np.place({target}, {name} < -0.4, np.sin({name}).ravel()[:2])"]
    chosen = w.draw(st.lists(st.sampled_from(updates), min_size=1, max_size=3))
    # an integer copy: float values added into it truncate per result, as numpy's ufunc.at
    start = f"np.floor(8.0 * {name}).astype(np.int64)" if integer else f"{name}.copy()"
    w.body.append(f"{target} = {start}")
    w.body.extend(chosen)
    if integer:
        w.body.append(f"{target} = {target} * 0.125 + {name}")
    w.env.append((target, shape))
    w.features.update(("inplace", "numpy_options"))
    return True


def _scipy(w):
    """SciPy functions xform runs as SciPy's own routines: softmax, log_softmax, logsumexp,
    and on a well-conditioned matrix inv and cho_solve."""
    name, shape = w.pick()
    axis = w.draw(st.sampled_from([None, *range(len(shape))]))
    options = [(f"scipy.special.softmax({name}, axis={axis})", shape),
               (f"scipy.special.log_softmax({name}, axis={axis})", shape),
               (f"scipy.special.logsumexp({name}, axis={axis})",
                () if axis is None else shape[:axis] + shape[axis + 1:]),
               (f"scipy.special.logsumexp({name}, axis={axis}, b=1.0 + 0.5 * np.tanh({name}))",
                () if axis is None else shape[:axis] + shape[axis + 1:])]
    if len(shape) == 2 and shape[0] <= 4:
        m = shape[0]
        matrix = f"({name} @ {name}.T + {m}.0 * np.eye({m}))"
        lower = w.draw(st.booleans())
        options += [(f"scipy.linalg.inv({matrix})", (m, m)),
                    (f"scipy.linalg.cho_solve(scipy.linalg.cho_factor({matrix}, "
                     f"lower={lower}), {name})", shape)]
    expr, out = w.draw(st.sampled_from(options))
    w.assign(expr, out, "scipy")
    return True


def _nested(w):
    """Transforms inside the program: derivatives of derivatives, maps inside maps."""
    name, shape = w.pick()
    options = [(f"xform.grad(lambda t: np.sum({w.unary('t')} * t))({name})", shape, "grad"),
               (f"xform.jit(lambda t: {w.unary('t')})({name})", shape, "jit"),
               (f"xform.switch((np.sum({name}) > 0.0).astype(np.int64), "
                f"[lambda t: {w.unary('t')}, lambda t: {w.unary('t')}], {name})", shape,
                "switch")]
    if shape:
        options.append((f"xform.vmap(lambda r: np.sum({w.unary('r')}) * r)({name})", shape,
                        "vmap"))
    expr, out, feature = w.draw(st.sampled_from(options))
    w.assign(expr, out, feature)
    return True


def _dtype(w):
    """Mixed precision and integers: numpy's promotion rules, which compiled code must keep."""
    name, shape = w.pick()
    options = [(f"{name}.astype(np.float32)", "float32"),
               (f"np.sin({name}.astype(np.float32)) + {name}", "float32"),
               (f"np.floor({name} * 4.0).astype(np.int64) * 0.25 + {name}", "integer"),
               (f"({name} > 0.0) * {name} + np.int32(2)", "integer")]
    expr, feature = w.draw(st.sampled_from(options))
    w.assign(expr, shape, feature)
    return True


def _where(w):
    a, sa = w.pick()
    b, sb = w.pick(lambda s: _broadcast(sa, s) is not None)
    c, sc = w.pick(lambda s: _broadcast(_broadcast(sa, sb), s) is not None)
    shape = _broadcast(_broadcast(sa, sb), sc)
    if _size(shape) > MAX_SIZE:
        return False
    w.assign(f"np.where({c} > 0.1, {a}, {w.unary(b)})", shape, "where")
    return True


def _cond(w):
    pred, pred_shape = w.pick()
    test = f"np.sum({pred})" if pred_shape else pred
    operand, shape = w.pick()
    w.assign(f"xform.cond({test} > 0.0, lambda t: {w.unary('t')}, "
             f"lambda t: {w.unary('t')}, {operand})", shape, "cond")
    return True


def _static_loop(w):
    carry, shape = w.pick()
    captured = w.pick(lambda s: _broadcast(shape, s) == shape)[0]
    trips = w.draw(st.integers(1, 3))
    kind = w.draw(st.sampled_from(("python", "while_loop", "fori_loop", "scan")))
    update, drive = w.draw(st.sampled_from(UNARY)), w.unary(captured)

    def step(c, extra=""):
        new = f"0.5 * {update.format(c)} + 0.25 * {drive}{extra}"
        # A staged loop's carry keeps its type (float64 terms would widen a float32 one).
        return f"({new}).astype({c}.dtype)" if "float32" in w.features else new
    if kind == "python":
        name = w.fresh()
        w.body += [f"{name} = {carry}", f"for _ in range({trips}):", f"    {name} = {step(name)}"]
        w.env.append((name, shape))
        w.features.add("python_loop")
    elif kind == "while_loop":
        w.assign(f"xform.while_loop(lambda s: s[0] < {trips}, "
                 f"lambda s: (s[0] + 1, {step('s[1]')}), (0, {carry}))[1]", shape, "while_loop")
    elif kind == "fori_loop":
        w.assign(f"xform.fori_loop(0, {trips}, lambda i, c: {step('c', ' + 0.1 * i')}, {carry})",
                 shape, "fori_loop")
    else:
        rows = w.pick(lambda s: len(s) >= 1 and _broadcast(shape, s[1:]) == shape)
        if rows is None:
            return False
        xs, xs_shape = rows
        which = w.draw(st.sampled_from(("[0]", "[1]")))
        out = shape if which == "[0]" else (xs_shape[0], *shape)
        if _size(out) > MAX_SIZE:
            return False
        w.assign(f"xform.scan(lambda c, r: ({step('c', ' + 0.5 * np.sin(r)')}, c * r), "
                 f"{carry}, {xs}){which}", out, "scan")
    return True


def _call(w):
    name, shape = w.pick()
    helper = w.fresh("h")
    decorated = w.draw(st.booleans())
    w.helpers += (["@xform.function"] if decorated else []) + [
        f"def {helper}(t):", f"    u = {w.unary('t')}", f"    return {w.unary('u')} * t + u", ""]
    times = w.draw(st.integers(1, 2))
    expr = f"{helper}({name})" if times == 1 else f"{helper}({helper}({name}))"
    w.assign(expr, shape, "function" if decorated else "python_call")
    return True


def _custom(w):
    name, shape = w.pick()
    helper = w.fresh("c")
    value, derivative = w.draw(st.sampled_from(CUSTOM_RULES))
    if w.draw(st.booleans()):
        w.helpers += [
            "@xform.custom_jvp", f"def {helper}(t):", f"    return {value}", "",
            f"@{helper}.defjvp", f"def {helper}_jvp(primals, tangents):",
            "    (t,), (dt,) = primals, tangents",
            f"    return {helper}(t), ({derivative}) * dt", ""]
        feature = "custom_jvp"
    else:
        w.helpers += [
            "@xform.custom_vjp", f"def {helper}(t):", f"    return {value}", "",
            f"def {helper}_fwd(t):", f"    return {helper}(t), t", "",
            f"def {helper}_bwd(t, ct):", f"    return (ct * ({derivative}),)", "",
            f"{helper}.defvjp({helper}_fwd, {helper}_bwd)", ""]
        feature = "custom_vjp"
    w.assign(f"{helper}({name})", shape, feature)
    return True


def _draw(w):
    name, shape = w.pick()
    seed = w.draw(st.integers(0, 99))
    method = w.draw(st.sampled_from(("standard_normal({})", "uniform(-1.0, 1.0, {})",
                                     "normal(0.0, 0.5, {})")))
    w.assign(f"{name} + 0.1 * npr.default_rng({seed}).{method.format(shape)}", shape, "random")
    return True


def _draw_from_state(w):
    """A draw from a generator made once, outside the program: each call draws anew."""
    name, shape = w.pick()
    generator = w.fresh("RNG")
    w.helpers += [f"{generator} = npr.default_rng({w.draw(st.integers(0, 99))})", ""]
    w.assign(f"{name} + 0.1 * {generator}.standard_normal({shape})", shape, "random_state")
    return True


# Python control flow on the data (staged with values, one path per sequence of decisions).

def _python_if(w):
    name, shape = w.pick()
    test = f"np.sum({name})" if shape else name
    target = w.fresh()
    w.body += [f"if {test} > {w.draw(st.sampled_from(('0.0', '0.3', '-0.2')))}:",
               f"    {target} = {w.unary(name)}", "else:", f"    {target} = {w.unary(name)}"]
    w.env.append((target, shape))
    w.features.add("python_if")
    return True


def _python_while(w):
    name, shape = w.pick()
    target, trips = w.fresh(), w.fresh("k")
    size = f"np.max(np.abs({target}))" if shape else f"abs({target})"
    # A contraction: the trip count depends on the data, and the loop ends within 6 trips.
    w.body += [f"{target}, {trips} = {name}, 0", f"while {size} > 0.2 and {trips} < 6:",
               f"    {target} = 0.6 * np.sin({target})", f"    {trips} += 1"]
    w.env.append((target, shape))
    w.features.add("python_while")
    return True


def _python_range(w):
    picked, counted = w.pick(lambda s: bool(s)), w.pick()
    if picked is None:
        return False
    (name, shape), target = picked, w.fresh()
    w.body += [f"{target} = {name}",
               f"for _ in range(int(np.sum({counted[0]} > 0.0)) % 3):",
               f"    {target} = 0.5 * {w.unary(target)} + 0.5 * {target}"]
    w.env.append((target, shape))
    w.features.add("python_range")
    return True


def _builtins(w):
    name, shape = w.pick()
    scalar = f"np.sum({name})" if shape else name
    expr = w.draw(st.sampled_from((
        f"max(0.1, {scalar}) * {name}", f"min({scalar}, 0.2) + {name}",
        f"abs({scalar}) * {name}", f"(1.0 if {scalar} > 0.0 else -2.0) * {name}")))
    w.assign(expr, shape, "builtins")
    return True


def _fill(w):
    picked = w.pick(lambda s: len(s) == 1)
    if picked is None:
        return False
    (name, shape), (steps, target) = picked, (w.draw(st.integers(2, 4)), w.fresh("u"))
    w.body += [f"{target} = np.zeros(({steps}, {shape[0]}))", f"{target}[0] = {name}",
               f"for t in range({steps - 1}):",
               f"    {target}[t + 1] = {target}[t] + 0.1 * {w.unary(f'{target}[t]')}"]
    w.assign(f"{target}[-1]", shape, "fill")
    return True


STATEMENTS = {
    "elementwise": _elementwise, "binary": _binary, "reduction": _reduction,
    "shape": _shape_op, "indexing": _indexing, "inplace": _inplace,
    "contraction": _contraction, "linalg": _linalg, "where": _where, "cond": _cond,
    "loop": _static_loop, "call": _call, "custom": _custom, "random": _draw,
    "random_state": _draw_from_state, "dtype": _dtype, "misc": _misc, "nested": _nested,
    "numpy_options": _numpy_options, "options_inplace": _options_inplace, "scipy": _scipy,
    "python_if": _python_if, "python_while": _python_while, "python_range": _python_range,
    "builtins": _builtins, "fill": _fill,
}
# The statements that decide on data in Python (each call may take another path).
PYTHON_CONTROL_FLOW = ("python_if", "python_while", "python_range", "builtins", "fill")
# Not "random_state": a program drawing anew on every call has no derivative to check.
DEFAULT_STATEMENTS = tuple(name for name in STATEMENTS if name != "random_state")


def programs(max_statements=6, statements=DEFAULT_STATEMENTS, input_shapes=None):
    """Random, well-typed programs `program(x)` of one float64 array (a `Program`), built from
    `statements` (names of STATEMENTS; default all but "random_state", whose generator outside
    the program draws anew on every call), at most `max_statements` of them; input shapes
    from the strategy `input_shapes` (default: 0 to 3 dimensions, at most 12 elements).

    >>> from hypothesis import given, settings
    >>> from xform.testing import programs
    >>> @settings(max_examples=3, derandomize=True, deadline=None)
    ... @given(programs(max_statements=3))
    ... def jit_agrees(program):
    ...     x = program.input()
    ...     np.testing.assert_array_equal(xform.jit(program.fun)(x), program.fun(x))
    >>> jit_agrees()
    """
    return _programs(max_statements, statements, input_shapes)


@st.composite
def _programs(draw, max_statements, statements, input_shapes):
    shape = draw(input_shapes if input_shapes is not None else st.sampled_from(
        ((), (3,), (4,), (2, 3), (3, 2), (4, 3), (2, 2, 2))))
    w = _Writer(draw, tuple(shape))
    count = draw(st.integers(1, max_statements))
    for _ in range(count):
        STATEMENTS[draw(st.sampled_from(statements))](w)
    result, out_shape = w.env[-1]
    lines = [*w.helpers, "def program(x):", *("    " + line for line in w.body),
             f"    return {result}"]
    source = "\n".join(lines) + "\n"
    seed = draw(st.integers(0, 2 ** 16))
    return Program(source, tuple(shape), out_shape, frozenset(w.features), seed,
                   _exec(source, numpy))


__all__ = ["PYTHON_CONTROL_FLOW", "Program", "programs"]
