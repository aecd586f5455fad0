"""The encoding of an index in the params of the indexing primitives (gather, scatter,
scatter_add): the static entries in a tuple, the integer index arrays as inputs. Here so that
what reads params below the rules (a backend's lowering) decodes them the one way."""

# An index param is a tuple of entries: an int, None (newaxis), Ellipsis, a slice as a
# (start, stop, step) tuple, or ARRAY, which stands for the next integer-array input.
ARRAY = "array"
FULL = (None, None, None)


def numpy_index(index, arrays):
    """The numpy index that the `index` param and its `arrays` inputs stand for.

    >>> from xform.ir.index_params import ARRAY, numpy_index
    >>> numpy_index((0, (1, None, None), ARRAY), [np.array([2, 0])])
    (0, slice(1, None, None), array([2, 0]))
    """
    arrays = iter(arrays)
    return tuple(next(arrays) if entry == ARRAY else slice(*entry) if type(entry) is tuple
                 else entry for entry in index)


def _bounds(axis_range: range) -> tuple:
    """(first, last + 1) of the positions `axis_range` visits; (0, 0) when it visits none."""
    if not axis_range:
        return (0, 0)
    return (min(axis_range[0], axis_range[-1]), max(axis_range[0], axis_range[-1]) + 1)


def index_window(shape, index):
    """The positions an `index` param without index arrays selects in an array of `shape`:
    one range per axis (equal windows select the same elements in the same order). None when
    it holds an ARRAY.

    >>> from xform.ir.index_params import index_window
    >>> index_window((5, 4), (2,)), index_window((5, 4), (Ellipsis, (1, None, 2)))
    ((range(2, 3), range(0, 4)), (range(0, 5), range(1, 4, 2)))
    """
    if ARRAY in index:
        return None
    consumed = sum(entry is not None and entry is not Ellipsis for entry in index)
    window, axis = [], 0
    for entry in index:
        if entry is None:
            continue
        if entry is Ellipsis:
            spanned = len(shape) - consumed
            window.extend(range(n) for n in shape[axis:axis + spanned])
            axis += spanned
            continue
        n = shape[axis]
        if type(entry) is tuple:
            window.append(range(*slice(*entry).indices(n)))
        else:
            window.append(range(n)[entry:entry + 1 or None])
        axis += 1
    window.extend(range(n) for n in shape[axis:])
    return tuple(window)


def index_box(shape, index):
    """The box an `index` param without index arrays selects in an array of `shape`: one
    (start, stop) per axis bounding the positions it touches. None when it holds an ARRAY.

    >>> from xform.ir.index_params import index_box
    >>> index_box((5, 4), (2,)), index_box((5, 4), (Ellipsis, (1, None, 2)))
    (((2, 3), (0, 4)), ((0, 5), (1, 4)))
    """
    window = index_window(shape, index)
    return None if window is None else tuple(map(_bounds, window))


def slice_window(starts, stops, steps):
    """The positions a static slice selects, one range per axis (as index_window)."""
    return tuple(map(range, starts, stops, steps))


def slice_box(starts, stops, steps):
    """The box (one (start, stop) per axis) bounding what a static slice selects."""
    return tuple(map(_bounds, slice_window(starts, stops, steps)))


def boxes_overlap(box, other) -> bool:
    """Whether two boxes (one (start, stop) per axis; None: anywhere) may share an element."""
    if box is None or other is None or len(box) != len(other):
        return True
    return all(a < d and c < b for (a, b), (c, d) in zip(box, other))
