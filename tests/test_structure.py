"""The package's shape, checked statically (issue: house in order): imports that only
point down (no cycle among the modules of ``app`` and ``dynamics``, late imports inside
functions included), modules and classes of a readable size, and tests that go through
public doors (no test reads or sets an underscore attribute of the app or the engine).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "dynamics")
#: Most lines of a module, and of a class.
MODULE_LINES, CLASS_LINES = 400, 300


def _modules() -> dict[str, Path]:
    """``{dotted name: file}`` of every module of the packages."""
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking_only(node, parents) -> bool:
    return any(isinstance(p, ast.If) and "TYPE_CHECKING" in ast.unparse(p.test)
               for p in parents)


def _imports(name: str, path: Path, modules) -> set[str]:
    """The modules of the packages that ``name`` imports anywhere in its file (late
    imports inside functions included; ``if TYPE_CHECKING:`` blocks left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()

    def visit(node, parents):
        if isinstance(node, ast.Import | ast.ImportFrom) and not _type_checking_only(
                node, parents):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            for t in targets:
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t != name:
                    out.add(t)
        for child in ast.iter_child_nodes(node):
            visit(child, [*parents, node])

    visit(tree, [])
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return comps


def test_no_import_cycle():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_modules_and_classes_are_of_a_readable_size():
    long = []
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MODULE_LINES:
            long.append((name, len(text.splitlines())))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                size = node.end_lineno - node.lineno + 1
                if size > CLASS_LINES:
                    long.append((f"{name}.{node.name}", size))
    assert long == []


def _private_uses(text: str) -> list[str]:
    """``obj._name`` reads and writes, and ``getattr``/``setattr`` of ``"_name"``
    (dunders aside) in a test's source."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            found.append(ast.unparse(node))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)
              and ast.unparse(node.func).rpartition(".")[2] in ("getattr", "setattr",
                                                                 "hasattr", "delattr")):
            names = [a.value for a in node.args if isinstance(a, ast.Constant)
                     and isinstance(a.value, str)]
            found += [f"{ast.unparse(node.func)}(…, {n!r})" for n in names
                      if n.startswith("_") and not n.startswith("__")]
    return found


def test_tests_use_public_doors():
    uses = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        found = _private_uses(path.read_text(encoding="utf-8"))
        if found:
            uses[str(path.relative_to(ROOT))] = sorted(set(found))
    assert uses == {}


def test_the_door_check_sees_private_access():
    assert _private_uses("dash._frame_id += 1\nx = getattr(tabs, '_names')\n") == [
        "dash._frame_id", "getattr(…, '_names')"]
    assert _private_uses("x.__class__\nsys.version\n") == []
