"""What a Python function reads besides its arguments: its closure cells, the globals its code
(nested functions and lambdas included) names, and, of these and its defaults, the mutable
containers, with fingerprints of their contents. The one walk behind the staging caches'
identity checks (xform.runtime.dependencies) and threaded_map's mutation check."""
from __future__ import annotations

import hashlib
import inspect
import types

import numpy as np

MISSING = object()  # what a namespace lookup of an unbound name gives
MUTABLE = (list, dict, set, bytearray, np.ndarray)


def nested_codes(code: types.CodeType) -> list:
    """`code`, then the code of each function and lambda defined in it, depth first.

    >>> [c.co_name for c in nested_codes((lambda: lambda: 0).__code__)]
    ['<lambda>', '<lambda>']
    """
    codes = [code]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            codes += nested_codes(const)
    return codes


def named_globals(code: types.CodeType, namespace: dict) -> list:
    """(name, value) for each name `code` itself uses that `namespace` binds. Attribute names
    are among them (`co_names` does not tell the two apart): `np.sin` names `np` and `sin`.

    >>> [name for name, _ in named_globals((lambda: np.sin).__code__, {"np": np})]
    ['np']
    """
    found = []
    for name in code.co_names:
        value = namespace.get(name, MISSING)
        if value is not MISSING:
            found.append((name, value))
    return found


def closure_cells(function: types.FunctionType):
    """(name, cell, value) for each closure cell of `function` that holds a value.

    >>> def scaled_by(w):
    ...     return lambda x: x * w[0]
    >>> [(name, value) for name, _, value in closure_cells(scaled_by([2.0]))]
    [('w', [2.0])]
    """
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:  # a name of the enclosing scope not assigned yet
            continue
        yield name, cell, value


def shared_containers(f):
    """(description, object) for the mutable containers `f` can reach directly: its closure
    cells, defaults, the globals its code names, and the attributes of a bound method's
    instance. (Deeper objects, and those of functions `f` calls, are not included.)

    >>> w = [2.0]
    >>> [what for what, _ in shared_containers(lambda x, b=[]: x * w[0])]
    ['a default argument', "the global 'w'"]
    """
    if inspect.ismethod(f):
        instance = f.__self__
        if isinstance(getattr(instance, "__dict__", None), dict):
            yield f"the attributes of {type(instance).__name__}", instance.__dict__
            for name, value in instance.__dict__.items():
                if isinstance(value, MUTABLE):
                    yield f"attribute '{name}'", value
        f = f.__func__
    if not isinstance(f, types.FunctionType):
        return
    for name, _, value in closure_cells(f):
        if isinstance(value, MUTABLE):
            yield f"'{name}', which it closes over", value
    for value in f.__defaults__ or ():
        if isinstance(value, MUTABLE):
            yield "a default argument", value
    for code in nested_codes(f.__code__):
        for name, value in named_globals(code, f.__globals__):
            if isinstance(value, MUTABLE):
                yield f"the global '{name}'", value


_EXACT_HASH_BYTES = 80_000   # larger arrays: the universal hash, at ~2 elementwise passes
_BLOCK = 8192                # 64-bit words per block of the universal hash
_WEIGHTS = np.random.default_rng(0x5EED).integers(0, 2**63, size=_BLOCK, dtype=np.uint64)
_WEIGHTS = _WEIGHTS * np.uint64(2) + np.uint64(1)     # odd: no single change can vanish
_block_weights = _WEIGHTS[:0]


def _universal_hash(data: np.ndarray) -> tuple:
    """sum(w_i * word_i) mod 2**64 over the array's 64-bit words with odd random weights
    (per block, then per block again): a change of one word always changes it, and several
    changes cancel with probability 2**-64. A cryptographic hash of megabytes would cost
    ~10x more on every cache hit."""
    global _block_weights
    raw = data.view(np.uint8).ravel()
    words = raw[:raw.size // 8 * 8].view(np.uint64)
    n_blocks = words.size // _BLOCK
    if _block_weights.size < n_blocks:
        _block_weights = np.random.default_rng(0xB10C).integers(
            0, 2**63, size=max(n_blocks, 2 * _block_weights.size), dtype=np.uint64)
        _block_weights = _block_weights * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        per_block = words[:n_blocks * _BLOCK].reshape(n_blocks, _BLOCK) @ _WEIGHTS
        rest = words[n_blocks * _BLOCK:]
        return (int(per_block @ _block_weights[:n_blocks]),
                int(rest @ _WEIGHTS[:rest.size]), raw[words.size * 8:].tobytes())


def fingerprint(container):
    """A value that differs once `container` (one of MUTABLE) is changed in place: the
    identities of its items, or a hash of an array's bytes (a universal hash for arrays
    over 80 kB).

    >>> w = [1.0]
    >>> before = fingerprint(w)
    >>> w.append(2.0)
    >>> fingerprint(w) == before
    False
    """
    if isinstance(container, np.ndarray):
        data = np.ascontiguousarray(container)
        if data.dtype.hasobject:
            return container.shape, tuple(map(id, data.ravel()))
        if data.nbytes > _EXACT_HASH_BYTES:
            return container.shape, container.dtype, _universal_hash(data)
        return (container.shape, container.dtype,
                hashlib.blake2b(data.view(np.uint8).ravel()).digest())
    if isinstance(container, dict):
        return tuple(map(id, container.keys())), tuple(map(id, container.values()))
    if isinstance(container, set):
        return frozenset(map(id, container))
    if isinstance(container, bytearray):
        return bytes(container)
    return tuple(map(id, container))


def mutation_watch(f):
    """A function telling, once called, which of the containers `f` can reach directly
    (`shared_containers`) has changed in place since `mutation_watch(f)` (its description),
    or None.

    >>> w = [1.0]
    >>> changed = mutation_watch(lambda x: w.append(x))
    >>> changed() is None, (w.append(2.0), changed())[1]
    (True, "the global 'w'")
    """
    watched = [(what, obj, fingerprint(obj)) for what, obj in shared_containers(f)]

    def changed():
        for what, obj, before in watched:
            if fingerprint(obj) != before:
                return what
        return None
    return changed
