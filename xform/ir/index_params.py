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
