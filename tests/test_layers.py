"""The architecture holds: imports run only downward, and there is no import cycle.

docs/ARCHITECTURE.md draws the layers; this test is their enforcement. Every import is
counted: module level, inside functions, and under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("got_core", "got_integrations")

#: Layers bottom up: a module may import its own layer's modules (no cycles) and lower layers.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "types",
        (
            "got_core.errors",
            "got_core.types",
            "got_core.names",
            "got_core.validate",
            "got_core._text",
            "got_core.choices",
        ),
    ),
    ("storage", ("got_core.storage", "got_core.signing")),
    ("repository", ("got_core.repo",)),
    ("memory", ("got_core.memory",)),
    ("features", ("got_core.solver", "got_core.gcc", "got_core.collab")),
    ("bench", ("got_core.bench",)),
    ("testing", ("got_core.testing",)),
    ("ui", ("got_core.ui",)),  # the web viewer: reads repositories and runs; `got ui` serves it
    ("cli", ("got_core.cli",)),
    ("api", ("got_core",)),  # the package root and deprecated aliases at old paths
    ("integrations", ("got_integrations",)),
]

#: Old import paths kept for one release; nothing of ours may import them.
DEPRECATED = {
    "got_core.nodes",
    "got_core.notes",
    "got_core.retrieval",
    "got_core.sharing",
    "got_core.contexa",
    "got_core.stats",
    "got_core.replay",
    "got_core.inbound",
    "got_core.cli._common",
}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            found[module_name(path, root)] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every project module ``name`` imports, anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module for a in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def layer_of(name: str) -> int:
    best, best_len = -1, -1
    for i, (_label, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    if name in DEPRECATED:
        return next(i for i, (label, _) in enumerate(LAYERS) if label == "api")
    return best


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = all_modules(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def upward_arrows(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for src, targets in edges.items():
        for dst in targets:
            if dst in DEPRECATED:
                bad.append(f"{src} imports the deprecated alias {dst}")
            elif layer_of(dst) > layer_of(src):
                bad.append(f"{src} ({LAYERS[layer_of(src)][0]}) imports {dst} ({LAYERS[layer_of(dst)][0]})")
            elif dst.startswith("got_core.testing") and not src.startswith(("got_core.testing",)):
                bad.append(f"production module {src} imports the test double module {dst}")
            elif (
                src.startswith("got_integrations")
                and dst.startswith("got_core")
                and any(part.startswith("_") for part in dst.split("."))
            ):
                bad.append(f"{src} imports the private module {dst}")
    return sorted(bad)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), plus self-loops."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


#: The one package that talks to pygit2 (ARCHITECTURE §5, invariant 4).
PYGIT2_PACKAGE = "got_core.storage.git"


def pygit2_importers(root: Path = ROOT) -> dict[str, bool]:
    """Every module that imports pygit2 anywhere in the file -> whether it may (it is in the git package)."""
    out = {}
    for name, path in all_modules(root).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            if any(n == "pygit2" or n.startswith("pygit2.") for n in names):
                out[name] = name == PYGIT2_PACKAGE or name.startswith(PYGIT2_PACKAGE + ".")
    return out


def _package_edges_only(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    # A package's __init__ re-exporting its own submodules is not a cycle with them.
    return {src: {d for d in dsts if not (src.startswith(d + ".") and d != "got_core")} for src, dsts in edges.items()}


def test_every_module_has_a_layer():
    missing = [name for name in all_modules() if layer_of(name) < 0]
    assert missing == []


def test_no_import_runs_up_a_layer():
    assert upward_arrows(graph()) == []


def test_no_import_cycles():
    assert cycles(_package_edges_only(graph())) == []


def test_got_core_never_imports_a_framework():
    frameworks = ("langgraph", "langchain", "langchain_core", "llama_index")
    offenders = []
    for name, path in all_modules().items():
        if not name.startswith("got_core"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            )
            offenders += [f"{name}: {n}" for n in names if n.split(".")[0] in frameworks]
    assert offenders == []


@pytest.mark.parametrize(
    "code, problem",
    [
        ("from got_core.cli.plugin import app\n", "imports got_core.cli.plugin"),
        ("def f():\n    from got_core.solver import tot\n", "imports got_core.solver.tot"),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from got_core.memory import base\n",
            "imports got_core.memory.base",
        ),
        ("from got_core.testing import ScriptedChatModel\n", "imports got_core.testing"),
        ("from got_core import nodes\n", "deprecated alias got_core.nodes"),
    ],
)
def test_the_check_catches_an_upward_arrow(tmp_path, code, problem):
    # a storage-layer module that imports upward (at module level, in a function, for typing)
    tree = tmp_path / "got_core" / "storage"
    tree.mkdir(parents=True)
    for d in (tmp_path / "got_core", tree):
        (d / "__init__.py").write_text("")
    for mod in ("cli/plugin", "solver/tot", "memory/base", "testing/__init__", "nodes"):
        f = tmp_path / "got_core" / f"{mod}.py"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.touch()
    (tree / "bad.py").write_text(code)
    arrows = upward_arrows(graph(tmp_path))
    assert any(a.startswith("got_core.storage.bad") and problem in a for a in arrows), arrows


def test_the_check_catches_a_cycle(tmp_path):
    pkg = tmp_path / "got_core" / "solver"
    pkg.mkdir(parents=True)
    (tmp_path / "got_core" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from got_core.solver import b\n")
    (pkg / "b.py").write_text("from got_core.solver.a import f\n")
    assert cycles(_package_edges_only(graph(tmp_path))) == [["got_core.solver.a", "got_core.solver.b"]]


def test_only_the_git_package_imports_pygit2():
    importers = pygit2_importers()
    assert sorted(name for name, allowed in importers.items() if not allowed) == []
    assert "got_core.storage.git._handle" in importers  # the scan sees the package's own imports


@pytest.mark.parametrize(
    "module, code",
    [
        ("storage/gitcli", "import pygit2\n"),  # a sibling whose name merely starts with "git"
        ("storage/refs", "from pygit2 import GitError\n"),
        ("repo/base", "def f():\n    import pygit2.enums\n"),
        ("memory/git", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pygit2.enums import SortMode\n"),
    ],
)
def test_the_check_catches_pygit2_outside_the_git_package(tmp_path, module, code):
    for pkg in ("got_core", "got_core/storage", "got_core/storage/git", "got_core/repo", "got_core/memory"):
        (tmp_path / pkg).mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "got_core/storage/git/_objects.py").write_text("import pygit2\n")
    (tmp_path / f"got_core/{module}.py").write_text(code)
    offender = "got_core." + module.replace("/", ".")
    assert pygit2_importers(tmp_path) == {"got_core.storage.git._objects": True, offender: False}
