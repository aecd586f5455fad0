"""Pytrees: nested tuples, lists, dicts (OrderedDict, defaultdict), None, namedtuples,
dataclasses, attrs classes and registered types, flattened to a list of leaves and a hashable
structure; JAX's tree_util names (`xform.tree_util` is this module): key paths,
register_pytree_node, register_dataclass.

>>> from xform.tree import tree_flatten, tree_unflatten
>>> leaves, tree = tree_flatten({"w": 1.0, "b": (2.0, None)})
>>> leaves, tree_unflatten(tree, [10.0, 20.0])
([2.0, 1.0], {'w': 20.0, 'b': (10.0, None)})
"""
from __future__ import annotations

import collections
import dataclasses
import sys
from typing import Any, Callable

import attrs
import numpy as np

from xform.errors import TreeMismatchError
from xform.source_info import is_users_file, user_frame_info

_REGISTRY: dict[type, tuple[Callable, Callable]] = {}


def register(node_type: type, flatten: Callable, unflatten: Callable) -> None:
    """Make `node_type` a pytree node: `flatten(x) -> (children, aux)`,
    `unflatten(aux, children) -> x`; `aux` must be hashable.

    >>> from xform.tree import register, tree_flatten
    >>> class Point:
    ...     def __init__(self, x, y): self.x, self.y = x, y
    >>> register(Point, lambda p: ((p.x, p.y), None), lambda aux, xy: Point(*xy))
    >>> tree_flatten(Point(1.0, 2.0))[0]
    [1.0, 2.0]
    """
    _REGISTRY[node_type] = (flatten, unflatten)
    _FIELD_NAMES.pop(node_type, None)


class TreeDef:
    """The structure of a pytree; hashable and comparable, so it can key caches."""

    __slots__ = ("kind", "aux", "children", "num_leaves", "_hash")

    def __init__(self, kind, aux, children):
        self.kind = kind
        self.aux = aux
        self.children = children
        self.num_leaves = 1 if kind is None else sum(c.num_leaves for c in children)
        self._hash = hash((kind, aux, children))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return (isinstance(other, TreeDef) and self._hash == other._hash
                and self.kind == other.kind and self.aux == other.aux
                and self.children == other.children)

    def __repr__(self):
        if self.kind is None:
            return "*"
        if self.kind is type(None):
            return "None"
        if self.kind is _Text:
            return repr(self.aux)
        if self.kind is tuple:
            inner = ", ".join(map(repr, self.children))
            return f"({inner},)" if len(self.children) == 1 else f"({inner})"
        if self.kind is list:
            return f"[{', '.join(map(repr, self.children))}]"
        if self.kind is dict:
            items = ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.aux, self.children))
            return "{" + items + "}"
        name = getattr(self.kind, "__name__", str(self.kind))
        return f"{name}({', '.join(map(repr, self.children))})"


LEAF = TreeDef(None, None, ())


def _dict_keys(x: dict) -> tuple:
    # Sorted so that the structure does not depend on insertion order (as in JAX); keys that
    # do not sort (mixed types) keep their insertion order.
    try:
        keys = tuple(sorted(x))
    except TypeError:
        return tuple(x)
    inserted = tuple(x)
    return keys if keys == inserted else _SortedKeys(keys, inserted)


class _SortedKeys(tuple):
    """A dict's keys sorted (its structure: equal and hashed as the plain tuple), remembering
    the order they were inserted in, so that a dict rebuilt (a gradient) iterates as the
    caller's does, as autograd's and torch's do: `zip(params.items(), grads.values())`."""

    def __new__(cls, keys, inserted):
        self = super().__new__(cls, keys)
        self.inserted = inserted
        return self

    def __getnewargs__(self):      # copies and pickles keep the order
        return tuple(self), self.inserted


def _fields(kind) -> tuple[str, ...] | None:
    """The attribute names of a dataclass or attrs class `kind`, None for other types
    (memoized per type: a class's fields are fixed once it is made)."""
    names = _FIELDS.get(kind, _UNKNOWN)
    if names is _UNKNOWN:
        if dataclasses.is_dataclass(kind):
            names = tuple(f.name for f in dataclasses.fields(kind))
        elif attrs.has(kind):
            names = tuple(a.name for a in attrs.fields(kind))
        else:
            names = None
        if len(_FIELDS) >= 4096:    # bounded: classes made in a loop
            _FIELDS.clear()
        _FIELDS[kind] = names
    return names


_FIELDS: dict = {}
_UNKNOWN = object()
# Leaves every call passes: answered before any container test.
_LEAF_KINDS = frozenset({np.ndarray, float, int, bool, complex, np.float64, np.float32,
                         np.int64, np.int32, np.bool_, np.complex128, str})


def _node(x) -> tuple[Any, Any, list] | None:
    """(kind, aux, children) for a container, None for a leaf."""
    kind = type(x)
    if kind in _LEAF_KINDS:
        return None
    if kind is tuple or kind is list:
        return kind, None, list(x)
    if kind is dict:
        keys = _dict_keys(x)
        return dict, keys, [x[k] for k in keys]
    if x is None:
        return type(None), None, []
    if kind in _REGISTRY:
        children, aux = _REGISTRY[kind][0](x)
        return kind, aux, list(children)
    if isinstance(x, tuple) and hasattr(kind, "_fields"):
        return kind, None, list(x)
    names = _fields(kind)
    if names is not None:
        return kind, names, [getattr(x, n) for n in names]
    if _is_plain_class(kind):
        return _plain_node(x)
    return None


def _is_plain_class(kind) -> bool:
    """Whether instances of `kind` are plain objects whose attributes are a pytree: a class
    the user's own code defines (not a library's), whose instances keep their attributes in
    a `__dict__` or `__slots__` and that is no container or array (memoized per class). A
    callable one is plain too: a model whose `__call__` runs it holds its parameters as any
    other does."""
    plain = _PLAIN.get(kind)
    if plain is None:
        module = sys.modules.get(getattr(kind, "__module__", ""), None)
        filename = getattr(module, "__file__", None)
        users = (kind.__module__ not in ("builtins", "__builtin__") if filename is None
                 else is_users_file(filename))
        plain = (users and isinstance(kind, type) and kind.__init__ is not object.__init__
                 and not issubclass(
                     kind, (tuple, list, dict, set, np.ndarray, np.generic, BaseException))
                 and not any("__array__" in vars(c) for c in kind.__mro__[:-1]))
        if len(_PLAIN) >= 4096:
            _PLAIN.clear()
        _PLAIN[kind] = plain
    return plain


_PLAIN: dict = {}
# The attributes of a plain object that are children (traced where a transform reads them):
# arrays, floats and complex numbers, and containers and objects holding them. Ints, bools,
# strings, functions and every other value are static: kept as they are, part of the
# structure (an int is most often a setting, as a layer count: `range(self.n_layers)`).
_STATIC_IN_OBJECTS = (bool, int, str, bytes, type(None))


def _is_static_attribute(value) -> bool:
    kind = type(value)
    if kind in _STATIC_IN_OBJECTS or callable(value) and not _is_plain_class(kind):
        return True
    if isinstance(value, (np.ndarray, np.generic, float, complex)):
        return False
    if kind in (tuple, list, dict) or kind in _REGISTRY or _fields(kind) is not None \
            or hasattr(value, "shape") and hasattr(value, "dtype"):
        return False
    return not _is_plain_class(kind)


class _Static:
    """A plain object's static attribute in a structure: equal to another by value when
    hashable, else by identity (the object itself is kept)."""

    __slots__ = ("value", "_key")

    def __init__(self, value):
        self.value = value
        try:
            hash(value)
            self._key = (type(value), value)
        except TypeError:
            self._key = None

    def __hash__(self):
        return hash(self._key) if self._key is not None else id(self.value)

    def __eq__(self, other):
        if type(other) is not _Static:
            return False
        if self._key is not None:
            return self._key == other._key
        return self.value is other.value

    def __repr__(self):
        return repr(self.value)


class _PlainAux(tuple):
    """A plain object's structure: (child attribute names, ((name, _Static), ...)), sorted;
    `order`, the object's own order of its attributes (not part of the structure), is the
    order a rebuilt object sets them in, so that `vars(grads)` iterates as `vars(model)`."""


def _attributes(x) -> dict:
    """A plain object's attributes: its `__dict__`'s, and its slots' that are set."""
    slots = _slot_names(type(x))
    if not slots:
        return vars(x)
    attributes = dict(getattr(x, "__dict__", ()))
    for name in slots:
        if hasattr(x, name):
            attributes[name] = getattr(x, name)
    return attributes


def _slot_names(kind) -> tuple:
    """The data slots a class and its bases declare (memoized per class)."""
    names = _SLOTS.get(kind)
    if names is None:
        names = []
        for base in kind.__mro__[:-1]:
            slots = vars(base).get("__slots__", ())
            names += [n for n in ((slots,) if isinstance(slots, str) else slots)
                      if n not in ("__dict__", "__weakref__")]
        if len(_SLOTS) >= 4096:
            _SLOTS.clear()
        names = _SLOTS[kind] = tuple(names)
    return names


_SLOTS: dict = {}


def _plain_node(x):
    attributes = _attributes(x)
    names = tuple(sorted(n for n, v in attributes.items() if not _is_static_attribute(v)))
    statics = tuple(sorted((n, _Static(v)) for n, v in attributes.items()
                           if n not in names))
    aux = _PlainAux((names, statics))
    aux.order = tuple(attributes)
    return type(x), aux, [attributes[n] for n in names]


def _build_plain(kind, aux, children):
    """A plain object from its children: a new instance (its __init__ not run), so that what
    a staged function assigns to it never reaches the caller's object."""
    names, statics = aux
    values = {name: static.value for name, static in statics}
    values.update(zip(names, children))
    obj = object.__new__(kind)
    if _slot_names(kind):
        for name in aux.order:
            object.__setattr__(obj, name, values[name])
    else:
        obj.__dict__.update({name: values[name] for name in aux.order})
    return obj


_FLAT_TUPLES: dict = {}


def flat_tuple(n: int) -> TreeDef:
    """The structure of a tuple of `n` leaves (made once per length)."""
    treedef = _FLAT_TUPLES.get(n)
    if treedef is None:
        treedef = _FLAT_TUPLES[n] = TreeDef(tuple, None, (LEAF,) * n)
    return treedef


class _Text:
    """The kind of a structure's node holding a string or bytes (its aux), no leaf: see
    tree_flatten's `texts_static`."""


def tree_flatten(tree, is_leaf=None, texts_static=False) -> tuple[list, TreeDef]:
    """`(leaves, treedef)`: the leaves left to right (dicts by sorted key) and the structure;
    `is_leaf(x)` true stops the walk at `x` (as in JAX). With `texts_static`, strings and
    bytes are part of the structure, not leaves (a transformed function's results: a status
    next to arrays comes back as it is).

    >>> from xform.tree import tree_flatten
    >>> tree_flatten((1.0, [2.0, None]))
    ([1.0, 2.0], (*, [*, None]))
    >>> tree_flatten((1.0, "done"), texts_static=True)
    ([1.0], (*, 'done'))
    """
    if type(tree) is tuple and is_leaf is None and not texts_static:
        # A call's arguments, most often arrays and numbers: no walk.
        for x in tree:
            if type(x) not in _LEAF_KINDS:
                break
        else:
            return list(tree), flat_tuple(len(tree))
    leaves: list = []

    def walk(x) -> TreeDef:
        node = None if is_leaf is not None and is_leaf(x) else _node(x)
        if node is None:
            if texts_static and isinstance(x, (str, bytes)):
                return TreeDef(_Text, x, ())
            leaves.append(x)
            return LEAF
        kind, aux, children = node
        return TreeDef(kind, aux, tuple(walk(c) for c in children))

    return leaves, walk(tree)


def _build_fields(kind, names, children):
    """An instance of a dataclass or attrs class from its field values: __init__ gets the
    fields it takes (attrs: by alias, so `_x` is passed as `x`), the others are set after."""
    values = dict(zip(names, children))
    if dataclasses.is_dataclass(kind):
        init = {f.name: f.name for f in dataclasses.fields(kind) if f.init}
    else:
        init = {a.name: a.alias for a in attrs.fields(kind) if a.init}
    obj = kind(**{alias: values[name] for name, alias in init.items()})
    for name in names:
        if name not in init:
            object.__setattr__(obj, name, values[name])
    return obj


def _build(kind, aux, children):
    if kind is tuple:
        return tuple(children)
    if kind is list:
        return list(children)
    if kind is dict:
        built = dict(zip(aux, children))
        if type(aux) is _SortedKeys:
            return {key: built[key] for key in aux.inserted}
        return built
    if kind is type(None):
        return None
    if kind is _Text:
        return aux
    if kind in _REGISTRY:
        return _REGISTRY[kind][1](aux, children)
    if hasattr(kind, "_fields"):
        return kind(*children)
    if type(aux) is _PlainAux:
        return _build_plain(kind, aux, children)
    return _build_fields(kind, aux, children)


def tree_unflatten(treedef: TreeDef, leaves):
    """The pytree of structure `treedef` with `leaves` in order; the inverse of tree_flatten.

    >>> from xform.tree import tree_structure, tree_unflatten
    >>> tree_unflatten(tree_structure((0, {"a": 0})), [1, 2])
    (1, {'a': 2})
    """
    leaves = list(leaves)
    if treedef is _FLAT_TUPLES.get(len(leaves)):
        return tuple(leaves)
    if len(leaves) != treedef.num_leaves:
        raise TreeMismatchError(f"structure {treedef} has {treedef.num_leaves} leaves, "
                                f"got {len(leaves)}", user_frame_info())
    leaf_iter = iter(leaves)

    def build(node: TreeDef):
        if node.kind is None:
            return next(leaf_iter)
        return _build(node.kind, node.aux, [build(c) for c in node.children])

    return build(treedef)


def tree_leaves(tree, is_leaf=None) -> list:
    """The leaves of `tree`, left to right.

    >>> from xform.tree import tree_leaves
    >>> tree_leaves({"b": [2.0, 3.0], "a": 1.0})
    [1.0, 2.0, 3.0]
    """
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None) -> TreeDef:
    """The structure of `tree` (hashable, comparable).

    >>> from xform.tree import tree_structure
    >>> tree_structure({"a": 1.0, "b": (2.0, None)})
    {'a': *, 'b': (*, None)}
    """
    return tree_flatten(tree, is_leaf)[1]


def tree_map(fn, tree, *rest, is_leaf=None):
    """Apply `fn` leaf-wise; `rest` must have the same structure as `tree` (a mismatch names
    the first path where they differ).

    >>> from xform.tree import tree_map
    >>> tree_map(lambda a, b: a + b, {"x": 1}, {"x": 2})
    {'x': 3}
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = []
    for other in rest:
        other_leaves, other_def = tree_flatten(other, is_leaf)
        if other_def != treedef:
            where = first_difference(tree, other)
            at = f" at {keystr(where)}" if where else ""
            raise TreeMismatchError(f"tree structures differ{at}: {treedef} vs {other_def}",
                                    user_frame_info())
        others.append(other_leaves)
    return tree_unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others)])


def tree_map_with_path(fn, tree, *rest, is_leaf=None):
    """`tree_map` whose `fn` gets each leaf's key path first (see `tree_flatten_with_path`).

    >>> from xform.tree import keystr, tree_map_with_path
    >>> tree_map_with_path(lambda path, x: keystr(path), {"a": [1.0]})
    {'a': ["['a'][0]"]}
    """
    paths = [path for path, _ in tree_flatten_with_path(tree, is_leaf)[0]]
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = [tree_map(lambda x, o: o, tree, other, is_leaf=is_leaf) for other in rest]
    other_leaves = [tree_flatten(o, is_leaf)[0] for o in others]
    return tree_unflatten(treedef, [fn(p, *xs) for p, *xs in zip(paths, leaves,
                                                                 *other_leaves)])


# -- key paths, as JAX's tree_util names them ------------------------------------------------

@attrs.frozen
class DictKey:
    """A dict entry on a key path: `['name']`."""

    key: Any

    def __str__(self):
        return f"[{self.key!r}]"


@attrs.frozen
class SequenceKey:
    """A tuple or list position on a key path: `[0]`."""

    idx: int

    def __str__(self):
        return f"[{self.idx}]"


@attrs.frozen
class GetAttrKey:
    """An attribute on a key path (namedtuples, dataclasses, attrs classes): `.name`."""

    name: str

    def __str__(self):
        return f".{self.name}"


@attrs.frozen
class FlattenedIndexKey:
    """A child of a registered node on a key path, by position: `[<flat index 0>]`."""

    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}   # register_dataclass: children by attribute


def _child_keys(x, node) -> list:
    kind, aux, children = node
    if kind is dict:
        return [DictKey(k) for k in aux]
    if kind is tuple or kind is list:
        return [SequenceKey(i) for i in range(len(children))]
    if kind is type(None):
        return []
    if kind in _FIELD_NAMES:
        return [GetAttrKey(name) for name in _FIELD_NAMES[kind]]
    if kind is collections.OrderedDict:
        return [DictKey(k) for k in aux]
    if kind is collections.defaultdict:
        return [DictKey(k) for k in aux[1]]
    if kind in _REGISTRY:
        return [FlattenedIndexKey(i) for i in range(len(children))]
    if isinstance(x, tuple) and hasattr(kind, "_fields"):
        return [GetAttrKey(name) for name in kind._fields]
    return [GetAttrKey(name) for name in aux]


def tree_flatten_with_path(tree, is_leaf=None) -> tuple[list, TreeDef]:
    """`([(key_path, leaf), ...], treedef)`: each leaf with the keys that reach it.

    >>> from xform.tree import keystr, tree_flatten_with_path
    >>> pairs, _ = tree_flatten_with_path({"w": [1.0, 2.0], "b": 0.5})
    >>> [(keystr(path), leaf) for path, leaf in pairs]
    [("['b']", 0.5), ("['w'][0]", 1.0), ("['w'][1]", 2.0)]
    """
    pairs: list = []

    def walk(x, path):
        node = None if is_leaf is not None and is_leaf(x) else _node(x)
        if node is None:
            pairs.append((path, x))
            return
        for key, child in zip(_child_keys(x, node), node[2]):
            walk(child, path + (key,))

    walk(tree, ())
    return pairs, tree_structure(tree, is_leaf)


def keystr(path) -> str:
    """A key path as text, e.g. `['params'][0].w`.

    >>> from xform.tree import DictKey, SequenceKey, keystr
    >>> keystr((DictKey("params"), SequenceKey(0)))
    "['params'][0]"
    """
    return "".join(map(str, path))


def first_difference(a, b, path=()) -> tuple | None:
    """The key path of the first node where pytrees `a` and `b` differ in structure, or None
    when they have the same structure.

    >>> from xform.tree import first_difference, keystr
    >>> keystr(first_difference({"a": [1, 2]}, {"a": [1, (2,)]}))
    "['a'][1]"
    """
    node_a, node_b = _node(a), _node(b)
    if node_a is None or node_b is None:
        return None if node_a is None and node_b is None else path
    if node_a[0] is not node_b[0] or node_a[1] != node_b[1] \
            or len(node_a[2]) != len(node_b[2]):
        return path
    for key, child_a, child_b in zip(_child_keys(a, node_a), node_a[2], node_b[2]):
        where = first_difference(child_a, child_b, path + (key,))
        if where is not None:
            return where
    return None


# -- registration, as JAX's tree_util names it -------------------------------------------------

def register_pytree_node(nodetype: type, flatten_func: Callable,
                         unflatten_func: Callable) -> None:
    """JAX's name for `register`: `flatten_func(x) -> (children, aux)`,
    `unflatten_func(aux, children) -> x`.

    >>> from xform.tree import register_pytree_node, tree_leaves
    >>> class Box:
    ...     def __init__(self, v): self.v = v
    >>> register_pytree_node(Box, lambda b: ((b.v,), None), lambda aux, c: Box(*c))
    >>> tree_leaves([Box(1.0), Box(2.0)])
    [1.0, 2.0]
    """
    register(nodetype, flatten_func, unflatten_func)


def register_dataclass(nodetype=None, data_fields=None, meta_fields=None, drop_fields=()):
    """Register a dataclass as JAX does: `data_fields` are children (traced), `meta_fields`
    part of the structure (static, hashable). Without field lists, a field is meta when its
    metadata says `static=True`. Works as a decorator. (Unregistered dataclasses are pytrees
    too, every field a child.)

    >>> import dataclasses
    >>> from xform.tree import register_dataclass, tree_leaves
    >>> @register_dataclass
    ... @dataclasses.dataclass
    ... class Layer:
    ...     w: object
    ...     act: str = dataclasses.field(default="tanh", metadata=dict(static=True))
    >>> tree_leaves(Layer(np.float64(1.0)))
    [np.float64(1.0)]
    """
    if nodetype is None:
        return lambda cls: register_dataclass(cls, data_fields, meta_fields, drop_fields)
    if data_fields is None or meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(f"register_dataclass: {nodetype.__name__} is not a dataclass; "
                            "pass data_fields and meta_fields")
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if f.name not in meta_fields]
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    init_names = ({f.name for f in dataclasses.fields(nodetype) if f.init}
                  if dataclasses.is_dataclass(nodetype) else set(data_fields + meta_fields))

    def flatten(x):
        return ([getattr(x, name) for name in data_fields],
                tuple(getattr(x, name) for name in meta_fields))

    def unflatten(meta, children):
        values = {**dict(zip(data_fields, children)), **dict(zip(meta_fields, meta))}
        obj = nodetype(**{k: v for k, v in values.items() if k in init_names})
        for name, value in values.items():
            if name not in init_names:
                object.__setattr__(obj, name, value)
        return obj

    register(nodetype, flatten, unflatten)
    _FIELD_NAMES[nodetype] = data_fields
    return nodetype


def broadcast_prefix(prefix, tree, is_leaf=lambda x: x is None, texts_static=False) -> list:
    """Leaves of `prefix` repeated over the subtrees of `tree` they cover (for in_axes); with
    `texts_static`, over `tree`'s leaves as tree_flatten's `texts_static` counts them (a
    transformed function's results, for out_axes).

    >>> from xform.tree import broadcast_prefix
    >>> broadcast_prefix((0, None), (1.0, {"a": 2.0, "b": 3.0}))
    [0, None, None]
    """
    result = []

    def walk(p, t, path):
        if is_leaf(p) or _node(p) is None:
            result.extend([p] * len(tree_flatten(t, texts_static=texts_static)[0]))
            return
        pnode = _node(p)
        pk, paux, pchildren = pnode
        tnode = _node(t)
        if tnode is None or tnode[0] is not pk or tnode[1] != paux \
                or len(tnode[2]) != len(pchildren):
            at = f" at {keystr(path)}" if path else ""
            raise TreeMismatchError(f"prefix {prefix!r} does not match the argument structure "
                                    f"{tree_structure(tree)}{at}", user_frame_info())
        for key, pc, tc in zip(_child_keys(p, pnode), pchildren, tnode[2]):
            walk(pc, tc, path + (key,))

    walk(prefix, tree, ())
    return result


# Built-in nodes beside dict, as in JAX: an OrderedDict keeps its keys' order (part of its
# structure), a defaultdict its factory.
register(collections.OrderedDict, lambda d: (list(d.values()), tuple(d)),
         lambda keys, values: collections.OrderedDict(zip(keys, values)))
register(collections.defaultdict,
         lambda d: ([d[k] for k in _dict_keys(d)], (d.default_factory, _dict_keys(d))),
         lambda aux, values: collections.defaultdict(aux[0], zip(aux[1], values)))
