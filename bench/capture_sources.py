"""A pytest plugin that writes every source the code generator makes while the tests run (and
the names of its globals) to the file $CAPTURE_FILE, so that a change to codegen can be shown
to leave the generated code unchanged, byte for byte: capture before and after, then compare.

`CAPTURE_FILE=/tmp/before.txt python -m pytest -p bench.capture_sources tests/test_codegen.py
tests/test_codegen_fast.py tests/test_codegen_segments.py tests/test_inplace.py
tests/test_random_programs.py -p no:cacheprovider` (the tests are derandomized, so two runs
of one tree write the same file).
"""
import os

_records = []


def pytest_configure(config):
    import xform.codegen.emit as emit
    generate = emit.graph_source

    def recorded(graph, *args, **kwargs):
        source, namespace = generate(graph, *args, **kwargs)
        _records.append(source + "# names: " + " ".join(sorted(namespace)) + "\n")
        return source, namespace
    emit.graph_source = recorded


def pytest_unconfigure(config):
    with open(os.environ["CAPTURE_FILE"], "w") as out:
        out.write("\n".join(_records))
