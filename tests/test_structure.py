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
#: The engine's one loop stays short (it was 270 lines, then grew to 366 with features).
SIMULATION_LINES = 300


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
                # importing a.b.c runs the packages a and a.b first (their __init__), save
                # those the importer lies in (loaded before it)
                while t:
                    if t != name and not f"{name}.".startswith(f"{t}."):
                        out.add(t)
                    t = t.rpartition(".")[0]
        elif (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module")
              and node.args):
            # importlib.import_module(f"{__name__}.{name}") over a tuple of names: the
            # package imports each of them (a registry loading its plug-ins)
            out.update(_imported_by_name(node, name, modules, tree))
        for child in ast.iter_child_nodes(node):
            visit(child, [*parents, node])

    visit(tree, [])
    return out


def _imported_by_name(call: ast.Call, name: str, modules, tree) -> set[str]:
    """The modules an ``import_module`` call of ``name`` may load: a constant name, or
    ``f"{__name__}.{x}"`` with ``x`` running over a module-level tuple of names."""
    arg = call.args[0]
    if isinstance(arg, ast.Constant):
        return {arg.value} & set(modules)
    names = {a.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
             for a in ast.walk(node.value) if isinstance(a, ast.Constant)
             and isinstance(a.value, str)}
    found = {f"{name}.{n}" for n in names} & set(modules)
    assert found, f"{name}: import_module({ast.unparse(arg)}) loads modules it cannot see"
    return found


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


def test_imports_count_late_ones_and_the_packages_they_run(tmp_path):
    """A late import inside a function is an edge; importing ``p.q.m`` is an edge to the
    packages ``p`` and ``p.q`` too (their ``__init__`` runs), except the importer's own."""
    files = {"p/__init__.py": "from .q import m\n",
             "p/q/__init__.py": "import importlib\nNAMES = ('m',)\nfor n in NAMES:\n"
                                "    importlib.import_module(f'{__name__}.{n}')\n",
             "p/q/m.py": "def f():\n    from p.r import x\n",
             "p/r.py": "from .q.m import f\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    modules = {"p": tmp_path / "p/__init__.py", "p.q": tmp_path / "p/q/__init__.py",
               "p.q.m": tmp_path / "p/q/m.py", "p.r": tmp_path / "p/r.py"}
    graph = {n: _imports(n, f, modules) for n, f in modules.items()}
    assert graph["p.q.m"] == {"p.r"}  # the late import; p and p.q are its own packages
    assert graph["p.r"] == {"p.q", "p.q.m"}  # p.q's __init__ runs first
    assert graph["p.q"] == {"p.q.m"}  # the registry's loop
    assert graph["p"] == {"p.q", "p.q.m"}
    assert _cycles(graph) == [["p.q", "p.q.m", "p.r"]]


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
    simulation = (ROOT / "dynamics" / "simulation.py").read_text(encoding="utf-8")
    assert len(simulation.splitlines()) <= SIMULATION_LINES


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
            # monkeypatch.setattr("package.module._name", value)
            found += [f"{ast.unparse(node.func)}({n!r}, …)" for n in names[:1]
                      if n.partition(".")[0] in PACKAGES and _private(n.rpartition(".")[2])]
        elif (isinstance(node, ast.ImportFrom) and node.module
              and node.module.partition(".")[0] in PACKAGES):
            found += [f"from {node.module} import {a.name}" for a in node.names
                      if _private(a.name)]
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


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
    assert _private_uses("from app.dashboard import _x, y\n"
                         "monkeypatch.setattr('dynamics.sweeps._cost', 1)\n") == [
        "from app.dashboard import _x", "monkeypatch.setattr('dynamics.sweeps._cost', …)"]
