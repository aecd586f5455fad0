"""threaded_map: a parallel element-wise map (being written)."""


def threaded_map(f, *xs, out=None, num_threads=None, chunk_size=None):
    """Apply scalar `f` element-wise across `xs` on a thread pool (not implemented yet)."""
    raise NotImplementedError("threaded_map is being written")
