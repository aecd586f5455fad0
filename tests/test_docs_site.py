"""The documentation site: `mkdocs build --strict` succeeds (a broken cross-reference or a
failing page fails it), every public name of the reference modules has a docstring and a
heading on its reference page, every internal link of the built HTML resolves (anchors
included), the generated pages follow the registry, the notebooks and the examples, and the
code of the hand-written guides runs."""
import html.parser
import importlib.util
import pathlib
import posixpath
import re
import subprocess
import sys
import textwrap
import types
import urllib.parse

import griffe
import nbformat
import numpy as np
import pytest

import xform
from xform.numpy import UFUNCS

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _load_hook():
    spec = importlib.util.spec_from_file_location("xform_site", DOCS / "hooks" / "xform_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


site_hook = _load_hook()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
                         cwd=ROOT, capture_output=True, text=True,
                         env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout}\n{run.stderr}"
    return out


def page_text(site, uri):
    return (site / uri / "index.html").read_text(encoding="utf-8")


class _Text(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts = []

    def handle_data(self, data):
        self.parts.append(data)


def visible_text(site, uri):
    """The page's text as a reader sees it (tags dropped, entities decoded)."""
    parser = _Text()
    parser.feed(page_text(site, uri))
    return "".join(parser.parts)


# -- every public name is documented ---------------------------------------------------------

def public_names():
    return [(module, name) for module in site_hook.REFERENCE_MODULES
            for name in site_hook.public_names(module)]


@pytest.fixture(scope="module")
def griffe_package():
    loader = griffe.GriffeLoader(search_paths=[str(ROOT)])
    package = loader.load("xform")
    loader.resolve_aliases(implicit=False, external=False)
    return package


@pytest.mark.parametrize("module_name, name", public_names(),
                         ids=lambda x: x if isinstance(x, str) else None)
def test_public_name_has_a_docstring(griffe_package, module_name, name):
    # What the reference renders is Griffe's view: a constant needs an attribute docstring.
    value = getattr(sys.modules[module_name], name)
    if isinstance(value, types.ModuleType):      # documented by its own reference page
        assert (value.__doc__ or "").strip(), f"module {value.__name__} has no docstring"
        assert value.__name__ in site_hook.REFERENCE_MODULES
        return
    documented = site_hook.documented_path(module_name, name)
    obj = griffe_package[documented.removeprefix("xform").lstrip(".")]
    assert obj.kind.value != "module" or isinstance(value, types.ModuleType), \
        f"{module_name}.{name} would be documented as the module {obj.path}"
    docstring = obj.docstring
    assert docstring is not None and docstring.value.strip(), \
        f"{module_name}.{name} has no docstring: the API reference would show none"


def test_reference_covers_every_public_name(site):
    for module_name in site_hook.REFERENCE_MODULES:
        text = page_text(site, f"reference/{module_name}")
        for name in site_hook.public_names(module_name):
            value = getattr(sys.modules[module_name], name)
            if isinstance(value, types.ModuleType):
                assert f'href="../{value.__name__}/"' in text, (module_name, name)
            else:
                assert f'id="{module_name}.{name}"' in text, f"{module_name}.{name} missing"


def test_all_names_are_the_packages():
    assert "grad" in xform.__all__ and ("xform", "grad") in public_names()
    assert ("xform.testing", "check_primitive") in public_names()


# -- links ------------------------------------------------------------------------------------

class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.targets, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        for key in ("href", "src"):
            if attrs.get(key) and (tag, key) in {("a", "href"), ("link", "href"),
                                                  ("img", "src"), ("script", "src")}:
                self.targets.append(attrs[key])


def _parse(path):
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def broken_links(site):
    """(page, link) for every internal link whose file or anchor is missing."""
    parsed, broken = {}, []
    pages = sorted(p for p in site.rglob("*.html") if p.name != "404.html")
    for page in pages:
        parsed.setdefault(page, _parse(page))
        for link in parsed[page].targets:
            url = urllib.parse.urlsplit(link)
            if url.scheme or url.netloc or link.startswith("//"):
                continue                          # the web: not this site's business
            target = page if not url.path else (page.parent / urllib.parse.unquote(url.path))
            if target.is_dir() or url.path.endswith("/"):
                target = target / "index.html"
            target = pathlib.Path(posixpath.normpath(str(target)))
            if not target.exists():
                broken.append((str(page.relative_to(site)), link))
                continue
            if url.fragment and target.suffix == ".html":
                ids = parsed.setdefault(target, _parse(target)).ids
                if urllib.parse.unquote(url.fragment) not in ids:
                    broken.append((str(page.relative_to(site)), link))
    return broken


def test_every_internal_link_resolves(site):
    assert broken_links(site) == []


def test_the_link_checker_sees_a_broken_link(site, tmp_path):
    page = tmp_path / "index.html"
    page.write_text('<a href="missing/">x</a><a href="#here">y</a><p id="there"></p>'
                    '<a href="https://example.org/">z</a>')
    assert broken_links(tmp_path) == [("index.html", "missing/"), ("index.html", "#here")]


# -- generated pages --------------------------------------------------------------------------

def test_coverage_tables_come_from_the_registry(site):
    text = page_text(site, "plain-numpy")
    for ufunc in UFUNCS:
        assert f"<code>{ufunc.__name__}</code>" in text, ufunc
    for name in ("logsumexp", "solve_triangular", "odeint", "fftconvolve"):
        assert f"<code>{name}</code>" in text
    assert "<code>scipy.stats.rv_discrete.ppf</code>" in text      # a named failure


def test_coverage_follows_a_new_registration():
    @xform.implements(np.i0)
    def i0(x):
        return x
    try:
        assert "`i0`" in site_hook.coverage_markdown().split("### SciPy")[0]
    finally:
        from xform.numpy import FUNCTIONS
        del FUNCTIONS[np.i0]
    assert "`i0`" not in site_hook.coverage_markdown().split("### SciPy")[0]


def test_notebooks_are_rendered_with_their_outputs(site):
    for path in site_hook.notebook_paths():
        notebook = nbformat.read(path, as_version=4)
        text = visible_text(site, f"notebooks/{path.stem}")
        streams = [o.text for c in notebook.cells if c.cell_type == "code"
                   for o in c.get("outputs", []) if o.output_type == "stream"]
        images = sum("image/png" in o.get("data", {}) for c in notebook.cells
                     if c.cell_type == "code" for o in c.get("outputs", []))
        assert streams or images, f"{path.name} is committed without outputs"
        for stream in streams:
            line = next((ln for ln in stream.splitlines() if ln.strip()), None)
            if line:
                assert line.strip() in text, (path.name, line)
        html_text = page_text(site, f"notebooks/{path.stem}")
        assert html_text.count("data:image/png;base64,") >= images


def test_every_example_has_a_page_with_its_source(site):
    assert site_hook.example_paths()
    for path in site_hook.example_paths():
        text = visible_text(site, f"examples/{path.stem}")
        source_lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
        assert all(line in text for line in source_lines), f"{path.name}: source incomplete"
        title = site_hook.example_docstring(path).partition("\n")[0].rstrip(".")
        assert title in text
        assert f'href="{path.stem}/"' in page_text(site, "examples")
        assert "What it prints" in text, f"{path.name}: no recorded output on its page"


def test_every_example_has_its_output_recorded():
    """examples/OUTPUTS.md (`python examples/_outputs.py`) holds what each example prints at
    its real size, which its page shows: an example that runs past the script's time limit,
    or fails, is missing there."""
    recorded = site_hook.example_outputs()
    assert set(recorded) == {path.stem for path in site_hook.example_paths()}
    assert all(recorded.values())


def test_included_files_are_on_the_site(site):
    results = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    first_row = next(line for line in results.splitlines() if line.startswith("| sum_1000"))
    assert first_row.split("|")[2].strip() in visible_text(site, "performance")
    architecture = (DOCS / "ARCHITECTURE.md").read_text(encoding="utf-8")
    for heading in re.findall(r"^## (.+)$", architecture, re.MULTILINE):
        assert heading.replace("`", "") in visible_text(site, "ARCHITECTURE")


def test_section_inclusion_fails_on_a_missing_heading():
    with pytest.raises(ValueError, match="no heading"):
        site_hook.section("# a\n## b\ntext\n", "c")
    assert site_hook.section("# a\n## b\ntext\n### c\nmore\n## d\n", "b") == \
        "text\n### c\nmore\n"
    assert site_hook.section("# a\n## b\ntext\n### c\nmore\n", "b", subsections=False) == \
        "text\n"


def test_repository_links_point_at_site_pages():
    rewritten = site_hook.rewrite_links(
        "[nb](notebooks/02_composing_transforms.ipynb) [arch](docs/ARCHITECTURE.md#layers) "
        "[test](tests/test_api.py) [web](https://numpy.org)", "README.md", "guide/page.md")
    assert rewritten == ("[nb](../notebooks/02_composing_transforms.md) "
                         "[arch](../ARCHITECTURE.md#layers) test [web](https://numpy.org)")


# -- the hand-written guides' code runs -------------------------------------------------------

GUIDES = sorted(p for p in DOCS.glob("*.md") if "```python" in p.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", GUIDES, ids=lambda p: p.name)
def test_guide_code_runs(path):
    namespace = {}
    for block in re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
        # a block inside a tab (`=== "xform"`) is indented
        exec(compile(textwrap.dedent(block), str(path), "exec"), namespace)


# -- directives -------------------------------------------------------------------------------

@pytest.mark.parametrize("path", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_every_directive_expands(path):
    text = path.read_text(encoding="utf-8")
    expanded = site_hook.expand_directives(text, path.name)
    assert "<!-- xform:" not in expanded
    for kind, target in re.findall(r"<!-- xform:(\S+)\s*(.*?)\s*-->", text):
        if kind.startswith("include"):
            assert len(expanded) > len(text), f"{path.name}: {target} included nothing"


def test_a_malformed_directive_raises():
    with pytest.raises(ValueError, match="unknown directive"):
        site_hook.expand_directives("<!-- xform:inclde README.md -->\n", "page.md")
    with pytest.raises(ValueError, match="no heading"):
        site_hook.expand_directives("<!-- xform:include README.md#No such heading -->\n", "p.md")


def test_doctest_blocks_become_fenced_code():
    spec = importlib.util.spec_from_file_location("griffe_doctest",
                                                  DOCS / "hooks" / "griffe_doctest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = "Doubles.\n\n>>> f(1)\n2\n\nMore.\n    >>> g()\n    3"
    assert module.fence_doctests(text) == (
        "Doubles.\n\n```pycon\n>>> f(1)\n2\n```\n\nMore.\n    ```pycon\n    >>> g()\n    3\n"
        "    ```")


# -- the README: for users, short, its commands the ones CI runs -------------------------------

README = ROOT / "README.md"


def test_readme_code_runs():
    for block in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        exec(compile(block, str(README), "exec"), {})


def test_readme_is_short():
    words = len(re.sub(r"```.*?```", "", README.read_text(encoding="utf-8"), flags=re.S).split())
    assert words <= 1500, f"README.md has {words} words outside code"


def test_ci_runs_exactly_the_readme_commands():
    """.ci/run reads its commands from the README's set-up block; the block is the two
    commands: a user install with the tour, then the test extra with the suite."""
    text = README.read_text(encoding="utf-8")
    block = re.search(r"^## Set up.*?```bash\n(.*?)```", text, re.S | re.M).group(1)
    assert block.splitlines() == ['pip install -e . && python -m xform.tour',
                                  'pip install -e ".[test]" && python -m pytest']
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    extract = re.search(r'commands="\$\((awk .*?)\)"', script, re.S).group(1)
    run = subprocess.run(["bash", "-c", extract], cwd=ROOT, capture_output=True, text=True)
    assert run.stdout == block
    assert "set -euo pipefail" in script and 'bash -c "$command"' in script
