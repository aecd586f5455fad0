"""The site's generated pages (an MkDocs hook): the examples gallery, the notebooks with their
outputs, the API reference, the numpy/SciPy coverage tables read from xform's registry, and
the inclusion of README.md sections and other repository files, so that one concept keeps
one place and the site cannot go stale.

Directives, each alone on a line of a page's markdown:
  <!-- xform:include PATH -->               a repository file (links rewritten to site pages)
  <!-- xform:include PATH#HEADING -->       one section of it, subsections included
  <!-- xform:include-only PATH#HEADING -->  one section up to its first subsection
  <!-- xform:coverage -->                   the registry's numpy and SciPy tables
"""
from __future__ import annotations

import ast
import base64
import html
import importlib
import inspect
import posixpath
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# The modules whose public names make the API reference, each one page, in the order a user
# needs them: the package, pytrees, testing, extending, then the IR's passes.
REFERENCE_MODULES = ("xform", "xform.tree", "xform.testing", "xform.extend", "xform.passes")

# The package's page, by use. A public name in no group lands in the last one, so a new name
# is never left out (tests/test_docs_site.py checks every name is on the page).
REFERENCE_GROUPS = (
    ("Transforms", ("grad", "value_and_grad", "jvp", "vjp", "linearize", "vmap", "jacfwd",
                    "jacrev", "hessian", "jit", "checkpoint", "remat", "checkpoint_name",
                    "checkpoint_policies", "linear_transpose", "eval_shape", "closure_convert",
                    "make_graph")),
    ("Control flow and maps", ("cond", "switch", "while_loop", "fori_loop", "scan", "map",
                               "associative_scan", "threaded_map", "stop_gradient", "psum",
                               "pmean", "pmax", "pmin", "all_gather", "index_add")),
    ("Pytrees", ("tree", "tree_util")),
    ("Configuration and the cache", ("config", "cache_info", "clear_cache", "set_cache_size")),
    ("Errors and warnings", ("XformError", "ConcretizationError", "ShapeError",
                             "TypeCheckError", "TreeMismatchError", "UnsupportedError",
                             "MissingRuleError", "SideEffectError", "StagingRecursionError",
                             "OutOfMemoryError", "RuleError", "RegistrationError",
                             "GraphCheckError", "RestagingWarning")),
    ("Extending: derivatives and primitives", ("custom_jvp", "custom_vjp", "function",
                                                "non_differentiable", "overlay", "implements",
                                                "context", "Primitive")),
    ("The IR", ()),
)

_DIRECTIVE = re.compile(r"^<!-- xform:(\S+)\s*(.*?)\s*-->[ \t]*$", re.MULTILINE)
_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")


# -- which repository file each site page shows ----------------------------------------------

def example_paths() -> list[Path]:
    return sorted(p for p in (REPO / "examples").glob("*.py") if not p.name.startswith("_"))


def notebook_paths() -> list[Path]:
    return sorted((REPO / "notebooks").glob("*.ipynb"))


def page_of(repo_path: str) -> str | None:
    """The site page (docs-relative) that shows a repository file, or None."""
    path = posixpath.normpath(repo_path)
    fixed = {"README.md": "index.md", "bench/RESULTS.md": "performance.md",
             "examples/README.md": "examples/index.md",
             "notebooks/README.md": "notebooks/index.md"}
    if path in fixed:
        return fixed[path]
    folder, name = posixpath.split(path)
    stem, suffix = posixpath.splitext(name)
    if folder == "docs" and suffix == ".md":
        return name
    if folder == "notebooks" and suffix == ".ipynb":
        return f"notebooks/{stem}.md"
    if folder == "examples" and suffix == ".py":
        return f"examples/{stem}.md"
    return None


def rewrite_links(markdown: str, source: str, page: str) -> str:
    """Links of `markdown` (read from repository file `source`) as seen from site `page`:
    a repository file the site shows becomes a link to its page, any other repository file
    plain text (the site has no copy of it); web links and anchors stay."""
    source_dir = posixpath.dirname(source)

    def fix(match):
        text, target = match.groups()
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return match.group(0)
        path, _, anchor = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(source_dir, path))
        shown = page_of(repo_path)
        if shown is None and repo_path.startswith("docs/"):
            shown = posixpath.relpath(repo_path, "docs")    # a page or asset of the site
        if shown is None:
            return text
        relative = posixpath.relpath(shown, posixpath.dirname(page) or ".")
        return f"[{text}]({relative}{'#' + anchor if anchor else ''})"

    out, in_fence = [], False
    for line in markdown.splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        out.append(line if in_fence else _LINK.sub(fix, line))
    return "".join(out)


# -- including repository files --------------------------------------------------------------

def section(markdown: str, heading: str, subsections: bool = True) -> str:
    """The body of the section titled `heading` (without its heading line): up to the next
    heading of the same or a higher level, or of any level when not `subsections`."""
    lines, level, body, in_fence = markdown.splitlines(keepends=True), None, [], False
    for line in lines:
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if level is None:
            if match and match.group(2) == heading:
                level = len(match.group(1))
            continue
        if match and (len(match.group(1)) <= level or not subsections):
            break
        body.append(line)
    if level is None:
        raise ValueError(f"no heading {heading!r}")
    return "".join(body)


def shift_headings(markdown: str, by: int) -> str:
    """Headings moved `by` levels (an included section sits under the page's own title)."""
    out, in_fence = [], False
    for line in markdown.splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match:
            level = min(6, max(1, len(match.group(1)) + by))
            line = f"{'#' * level} {match.group(2)}\n"
        out.append(line)
    return "".join(out)


def include(target: str, page: str, subsections: bool = True) -> str:
    path, _, heading = target.partition("#")
    text = (REPO / path).read_text(encoding="utf-8")
    if heading:
        text = section(text, heading, subsections)
        # the section's own subsections keep their level relative to the including page
        levels = [len(m.group(1)) for m in map(_HEADING.match, text.splitlines()) if m]
        if levels:
            text = shift_headings(text, 2 - min(levels))
    else:
        text = _drop_title(text)
    return rewrite_links(text, path, page)


def _drop_title(text: str) -> str:
    """A whole file under the page's own title: its `# Title` line goes."""
    lines = text.splitlines(keepends=True)
    if lines and lines[0].startswith("# "):
        return "".join(lines[1:])
    return text


# -- the coverage tables, from the registry --------------------------------------------------

def coverage_markdown() -> str:
    """Every numpy and SciPy callable xform stages, read from its tables at build time."""
    import numpy as np

    import xform  # noqa: F401  (registers the tables)
    from xform.numpy import FUNCTIONS, UFUNCS, numpy_name
    from xform.numpy import stand_ins
    for name in ("special", "stats", "linalg", "signal", "integrate", "fft", "optimize",
                 "interpolate"):
        importlib.import_module(f"scipy.{name}")
    stand_ins.install_pending()
    from xform.scipy import fft as sfft, integrate, linalg, signal
    from xform.scipy import stats

    groups: dict[str, set] = {}

    def add(full_name, name=None):
        module, _, last = full_name.rpartition(".")
        if name is not None:
            module = full_name
        groups.setdefault(module, set()).add(name or last)

    for ufunc in UFUNCS:
        add(numpy_name(ufunc))
    for key in FUNCTIONS:
        if isinstance(key, tuple):          # a ufunc method, (np.add, "reduce")
            add(f"{numpy_name(key[0])}.{key[1]}")
        elif isinstance(key, str):          # array operators and methods: "getitem", "astype"
            add("numpy.ndarray", _ARRAY_OPERATIONS.get(key, key))
        else:
            add(_numpy_top_level(key) or numpy_name(key))
    refused = set()
    for swap in stand_ins._swaps:
        full = _swap_name(swap)
        if full is None or not full.startswith(("numpy", "scipy")):
            continue                        # a user's overlay
        kind = getattr(_replacement(swap), "__qualname__", "")
        if kind.startswith("_refuse."):     # xform.scipy.stats._refuse
            refused.add(full)
        elif full.endswith(".__call__"):    # a concrete interpolator at traced points
            continue
        else:
            add(full.removesuffix(".__init__"))   # a class of traced data: its name
    for name in sfft.SAME_AS_NUMPY:
        add(f"scipy.fft.{name}")
    for name in integrate.STAND_INS:
        add(f"scipy.integrate.{name}")
    for name in linalg.STAND_INS:
        add(f"scipy.linalg.{name}")
    for name in signal.STAND_INS:
        add(f"scipy.signal.{name}")

    numpy_rows = sorted(m for m in groups if m.startswith("numpy"))
    scipy_rows = sorted(m for m in groups if m.startswith("scipy"))
    total = sum(len(groups[m]) for m in numpy_rows)
    out = [f"### numpy: {total} callables\n",
           "Generated from `xform.numpy.UFUNCS` and `FUNCTIONS` (and the stand-ins for "
           "numpy's builtins such as `np.array` of a list) when this site was built.\n",
           "| namespace | staged on traced values |", "|---|---|"]
    out += [f"| `{m}` | {_names(groups[m])} |" for m in numpy_rows]
    out += ["", f"### SciPy: {sum(len(groups[m]) for m in scipy_rows)} callables\n",
            "Generated from the stand-in tables of `xform/scipy/` (each covers the SciPy "
            "module once you import it; any import style).\n",
            "| namespace | staged on traced values |", "|---|---|"]
    out += [f"| `{m}` | {_names(groups[m])} |" for m in scipy_rows]
    continuous = sorted(_dist_name(kind) for kind in stats.CONTINUOUS)
    discrete = sorted(_dist_name(kind) for kind in stats.DISCRETE)
    out += ["", "`scipy.stats` distributions (`logpdf`, `pdf`, `logcdf`, `cdf`, `logsf`, `sf`; "
            "frozen too): " + ", ".join(f"`{n}`" for n in continuous) + "; discrete (`logpmf`, "
            "`pmf`, `logcdf`, `cdf`, `logsf`, `sf`): " + ", ".join(f"`{n}`" for n in discrete)
            + "; `multivariate_normal` and `dirichlet` (`logpdf`, `pdf`).", "",
            "`scipy.optimize`'s solvers run SciPy's own solver and are differentiated by the "
            "implicit function theorem; `scipy.integrate`'s quadratures under the integral and "
            "at the limits; `scipy.interpolate`'s interpolators (and `PPoly`, `BSpline`, "
            "`interp1d`, `RegularGridInterpolator` objects of concrete data called at traced "
            "points) in their data and query points. The README's SciPy table says what each "
            "supports.", ""]
    if refused:
        out += ["### Named failures\n",
                "A SciPy function with no xform version that needs concrete numbers raises an "
                "xform error naming it at your line when called on traced values; so do these "
                "methods: "
                + ", ".join(f"`{n}`" for n in sorted(refused)) + ".", ""]
    return "\n".join(out) + "\n"


def _replacement(swap):
    """What a stand-in runs on traced arguments (held by its route's closure)."""
    if hasattr(swap, "stand_in"):
        route = _closure(swap.stand_in)["route"]
    else:
        route = next(c for c in swap.trampoline.co_consts if getattr(c, "__name__", "") == "route")
    return _closure(route)["replacement"]


def _closure(function) -> dict:
    cells = function.__closure__ or ()
    return dict(zip(function.__code__.co_freevars, (cell.cell_contents for cell in cells)))


def _numpy_top_level(function) -> str | None:
    """"numpy.hstack" for numpy.lib.shape_base.hstack: where users call it from."""
    import numpy as np
    name = getattr(function, "__name__", None)
    for namespace in (np, np.linalg, np.fft):
        public = getattr(namespace, name, None) if name else None
        if public is not None and function in (public, getattr(public, "_implementation", 0)):
            return f"{namespace.__name__}.{name}"
    return None


def _swap_name(swap) -> str | None:
    """The public name of a stood-in callable: "numpy.full", "scipy.stats.rv_continuous.pdf"."""
    if hasattr(swap, "owner"):                       # a builtin replaced as an attribute
        owner = swap.owner
        if getattr(owner, "__name__", "") == "AxisConcatenator" or \
                type(owner).__name__ == "AxisConcatenator":
            return "numpy.r_"
        return f"{getattr(owner, '__name__', type(owner).__name__)}.{swap.name}"
    function = swap.target
    module, qualname = getattr(function, "__module__", "") or "", function.__qualname__
    if module.startswith("scipy._lib."):     # SciPy's internals its functions call on tracers
        return None
    if qualname == "AxisConcatenator.__getitem__":
        return "numpy.r_"
    if module.split(".")[0] == "numpy" and _numpy_top_level(function):
        return _numpy_top_level(function)
    public = [part for part in module.split(".") if not part.startswith("_")]
    return ".".join(public[:2] + [qualname])


# How the protocol's string keys read as array syntax
_ARRAY_OPERATIONS = {"getitem": "x[i]", "setitem": "x[i] = v", "inplace": "x += v",
                     "ufunc out": "ufunc(..., out=x)", "assign": "x[...] = v"}


def _dist_name(kind) -> str:
    return kind.__name__.removesuffix("_gen")


def _names(names) -> str:
    return ", ".join(f"`{n}`" for n in sorted(names, key=str.lower))


# -- notebooks, with their saved outputs -----------------------------------------------------

def notebook_markdown(path: Path) -> str:
    """A notebook as markdown: its cells and the outputs it was committed with."""
    import nbformat
    notebook = nbformat.read(path, as_version=4)
    page = f"notebooks/{path.stem}.md"
    out, title = [], notebook_title(path)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            source = cell.source
            if not any(o.startswith("# ") for o in out):     # the first title, numbered
                source = re.sub(r"^# .*$", lambda m: f"# {title}", source, count=1,
                                flags=re.M)
            out.append(rewrite_links(source, f"notebooks/{path.name}", page))
        elif cell.cell_type == "code":
            out.append(f"```python\n{cell.source}\n```")
            out += [_output(o) for o in cell.get("outputs", [])]
    if not any(line.startswith("# ") for line in "\n".join(out).splitlines()):
        out.insert(0, f"# {path.stem}")
    return "\n\n".join(o for o in out if o) + "\n"


def _output(output) -> str:
    kind = output.output_type
    if kind == "stream":
        return _text_block(output.text)
    if kind == "error":
        return _text_block("\n".join(output.traceback))
    data = output.get("data", {})
    if "image/png" in data:
        png = data["image/png"].replace("\n", "")
        base64.b64decode(png, validate=True)
        return f'<img class="nb-output" alt="output" src="data:image/png;base64,{png}">'
    if "text/html" in data:
        body = data["text/html"]
        body = "".join(body) if isinstance(body, list) else body
        # one raw HTML block: blank lines would end it early
        body = "\n".join(line for line in body.splitlines() if line.strip())
        return f'<div class="nb-output" markdown="0">\n{body}\n</div>'
    if "text/plain" in data:
        return _text_block(data["text/plain"])
    return ""


def _text_block(text: str) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", text).rstrip("\n")   # ANSI colours of tracebacks
    return f'```text\n{text}\n```' if text else ""


# -- the examples gallery ---------------------------------------------------------------------

def example_docstring(path: Path) -> str:
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not docstring:
        raise ValueError(f"{path}: an example needs a module docstring (its page's text)")
    return docstring


def example_title(path: Path) -> str:
    """The docstring's first sentence (which may wrap over several lines)."""
    return _first_sentence(example_docstring(path).split("\n\n")[0])


def _first_sentence(paragraph: str) -> str:
    text = " ".join(paragraph.split())
    return re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0].rstrip(".")


def nav_label(title: str) -> str:
    """A title as the navigation shows it: plain text, so no markdown backticks."""
    return title.replace("`", "")


def notebook_title(path: Path) -> str:
    """"N. heading": the number from the file name (`04_...`), the notebook's first `# `
    heading (its own number, if it has one, dropped), or its file name."""
    import nbformat
    number = re.match(r"0*(\d+)_", path.name)
    prefix = f"{number.group(1)}. " if number else ""
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return prefix + re.sub(r"^\d+\.\s*", "", line[2:].strip())
    return prefix + path.stem


def example_markdown(path: Path) -> str:
    docstring = example_docstring(path)
    first, _, rest = docstring.partition("\n\n")
    title = example_title(path)
    opening = " ".join(first.split())[len(title):].lstrip(". ").strip()
    body = "\n\n".join(part for part in (opening, rest.strip()) if part)
    source = path.read_text(encoding="utf-8")
    out = [f"# {title}\n", body, ""]
    output = example_outputs().get(path.stem)
    if output is not None:
        out += ["## What it prints\n",
                f"`python examples/{path.name}`, at its real size (recorded by "
                "`python examples/_outputs.py` in examples/OUTPUTS.md):\n",
                f"```text\n{output}\n```\n"]
    speed = example_speeds().get(path.stem)
    if speed is not None:
        out += ["## How fast\n", _speed_sentence(path.stem, speed) + "\n"]
    out += ["## The program\n",
            f"Run it: `python examples/{path.name}` (the test suite runs it at a small size, "
            f"`tests/test_examples.py`).\n",
            f'```python title="examples/{path.name}"\n{source}```\n']
    return "\n".join(out)


def example_outputs() -> dict[str, str]:
    """example -> what it printed at its real size, from examples/OUTPUTS.md (written by
    `python examples/_outputs.py`); empty when that file is absent."""
    path = REPO / "examples" / "OUTPUTS.md"
    if not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    return {name: body.strip() for name, body in
            re.findall(r"^## (\w+)\n\n```text\n(.*?)```", text, re.S | re.M)}


_RESULTS_EXAMPLES = "## The examples gallery at real sizes"


def example_speeds() -> dict[str, list[str]]:
    """example -> [xform first call, autograd first call, xform per call, autograd per call,
    ratio], the gallery table of bench/RESULTS.md (facts in one place: there)."""
    text = (REPO / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    if _RESULTS_EXAMPLES not in text:
        return {}
    table = text.split(_RESULTS_EXAMPLES, 1)[1]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] and not cells[0].startswith(("example", "---")):
            rows[cells[0]] = cells[1:]
    return rows


def _speed_sentence(name: str, speed: list[str]) -> str:
    xform_first, autograd_first, xform_call, autograd_call, ratio = speed
    cite = "([performance](../performance.md), `python -m bench.examples`)"
    if ratio in ("-", ""):
        return (f"A gradient call takes {xform_call} with xform ({xform_first} on the first "
                f"call); autograd cannot run the program as written {cite}.")
    return (f"A gradient call takes {xform_call} with xform and {autograd_call} with autograd "
            f"running the same source ({ratio}x); first calls {xform_first} and "
            f"{autograd_first} {cite}.")


def gallery_index() -> str:
    """The examples as a gallery: what each does, and a gradient's cost against autograd's
    (bench/RESULTS.md), then examples/README.md (how an example is made and tested)."""
    speeds = example_speeds()
    rows = ["# Examples\n",
            "Complete programs written in plain numpy and SciPy, as their authors would write "
            "them without xform, then differentiated unmodified. Each page shows the program, "
            "what it prints at its real size, and how fast its gradient runs.\n",
            "| example | what it does | a gradient call: xform | autograd, same source |",
            "|---|---|---|---|"]
    for path in example_paths():
        speed = speeds.get(path.stem)
        xform_call = speed[2] if speed else "-"
        autograd_call = ("cannot run it as written" if speed and speed[4] in ("-", "")
                         else f"{speed[3]} ({speed[4]}x slower)" if speed else "-")
        rows.append(f"| [{path.stem}]({path.stem}.md) | {example_title(path)} | {xform_call} "
                    f"| {autograd_call} |")
    rows += ["", "Times are medians at each example's real size, one thread, from "
             "[bench/RESULTS.md](../performance.md) (`OMP_NUM_THREADS=1 python -m "
             "bench.examples --samples 5`); \"-\": not measured there.\n"]
    readme = REPO / "examples" / "README.md"
    if readme.exists():
        text = rewrite_links(readme.read_text(encoding="utf-8"), "examples/README.md",
                             "examples/index.md")
        rows += ["## How the examples are made and tested\n", _drop_title(text).strip() + "\n"]
    return "\n".join(rows)


def notebooks_index() -> str:
    readme = (REPO / "notebooks" / "README.md").read_text(encoding="utf-8")
    return rewrite_links(readme, "notebooks/README.md", "notebooks/index.md")


# -- the API reference ------------------------------------------------------------------------

def public_names(module_name: str) -> list[str]:
    """What a reference module exports: its __all__, or its public callables and classes
    defined in it."""
    module = importlib.import_module(module_name)
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [name for name, value in vars(module).items()
            if not name.startswith("_") and (inspect.isfunction(value) or inspect.isclass(value))
            and getattr(value, "__module__", None) == module_name]


def reference_markdown(module_name: str) -> str:
    module = importlib.import_module(module_name)
    summary = (inspect.getdoc(module) or "").split("\n\n")[0]
    out = [f"# `{module_name}`\n", summary, ""]
    names = public_names(module_name)
    if module_name != "xform":
        out += [_reference_entry(module, module_name, name, level=2) for name in names]
        return "\n".join(out)
    out.append("The package's public names (`xform.__all__`), in the order you need them.\n")
    grouped = {name for _, group in REFERENCE_GROUPS for name in group}
    for title, group in REFERENCE_GROUPS:
        members = [name for name in group if name in names]
        if title == REFERENCE_GROUPS[-1][0]:
            members += [name for name in names if name not in grouped]
        if members:
            out.append(f"## {title}\n")
            out += [_reference_entry(module, module_name, name, level=3) for name in members]
    return "\n".join(out)


def _reference_entry(module, module_name: str, name: str, level: int) -> str:
    import types
    value = getattr(module, name)
    hashes = "#" * level
    if isinstance(value, types.ModuleType):
        return (f"{hashes} `{module_name}.{name}`\n\nThe module "
                f"[`{value.__name__}`]({value.__name__}.md).\n")
    public, documented = f"{module_name}.{name}", documented_path(module_name, name)
    options = f"    options:\n      heading_level: {level}\n"
    if documented != public:
        # Griffe would document the module of the same name: render the object itself
        # under its public name, with an anchor for cross-references to that name.
        return (f"[](){{#{public}}}\n\n::: {documented}\n{options}"
                f"      heading: \"{public}\"\n      toc_label: \"{name}\"\n")
    return f"::: {public}\n{options}"


def documented_path(module_name: str, name: str) -> str:
    """The path Griffe documents public name `module_name.name` by: the name itself, or, when
    the name resolves statically to a submodule of the same name (`xform.passes.cse`,
    `xform.cond` imported from control_flow/cond.py), where the object is defined."""
    import sys
    value = getattr(importlib.import_module(module_name), name)
    defined_in = getattr(value, "__module__", None) or ""
    if not hasattr(value, "__qualname__"):         # a constant: documented where it is named
        return f"{module_name}.{name}"
    if f"{module_name}.{name}" in sys.modules or defined_in.rsplit(".", 1)[-1] == name:
        return f"{defined_in}.{value.__qualname__}"
    return f"{module_name}.{name}"


def reference_index() -> str:
    rows = ["# API reference\n", "Every public name, from its docstring (the examples in them "
            "run with the test suite).\n", "| module | names |", "|---|---|"]
    for module_name in REFERENCE_MODULES:
        rows.append(f"| [`{module_name}`]({module_name}.md) | {len(public_names(module_name))} |")
    return "\n".join(rows) + "\n"


# -- the MkDocs events ------------------------------------------------------------------------

def generated_pages() -> dict[str, str]:
    pages = {"examples/index.md": gallery_index(), "notebooks/index.md": notebooks_index(),
             "reference/index.md": reference_index()}
    for path in example_paths():
        pages[f"examples/{path.stem}.md"] = example_markdown(path)
    for path in notebook_paths():
        pages[f"notebooks/{path.stem}.md"] = notebook_markdown(path)
    for module_name in REFERENCE_MODULES:
        pages[f"reference/{module_name}.md"] = reference_markdown(module_name)
    return pages


def _nav_section(title, index, entries):
    return {title: [index] + [{label: uri} for label, uri in entries]}


def on_config(config):
    """Fill the nav's Examples, Notebooks and API reference sections with their pages."""
    sections = {
        "examples/index.md": [(nav_label(example_title(p)), f"examples/{p.stem}.md")
                              for p in example_paths()],
        "notebooks/index.md": [(nav_label(notebook_title(p)), f"notebooks/{p.stem}.md")
                               for p in notebook_paths()],
        "reference/index.md": [(m, f"reference/{m}.md") for m in REFERENCE_MODULES],
    }
    nav = []
    for item in config["nav"]:
        (title, value), = item.items() if isinstance(item, dict) else ((None, item),)
        if isinstance(value, str) and value in sections:
            nav.append(_nav_section(title, value, sections[value]))
        else:
            nav.append(item)
    config["nav"] = nav
    return config


def on_files(files, config):
    from mkdocs.structure.files import File
    for uri, content in generated_pages().items():
        files.append(File.generated(config, uri, content=content))
    return files


def expand_directives(markdown: str, uri: str) -> str:
    """The page's directives replaced by what they name; a malformed one raises (an HTML
    comment left in place would silently drop the content)."""
    def expand(match):
        kind, target = match.groups()
        if kind == "coverage" and not target:
            return coverage_markdown()
        if kind in ("include", "include-only") and target:
            return include(target, uri, subsections=kind == "include")
        raise ValueError(f"{uri}: unknown directive {match.group(0)!r}")

    markdown = _DIRECTIVE.sub(expand, markdown)
    if "<!-- xform:" in markdown:
        raise ValueError(f"{uri}: a directive not alone on its line")
    return markdown


def on_page_markdown(markdown, page, config, files):
    uri = page.file.src_uri
    markdown = expand_directives(markdown, uri)
    if not page.file.generated_by:
        # a page written in docs/ (ARCHITECTURE.md, ERRORS.md): its repository links
        markdown = rewrite_links(markdown, f"docs/{uri}", uri)
    return markdown
