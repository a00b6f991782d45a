"""The layout holds: floors without upward imports, no cycles, namespaces = subpackages.

Floors, lowest first (a module imports only from its own floor or below):
0 `bandkit.errors`, `bandkit.fsio`, and `launcher` (which ships alone: no bandkit);
1 `bandkit.manifest`, `bandkit.dockercli`, `bandkit.ci`, `bandkit.emulator`;
2 `bandkit.image`, `bandkit.runtimes`; 3 `bandkit.kit`; 4 `bandkit.release`,
`bandkit.demo`, `bandkit.smoke`-like orchestration, `smoke`, `examples`; 5 `bandkit.bench`
and `tasks`, which nothing imports. Every import counts, including deferred ones and those
under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("bandkit", "launcher", "smoke", "examples", "tasks")
FLOORS: tuple[tuple[str, int], ...] = (
    ("bandkit.errors", 0),
    ("bandkit.fsio", 0),
    ("bandkit.daemons", 0),
    ("launcher", 0),
    ("bandkit.manifest", 1),
    ("bandkit.dockercli", 1),
    ("bandkit.ci", 1),
    ("bandkit.emulator", 1),
    ("bandkit.doctor", 2),
    ("bandkit.image", 2),
    ("bandkit.runtimes", 2),
    ("bandkit.kit", 3),
    ("bandkit.release", 4),
    ("bandkit.demo", 4),
    ("bandkit.llm", 4),
    ("smoke", 4),
    ("examples", 4),
    ("bandkit.bench", 5),
    ("tasks", 5),
    ("bandkit", 0),  # the package's own __init__
)
# invoke namespace -> the bandkit subpackage its tasks call
NAMESPACES = {
    "ci": "bandkit/ci",
    "image": "bandkit/image",
    "kit": "bandkit/kit",
    "platform": "bandkit/emulator",
    "demo": "bandkit/demo",
    "smoke": "smoke",
    "release": "bandkit/release",
    "llm": "bandkit/llm",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            found[module_name(path)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def floor(name: str) -> int:
    for prefix, level in FLOORS:
        if name == prefix or name.startswith(prefix + "."):
            return level
    raise AssertionError(f"{name} has no floor in FLOORS; add it")


GRAPH = {n: imports_of(n, p, set(modules())) for n, p in modules().items()}


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_no_upward_import(name: str) -> None:
    upward = sorted(t for t in GRAPH[name] if floor(t) > floor(name))
    assert not upward, f"{name} (floor {floor(name)}) imports from a higher floor: {upward}"


def test_the_launcher_ships_alone() -> None:
    leaks = {n: sorted(t for t in ts if not t.startswith("launcher")) for n, ts in GRAPH.items()}
    assert not {n: t for n, t in leaks.items() if n.startswith("launcher") and t}


def test_nothing_imports_benchmarks_tasks_or_tests() -> None:
    for name, targets in GRAPH.items():
        if name.startswith(("bandkit.bench", "tasks")):
            continue
        bad = sorted(t for t in targets if t.startswith(("bandkit.bench", "tasks", "tests")))
        assert not bad, f"{name} imports {bad}"


def test_no_import_cycles() -> None:
    # Package __init__ edges to their own children are not cycles of concern.
    graph = {
        n: {t for t in ts if not t.startswith(n + ".") and not n.startswith(t + ".")}
        for n, ts in GRAPH.items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt) :], nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def _task_names() -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "--list", "--list-format", "json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    data = json.loads(proc.stdout)
    names = [t["name"] for t in data["tasks"]]
    for collection in data["collections"]:
        names += [f"{collection['name']}.{t['name']}" for t in collection["tasks"]]
    return names


TASKS = _task_names()


def test_namespaces_map_one_to_one_onto_subpackages() -> None:
    spaces = {name.partition(".")[0] for name in TASKS if "." in name}
    unknown = spaces - set(NAMESPACES)
    assert not unknown, f"namespaces without a library home: {unknown}"
    for space in spaces:
        assert (REPO / NAMESPACES[space]).is_dir(), space


@pytest.mark.parametrize("name", TASKS)
def test_every_task_answers_help(name: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", name, "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Docstring:" in proc.stdout
    assert "Traceback" not in proc.stderr
