"""The layers of the code, as docs/architecture.md states them, hold in the code.

* every import (top-level or inside a function) of a module goes to its own layer or one
  below, never above: the table is read from the ```layers block of docs/architecture.md;
* no import circle between modules;
* the core never imports streamlit; ui/'s shared modules do not import a page's package;
* no file in aflite_core/ or ui/ is over 800 lines unless its first lines say why.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ARCHITECTURE = REPO / "docs" / "architecture.md"
MAX_LINES = 800
#: A long file's first lines must hold this phrase and the reason.
LONG_FILE_MARK = "over 800 lines because"



@functools.cache
def _tree(source: str) -> ast.Module:
    """``ast.parse(source)``, once per source text: the checks below walk every module of
    the repository, each of them (read only)."""
    return ast.parse(source)

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    found = {}
    for pattern in ("aflite_core/**/*.py", "ui/**/*.py", "app_pages/*.py", "app.py",
                    "serve.py"):
        for path in REPO.glob(pattern):
            found[_module_name(path)] = path
    return found


SOURCES = _sources()


def _face(path: Path) -> dict[str, str]:
    """A package's face (its ``__init__.py``'s ``_FACE`` and ``_NAMESPACES``, names resolved
    on first use): public name -> the module of the package that defines it."""
    out: dict[str, str] = {}
    for node in _tree(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id == "_FACE":
                out.update(ast.literal_eval(node.value))
            if isinstance(target, ast.Name) and target.id == "_NAMESPACES":
                out.update({m: m for m in ast.literal_eval(node.value)})
    return out


@functools.cache
def faces() -> dict[str, dict[str, str]]:
    """Package -> its face, for every package of the repository that has one (made on first
    use, not when the file is collected: every xdist worker collects it)."""
    return {name: face for name, path in SOURCES.items() if path.name == "__init__.py"
            and (face := _face(path))}


def _imports(name: str, path: Path) -> set[str]:
    """The repository modules ``name`` imports (anywhere in the file)."""
    tree = _tree(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base in faces() and not name.startswith(base + "."):
                # through a face: to the modules that define the names (the face itself
                # imports nothing until a name is used)
                face = faces()[base]
                targets = [f"{base}.{face.get(a.name, a.name)}" for a in node.names]
            else:
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in SOURCES:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


@functools.cache
def edges() -> dict[str, set[str]]:
    """Module -> the repository modules it imports (made on first use, as :func:`faces`)."""
    return {name: _imports(name, path) for name, path in SOURCES.items()}


def _layers() -> list[tuple[int, str, list[str]]]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = re.search(r"```layers\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no ```layers block"
    rows = []
    for line in block.group(1).splitlines():
        match = re.match(r"\s*(\d+)\s+(\S+)\s+(.+)$", line)
        if match:
            rows.append((int(match[1]), match[2], match[3].split()))
    return rows


def _layer_of() -> dict[str, tuple[int, str]]:
    """Module -> (layer number, layer name); the most specific path of the table wins."""
    prefixes = []
    for number, layer, paths in _layers():
        for item in paths:
            exact = item.endswith("/__init__.py") or item.endswith(".py")
            prefix = item.removesuffix("/__init__.py").removesuffix("/").removesuffix(".py")
            prefixes.append((prefix.replace("/", "."), exact, (number, layer)))
    prefixes.sort(key=lambda p: -len(p[0]))
    out = {}
    for name in SOURCES:
        for prefix, exact, where in prefixes:
            if name == prefix or (not exact and name.startswith(prefix + ".")):
                out[name] = where
                break
    return out


def test_every_module_has_a_layer_in_the_architecture_doc():
    placed = _layer_of()
    missing = sorted(set(SOURCES) - set(placed))
    assert not missing, f"modules in no layer of docs/architecture.md: {missing}"


def test_no_module_imports_a_layer_above_its_own():
    placed = _layer_of()
    upward = [
        f"{a} (layer {placed[a][0]} {placed[a][1]}) imports {b} "
        f"(layer {placed[b][0]} {placed[b][1]})"
        for a, targets in edges().items() for b in targets
        if a in placed and b in placed and placed[b][0] > placed[a][0]
    ]
    assert not upward, "\n".join(sorted(upward))


def test_the_layer_table_is_checked_against_a_planted_upward_import():
    """The check above can fail: a low module importing a high one is caught."""
    placed = _layer_of()
    assert placed["aflite_core.io._readers"][0] < placed["aflite_core.report.html"][0]
    assert placed["aflite_core.runs.folder"][0] < placed["aflite_core.report._updates"][0]
    assert placed["ui.cache"][0] < placed["ui.explore.view"][0] < placed["app_pages.explore"][0]


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    assert _cycles(edges()) == []


def test_the_circle_finder_finds_a_planted_circle():
    planted = {**edges(), "aflite_core.runs.folder": edges()["aflite_core.runs.folder"]
               | {"aflite_core.report.html"}}
    assert any("aflite_core.runs.folder" in c for c in _cycles(planted))


def test_the_core_never_imports_streamlit():
    offenders = []
    for name, path in SOURCES.items():
        if name.startswith("aflite_core"):
            tree = _tree(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                        else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(m.split(".")[0] == "streamlit" for m in mods):
                    offenders.append(name)
    assert offenders == []


def test_a_pages_code_is_found_from_the_pages_name():
    """app_pages/<page>.py draws from ui/<page>/; ui/'s shared modules import no page."""
    for page in (REPO / "app_pages").glob("*.py"):
        assert (REPO / "ui" / page.stem / "view.py").is_file(), page.stem
    shared = [n for n in SOURCES if n.count(".") == 1 and n.startswith("ui.")
              and n != "ui.session"]
    pages = {f"ui.{p.stem}" for p in (REPO / "app_pages").glob("*.py")}
    leaks = [f"{a} imports {b}" for a in shared for b in edges()[a]
             if b.rsplit(".", 1)[0] in pages]
    assert leaks == []


def test_no_page_package_imports_another():
    """What two pages share lives below both (ui/panels/, ui/url_state.py): Explore and the
    Report once imported each other's modules, a circle at folder level."""
    pages = {f"ui.{p.stem}" for p in (REPO / "app_pages").glob("*.py")}

    def page_of(module: str) -> str | None:
        head = ".".join(module.split(".")[:2])
        return head if head in pages else None

    crossings = sorted(f"{a} imports {b}" for a in SOURCES for b in edges()[a]
                       if page_of(a) and page_of(b) and page_of(a) != page_of(b))
    assert crossings == []
    # ...and the check sees one when it is there
    planted = {"ui.explore.view": {"ui.report.view"}}
    assert [a for a, bs in planted.items() for b in bs if page_of(a) != page_of(b)]


def test_no_file_over_800_lines_unless_it_says_why():
    long = []
    for name, path in sorted(SOURCES.items()):
        if not name.startswith(("aflite_core", "ui")):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MAX_LINES and LONG_FILE_MARK not in " ".join(lines[:6]).lower():
            long.append(f"{path.relative_to(REPO)}: {len(lines)} lines")
    assert long == [], f"over {MAX_LINES} lines, first lines not saying why: {long}"


#: The subpackages of ``aflite_core`` with a public face (issue 61): from outside one, only
#: ``from aflite_core.<package> import <name of its __all__>``.
FACED = ("io", "represent", "cues", "filter", "measures", "runs", "report", "commands")


def _past_faces(importer: str, source: str) -> list[str]:
    """The imports of ``source`` (the module ``importer``) that reach past a package's face:
    into one of its modules, or a name the face does not list (a private one included)."""
    found = []
    for node in ast.walk(_tree(source)):
        if isinstance(node, ast.Import):
            modules = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [(node.module, [a.name for a in node.names])]
        else:
            continue
        for module, names in modules:
            parts = module.split(".")
            if parts[0] != "aflite_core":
                continue
            if len(parts) == 1 and names:  # from aflite_core import io: the package itself
                parts, names = [*parts, names[0]], None
            if len(parts) < 2 or parts[1] not in FACED:
                continue
            package = ".".join(parts[:2])
            if importer == package or importer.startswith(package + "."):
                continue  # inside the package: its own modules are its business
            if len(parts) > 2:
                found.append(f"{importer}:{node.lineno} imports {module} (past the face of "
                             f"{package})")
            for name in names or ():
                if name not in faces().get(package, {}) or name.startswith("_"):
                    found.append(f"{importer}:{node.lineno} imports {name} from {package}, "
                                 "which its face does not list")
    return found


def test_every_package_has_a_face_listing_what_is_used_from_outside():
    for package in FACED:
        path = REPO / "aflite_core" / package / "__init__.py"
        text = path.read_text(encoding="utf-8")
        assert "__all__" in text and "__getattr__, __dir__ = lazy_face(" in text, package
        face = faces().get(f"aflite_core.{package}", {})
        assert face, f"aflite_core.{package} lists no public name"
        for name, module in face.items():
            assert (REPO / "aflite_core" / package / f"{module}.py").is_file(), (package, name)


def _public_modules_off_the_face(package: str, namespaces: set[str]) -> list[str]:
    """The modules of ``aflite_core.<package>`` named without a leading underscore that its
    face does not list as a namespace: a module used only inside its package is ``_name.py``."""
    folder = REPO / "aflite_core" / package
    return sorted(f"aflite_core/{package}/{path.name}" for path in folder.glob("*.py")
                  if not path.stem.startswith("_") and path.stem not in namespaces)


def test_a_packages_modules_are_private_unless_its_face_lists_them():
    offenders = []
    for package in FACED:
        face = faces()[f"aflite_core.{package}"]
        offenders += _public_modules_off_the_face(
            package, {name for name, module in face.items() if name == module})
    assert not offenders, ("public modules no face lists (rename to _name.py or add to "
                           "_NAMESPACES): " + ", ".join(offenders))
    # the check can fail: the runs package's face without its "views" namespace
    runs = {name for name, module in faces()["aflite_core.runs"].items() if name == module}
    assert _public_modules_off_the_face("runs", runs - {"views"}) == ["aflite_core/runs/views.py"]


def test_from_outside_a_package_only_its_face_is_imported():
    """From the rest of aflite_core, ui/, the pages and app.py: ``from aflite_core.runs import
    load_run``, never ``from aflite_core.runs.folder import ...`` nor a private name."""
    offenders = [line for name, path in SOURCES.items()
                 for line in _past_faces(name, path.read_text(encoding="utf-8"))]
    assert not offenders, "\n".join(sorted(offenders))


def test_the_face_check_finds_planted_imports_past_a_face():
    planted = ("from aflite_core.runs.folder import load_run\n"
               "import aflite_core.io._readers\n"
               "from aflite_core.runs import _private_helper\n"
               "from aflite_core.runs import load_run\n")
    found = _past_faces("ui.planted", planted)
    assert len(found) == 3, found
    assert _past_faces("aflite_core.runs.views", planted.splitlines()[0]) == []  # inside


def _private_imports(importer: str, source: str) -> list[str]:
    """Private names (``_name``) ``source`` imports from another module of the repository: a
    helper two modules share is a public name of its package (a private module of one's own
    package, ``from aflite_core.measures import _umap_layout``, is fine)."""
    found = []
    for node in ast.walk(_tree(source)):
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                and node.module.split(".")[0] in ("aflite_core", "ui")):
            continue
        for alias in node.names:
            name = alias.name
            if not name.startswith("_") or name.startswith("__"):
                continue
            if f"{node.module}.{name}" in SOURCES and importer.startswith(node.module + "."):
                continue  # a private module of the importer's own package
            found.append(f"{importer}:{node.lineno} imports {name} from {node.module}")
    return found


def test_no_private_name_is_imported_from_another_module():
    offenders = [line for name, path in SOURCES.items()
                 for line in _private_imports(name, path.read_text(encoding="utf-8"))]
    assert not offenders, "\n".join(sorted(offenders))
    planted = "from aflite_core.filter._rounds import _check_X\n"
    assert _private_imports("aflite_core.filter._aflite", planted)  # the check can fail


def _uncommented_inner_imports(name: str, source: str) -> list[str]:
    """Imports inside a function of ``source`` with no comment saying why (on the statement's
    lines or the line above): imports sit at the top of a module unless one says why (an
    optional dependency, or what the import costs when the module is loaded)."""
    lines = source.splitlines()
    found = []
    for function in ast.walk(_tree(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            own = lines[node.lineno - 1:node.end_lineno]
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            if not (any("#" in line for line in own) or above.startswith("#")):
                found.append(f"{name}:{node.lineno}")
    return sorted(set(found))


def test_imports_inside_functions_say_why():
    offenders = [line for name, path in SOURCES.items()
                 for line in _uncommented_inner_imports(name, path.read_text(encoding="utf-8"))]
    assert not offenders, "imports inside functions with no reason given: " + ", ".join(offenders)
    planted = ("import os\n\n\ndef f():\n    import json\n    # lazy: +80 ms to import\n"
               "    import pandas\n    import numpy  # optional dependency\n")
    assert _uncommented_inner_imports("planted", planted) == ["planted:5"]
