"""Pytrees: round trips for every node kind, hypothesis-generated nested trees, structure
equality and hashing, tree_map and broadcast_prefix, and mismatch errors."""
import dataclasses
from collections import OrderedDict, namedtuple

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform import tree
from xform.tree import (LEAF, broadcast_prefix, tree_flatten, tree_leaves, tree_map,
                        tree_structure, tree_unflatten)

Pair = namedtuple("Pair", "first second")


@dataclasses.dataclass
class Params:
    w: object
    b: object


@dataclasses.dataclass(frozen=True)
class Frozen:
    value: object
    cached: object = dataclasses.field(init=False, default=None)


@attrs.define
class State:
    _position: object             # attrs passes this to __init__ as `position`
    velocity: object = 0.0


@attrs.frozen
class Derived:
    x: object
    total: object = attrs.field(init=False, default=0.0)


class Point:
    """A user class registered with xform.tree.register."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return type(other) is Point and (self.x, self.y) == (other.x, other.y)

    def __repr__(self):
        return f"Point({self.x!r}, {self.y!r})"


tree.register(Point, lambda p: ((p.x, p.y), None), lambda aux, xy: Point(*xy))


class Tagged:
    """A registered type with a non-trivial aux: the tag is structure, not a leaf."""

    def __init__(self, tag, value):
        self.tag, self.value = tag, value

    def __eq__(self, other):
        return type(other) is Tagged and (self.tag, self.value) == (other.tag, other.value)


tree.register(Tagged, lambda t: ((t.value,), t.tag), lambda tag, xs: Tagged(tag, xs[0]))


def round_trip(value):
    leaves, treedef = tree_flatten(value)
    rebuilt = tree_unflatten(treedef, leaves)
    assert type(rebuilt) is type(value)
    assert rebuilt == value
    assert treedef.num_leaves == len(leaves)
    return leaves, treedef


# -- round trips ------------------------------------------------------------------------------

@pytest.mark.parametrize("value, leaves", [
    ((1.0, 2.0), [1.0, 2.0]),
    ([1.0, [2.0, 3.0]], [1.0, 2.0, 3.0]),
    ({"b": 1.0, "a": 2.0}, [2.0, 1.0]),                 # sorted keys
    (None, []),
    ((None, 1.0, ()), [1.0]),
    (Pair(1.0, (2.0, 3.0)), [1.0, 2.0, 3.0]),
    (Params(w=1.0, b=[2.0]), [1.0, 2.0]),
    (State(1.0, velocity=2.0), [1.0, 2.0]),
    (Point(1.0, 2.0), [1.0, 2.0]),
    (Tagged("t", 5.0), [5.0]),
    ({"p": Pair(Point(1, 2), None), "q": [State(3, 4)]}, [1, 2, 3, 4]),
    (3.0, [3.0]),
], ids=lambda v: type(v).__name__)
def test_round_trip(value, leaves):
    got, _ = round_trip(value)
    assert got == leaves


def test_arrays_and_scalars_are_leaves():
    x = np.ones(3)
    leaves, treedef = tree_flatten((x, np.float32(1), 2, True))
    assert leaves[0] is x and treedef.children == (LEAF,) * 4


def test_fields_outside_init_round_trip():
    value = Frozen(1.0)
    object.__setattr__(value, "cached", 7.0)
    rebuilt = tree_unflatten(*reversed(tree_flatten(value)))
    assert rebuilt.value == 1.0 and rebuilt.cached == 7.0
    derived = tree_unflatten(tree_structure(Derived(1.0)), [10.0, 20.0])
    assert (derived.x, derived.total) == (10.0, 20.0)


def test_attrs_private_field_is_passed_by_alias():
    rebuilt = tree_unflatten(tree_structure(State(0.0)), [5.0, 6.0])
    assert rebuilt == State(5.0, 6.0)


def test_unregistered_objects_are_leaves():
    obj = object()
    assert tree_leaves([obj]) == [obj]
    assert tree_leaves(OrderedDict(b=1, a=2)) == [1, 2]   # a node as in JAX, in its order


def test_a_rebuilt_dict_keeps_its_key_order_through_copies_and_pickles():
    import copy
    import pickle
    treedef = tree_structure({"b": 1.0, "a": 2.0})
    assert treedef == tree_structure({"a": 2.0, "b": 1.0})        # the order is no structure
    for copied in (copy.deepcopy(treedef), pickle.loads(pickle.dumps(treedef))):
        assert copied == treedef
        assert list(tree_unflatten(copied, [20.0, 10.0])) == ["b", "a"]


def test_dict_with_unsortable_keys_keeps_insertion_order():
    leaves, treedef = round_trip({1: "one", "a": "A"})
    assert leaves == ["one", "A"]


# -- hypothesis: nested trees -------------------------------------------------------------------

leaf_values = st.one_of(st.floats(allow_nan=False), st.integers(), st.booleans())
keys = st.text("abcxyz", min_size=1, max_size=3)


def extend(children):
    return st.one_of(
        st.tuples(children, children),
        st.lists(children, max_size=3),
        st.dictionaries(keys, children, max_size=3),
        st.builds(Pair, children, children),
        st.builds(Params, children, children),
        st.builds(State, children, children),
        st.builds(Point, children, children),
        st.builds(Tagged, st.sampled_from("uv"), children),
        st.just(None),
    )


trees = st.recursive(leaf_values, extend, max_leaves=12)


@given(trees)
def test_nested_round_trip(value):
    leaves, treedef = round_trip(value)
    assert tree_structure(value) == treedef and hash(tree_structure(value)) == hash(treedef)


@given(trees)
def test_structure_ignores_leaf_values(value):
    leaves, treedef = tree_flatten(value)
    renamed = tree_unflatten(treedef, [f"leaf{i}" for i in range(len(leaves))])
    assert tree_structure(renamed) == treedef
    assert tree_leaves(renamed) == [f"leaf{i}" for i in range(len(leaves))]


@given(trees, trees)
def test_structures_equal_iff_rebuilt_shapes_equal(a, b):
    ta, tb = tree_structure(a), tree_structure(b)
    same = tree_unflatten(ta, [0] * ta.num_leaves) == tree_unflatten(tb, [0] * tb.num_leaves)
    assert (ta == tb) == same
    if ta == tb:
        assert hash(ta) == hash(tb)


@given(trees)
def test_tree_map_doubles_every_leaf(value):
    doubled = tree_map(lambda x: x * 2, value)
    assert tree_leaves(doubled) == [x * 2 for x in tree_leaves(value)]
    assert tree_structure(doubled) == tree_structure(value)


# -- structure details ---------------------------------------------------------------------------

def test_distinct_structures():
    assert tree_structure((1, 2)) != tree_structure([1, 2])
    assert tree_structure((1, 2)) != tree_structure(Pair(1, 2))
    assert tree_structure({"a": 1}) != tree_structure({"b": 1})
    assert tree_structure(None) != tree_structure(())
    assert tree_structure(Tagged("u", 1)) != tree_structure(Tagged("v", 1))
    assert tree_structure(Params(1, 2)) != tree_structure(State(1, 2))
    assert tree_structure({"b": 1, "a": 2}) == tree_structure({"a": 3, "b": 4})


def test_treedef_repr():
    assert repr(tree_structure((1, [2, None], {"k": 3}))) == "(*, [*, None], {'k': *})"
    assert repr(tree_structure((1,))) == "(*,)"
    assert repr(tree_structure(Pair(1, 2))) == "Pair(*, *)"


def test_treedef_keys_a_dict():
    cache = {tree_structure({"w": 1.0, "b": (2.0,)}): "entry"}
    assert cache[tree_structure({"b": (0,), "w": 0})] == "entry"


def test_broadcast_prefix():
    assert broadcast_prefix(0, (1.0, [2.0, 3.0])) == [0, 0, 0]
    assert broadcast_prefix((0, None), (1.0, {"a": 2.0, "b": 3.0})) == [0, None, None]
    assert broadcast_prefix((1, {"a": 0, "b": None}), (1.0, {"a": 2.0, "b": 3.0})) == [
        1, 0, None]


# -- mismatch errors -------------------------------------------------------------------------

def test_tree_map_mismatch():
    with pytest.raises(xform.TreeMismatchError) as info:
        tree_map(lambda a, b: a + b, {"x": 1, "y": 2}, {"x": 1})
    message = str(info.value)
    assert "tree structures differ" in message and "{'x': *, 'y': *}" in message
    assert f"{__file__}:" in message


def test_unflatten_with_the_wrong_number_of_leaves():
    treedef = tree_structure((1.0, [2.0]))
    with pytest.raises(xform.TreeMismatchError, match="has 2 leaves, got 1"):
        tree_unflatten(treedef, [1.0])
    with pytest.raises(xform.TreeMismatchError, match="has 2 leaves, got 3"):
        tree_unflatten(treedef, [1.0, 2.0, 3.0])


def test_broadcast_prefix_mismatch():
    with pytest.raises(xform.TreeMismatchError, match="does not match"):
        broadcast_prefix((0, 0, 0), (1.0, 2.0))
    with pytest.raises(xform.TreeMismatchError, match="does not match"):
        broadcast_prefix({"a": 0}, {"b": 1.0})


def test_vmap_in_axes_mismatch_is_a_tree_error():
    with pytest.raises(xform.TreeMismatchError) as info:
        xform.vmap(lambda p: p["a"], in_axes=({"b": 0},))({"a": np.ones(3)})
    assert __file__ in str(info.value)


def test_stop_gradient_maps_over_trees():
    value = {"a": np.ones(2), "b": (1.0,)}
    out = xform.stop_gradient(value)
    assert tree_structure(out) == tree_structure(value)


@given(st.lists(st.one_of(st.floats(allow_nan=False), st.integers(), st.booleans(),
                          st.builds(np.ones, st.integers(0, 3))), max_size=5),
       st.one_of(st.none(), st.just([1.0]), st.just({"a": 1.0})))
def test_flat_tuples_take_the_short_path_to_the_walked_structure(items, container):
    """A tuple of plain leaves (a call's arguments) is flattened without the walk; its
    structure equals and hashes like the one the walk builds, which a tuple holding a
    container still goes through."""
    flat = tuple(items)
    leaves, treedef = tree_flatten(flat)
    walked = tree.TreeDef(tuple, None, (LEAF,) * len(items))
    assert leaves == list(items) and treedef == walked and hash(treedef) == hash(walked)
    assert type(tree_unflatten(treedef, leaves)) is tuple
    assert tree_unflatten(treedef, leaves) == flat
    assert tree_unflatten(walked, leaves) == flat
    if container is not None:
        nested = flat + (container,)
        nested_leaves, nested_def = tree_flatten(nested)
        assert nested_def != tree.flat_tuple(len(nested))
        assert tree_unflatten(nested_def, nested_leaves) == nested
