"""Pytrees: nested tuples, lists, dicts, None, namedtuples, dataclasses, attrs classes and
registered types, flattened to a list of leaves and a hashable structure.

>>> from xform.tree import tree_flatten, tree_unflatten
>>> leaves, tree = tree_flatten({"w": 1.0, "b": (2.0, None)})
>>> leaves, tree_unflatten(tree, [10.0, 20.0])
([2.0, 1.0], {'b': (10.0, None), 'w': 20.0})
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import attrs

from xform.errors import TreeMismatchError
from xform.source_info import user_frame_info

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
        return tuple(sorted(x))
    except TypeError:
        return tuple(x)


def _fields(kind) -> tuple[str, ...] | None:
    """The attribute names of a dataclass or attrs class `kind`, None for other types."""
    if dataclasses.is_dataclass(kind):
        return tuple(f.name for f in dataclasses.fields(kind))
    if attrs.has(kind):
        return tuple(a.name for a in attrs.fields(kind))
    return None


def _node(x) -> tuple[Any, Any, list] | None:
    """(kind, aux, children) for a container, None for a leaf."""
    kind = type(x)
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
    return None


def tree_flatten(tree) -> tuple[list, TreeDef]:
    """`(leaves, treedef)`: the leaves left to right (dicts by sorted key) and the structure.

    >>> from xform.tree import tree_flatten
    >>> tree_flatten((1.0, [2.0, None]))
    ([1.0, 2.0], (*, [*, None]))
    """
    leaves: list = []

    def walk(x) -> TreeDef:
        node = _node(x)
        if node is None:
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
        return dict(zip(aux, children))
    if kind is type(None):
        return None
    if kind in _REGISTRY:
        return _REGISTRY[kind][1](aux, children)
    if hasattr(kind, "_fields"):
        return kind(*children)
    return _build_fields(kind, aux, children)


def tree_unflatten(treedef: TreeDef, leaves):
    """The pytree of structure `treedef` with `leaves` in order; the inverse of tree_flatten.

    >>> from xform.tree import tree_structure, tree_unflatten
    >>> tree_unflatten(tree_structure((0, {"a": 0})), [1, 2])
    (1, {'a': 2})
    """
    leaves = list(leaves)
    if len(leaves) != treedef.num_leaves:
        raise TreeMismatchError(f"structure {treedef} has {treedef.num_leaves} leaves, "
                                f"got {len(leaves)}", user_frame_info())
    leaf_iter = iter(leaves)

    def build(node: TreeDef):
        if node.kind is None:
            return next(leaf_iter)
        return _build(node.kind, node.aux, [build(c) for c in node.children])

    return build(treedef)


def tree_leaves(tree) -> list:
    return tree_flatten(tree)[0]


def tree_structure(tree) -> TreeDef:
    return tree_flatten(tree)[1]


def tree_map(fn, tree, *rest):
    """Apply `fn` leaf-wise; `rest` must have the same structure as `tree`.

    >>> from xform.tree import tree_map
    >>> tree_map(lambda a, b: a + b, {"x": 1}, {"x": 2})
    {'x': 3}
    """
    leaves, treedef = tree_flatten(tree)
    others = []
    for other in rest:
        other_leaves, other_def = tree_flatten(other)
        if other_def != treedef:
            raise TreeMismatchError(f"tree structures differ: {treedef} vs {other_def}",
                                    user_frame_info())
        others.append(other_leaves)
    return tree_unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others)])


def broadcast_prefix(prefix, tree, is_leaf=lambda x: x is None) -> list:
    """Leaves of `prefix` repeated over the subtrees of `tree` they cover (for in_axes).

    >>> from xform.tree import broadcast_prefix
    >>> broadcast_prefix((0, None), (1.0, {"a": 2.0, "b": 3.0}))
    [0, None, None]
    """
    result = []

    def walk(p, t):
        if is_leaf(p) or _node(p) is None:
            result.extend([p] * len(tree_leaves(t)))
            return
        pk, paux, pchildren = _node(p)
        tnode = _node(t)
        if tnode is None or tnode[0] is not pk or tnode[1] != paux \
                or len(tnode[2]) != len(pchildren):
            raise TreeMismatchError(f"prefix {prefix!r} does not match the argument structure "
                                    f"{tree_structure(tree)}", user_frame_info())
        for pc, tc in zip(pchildren, tnode[2]):
            walk(pc, tc)

    walk(prefix, tree)
    return result
