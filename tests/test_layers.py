"""The layering of docs/ARCHITECTURE.md holds: import-linter's contracts (pyproject.toml) pass,
and no import cycle joins two of xform's packages (function-level imports count)."""
import os
import pathlib

import grimp
import networkx as nx
from importlinter import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold(capsys):
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        code = cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)
    finally:
        os.chdir(cwd)
    report = capsys.readouterr().out
    assert code == 0, report


def package_of(module: str) -> str:
    """xform.rules.unary -> xform.rules; xform.errors -> xform.errors."""
    return ".".join(module.split(".")[:2])


def package_graph() -> nx.DiGraph:
    graph = grimp.build_graph("xform", cache_dir=None)
    packages = nx.DiGraph()
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            a, b = package_of(importer), package_of(imported)
            if a != b and a != "xform" and b != "xform":    # xform/__init__ is the facade
                packages.add_edge(a, b, via=(importer, imported))
    return packages


def test_no_import_cycle_joins_two_packages():
    packages = package_graph()
    cycles = list(nx.simple_cycles(packages))
    described = [" -> ".join(f"{packages.edges[a, b]['via'][0]} imports "
                             f"{packages.edges[a, b]['via'][1]}"
                             for a, b in zip(cycle, cycle[1:] + cycle[:1]))
                 for cycle in cycles]
    assert not cycles, "\n".join(described)


def test_the_cycle_check_sees_a_cycle():
    packages = nx.DiGraph([("xform.a", "xform.b"), ("xform.b", "xform.a")])
    assert list(nx.simple_cycles(packages))      # the check above can fail
    assert package_of("xform.rules.unary") == "xform.rules"
