"""Assertions that an xform error names the user's tagged source line (`# line: <tag>`)."""


def line_of(path, tag):
    """The number of the line in `path` that ends with `# line: <tag>`."""
    with open(path) as f:
        hits = [i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# line: {tag}")]
    assert len(hits) == 1, tag
    return hits[0]


def assert_points_at(err, path, tag, function=None):
    """`err` names `path` and its tagged line, in the `  at file:line (fn): text` shape."""
    line = line_of(path, tag)
    assert err.source is not None
    assert err.source.filename == path and err.source.lineno == line, str(err)
    at_lines = [text for text in str(err).splitlines() if text.startswith("  at ")]
    assert len(at_lines) == 1
    assert at_lines[0].startswith(f"  at {path}:{line} (")
    assert at_lines[0].endswith(f"# line: {tag}")
    if function is not None:
        assert f":{line} ({function}): " in at_lines[0]
