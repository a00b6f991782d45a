"""The layout holds: floors without upward imports, no cycles, namespaces = subpackages,
one import path per name (no facade modules), runtimes composed rather than mixed in.

Floors, lowest first (a module imports only from its own floor or below):
0 `bandkit.errors`, `bandkit.fsio`, `bandkit.terminal`, `bandkit.daemons`, `bandkit.tools`,
`bandkit.processes`, and `launcher` (which ships alone: no bandkit); 1 `bandkit.manifest`,
`bandkit.dockercli`, `bandkit.ci`, `bandkit.emulator`; 2 `bandkit.doctor`, `bandkit.image`,
`bandkit.cluster`, `bandkit.proxies`, `bandkit.runtimes`; 3 `bandkit.kit`; 4
`bandkit.release`, `bandkit.demo`, `bandkit.fleet`, `bandkit.llm`, `smoke`, `examples`;
5 `bandkit.bench` and `tasks`, which nothing imports. Every import counts, including
deferred ones and those under TYPE_CHECKING. Under tests/, no module imports from a
`test_*.py` module.
"""

from __future__ import annotations

import ast
import functools
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
    ("bandkit.terminal", 0),
    ("bandkit.daemons", 0),
    ("bandkit.tools", 0),
    ("bandkit.processes", 0),
    ("launcher", 0),
    ("bandkit.manifest", 1),
    ("bandkit.dockercli", 1),
    ("bandkit.ci", 1),
    ("bandkit.emulator", 1),
    ("bandkit.doctor", 2),
    ("bandkit.doctor_next", 2),
    ("bandkit.image", 2),
    ("bandkit.cluster", 2),
    ("bandkit.proxies", 2),
    ("bandkit.runtimes", 2),
    ("bandkit.kit", 3),
    ("bandkit.release", 4),
    ("bandkit.demo", 4),
    ("bandkit.fleet", 4),
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
    "cluster": "bandkit/cluster",
    "fleet": "bandkit/fleet",
}
# invoke namespace -> its tasks/ module, where that is not the namespace's own name: invoke
# puts tasks/ on sys.path, where tasks/platform.py would shadow the standard library's
# `platform` and tasks/smoke.py the `smoke` package
TASK_MODULES = {"platform": "emulator", "smoke": "sandbox_smoke"}


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


MODULES = modules()  # found at collection (a walk); parsed only where a test asks (graph)


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each module -> the modules of ours it imports (its AST; once per process)."""
    known = set(MODULES)
    return {n: imports_of(n, p, known) for n, p in MODULES.items()}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_upward_import(name: str) -> None:
    upward = sorted(t for t in graph()[name] if floor(t) > floor(name))
    assert not upward, f"{name} (floor {floor(name)}) imports from a higher floor: {upward}"


def test_the_launcher_ships_alone() -> None:
    leaks = {n: sorted(t for t in ts if not t.startswith("launcher")) for n, ts in graph().items()}
    assert not {n: t for n, t in leaks.items() if n.startswith("launcher") and t}


def test_nothing_imports_benchmarks_tasks_or_tests() -> None:
    for name, targets in graph().items():
        if name.startswith(("bandkit.bench", "tasks")):
            continue
        bad = sorted(t for t in targets if t.startswith(("bandkit.bench", "tasks", "tests")))
        assert not bad, f"{name} imports {bad}"


def test_no_import_cycles() -> None:
    # Package __init__ edges to their own children are not cycles of concern.
    edges = {
        n: {t for t in ts if not t.startswith(n + ".") and not n.startswith(t + ".")}
        for n, ts in graph().items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt) :], nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)


# Test modules share nothing: what two tests need lives in a support module (a conftest,
# `support.py`, `fakes.py`, tests/support/), never in a `test_*.py` another imports.


def _module_file(dotted: str) -> Path | None:
    path = REPO.joinpath(*dotted.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imports_of_test_modules(path: Path) -> list[tuple[int, Path]]:
    """(line, file) for every import in `path` of a module whose file is `test_*.py`."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[int, Path]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            dotted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            dotted = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in dotted:
            file = _module_file(target)
            if file is not None and file.name.startswith("test_"):
                found.append((node.lineno, file))
    return found


def test_no_test_module_imports_another() -> None:
    bad = [
        f"{path.relative_to(REPO)}:{line} imports from {target.relative_to(REPO)}"
        for path in sorted((REPO / "tests").rglob("*.py"))
        for line, target in imports_of_test_modules(path)
    ]
    assert not bad, "move what they share to a support module:\n" + "\n".join(bad)


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
        module = TASK_MODULES.get(space, space)
        assert (REPO / "tasks" / f"{module}.py").is_file(), f"{space}: no tasks/{module}.py"


def test_no_tasks_module_shadows_a_package() -> None:
    """invoke puts tasks/ itself on sys.path, so tasks/X.py is importable as plain `X`."""
    names = {path.stem for path in (REPO / "tasks").glob("*.py")}
    assert not names & (set(sys.stdlib_module_names) | set(PACKAGES))


# Every task's `invoke TASK --help`, as `python -m invoke` runs it (a fresh `Program` like
# invoke.main's per task), all in one process: the tasks share its start and imports, which
# were most of each page's 0.3 s. `test_a_task_answers_help_in_a_process_of_its_own` runs
# one as its own command, as typed.
HELP_PAGES = """
import contextlib, io, json, sys, traceback
from invoke import Program, __version__
pages = {}
for name in sys.argv[1:]:
    out, err, code = io.StringIO(), io.StringIO(), 0
    program = Program(
        name="Invoke", binary="inv[oke]", binary_names=["invoke", "inv"], version=__version__
    )
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            program.run(["invoke", name, "--help"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
    pages[name] = [code, out.getvalue(), err.getvalue()]
print(json.dumps(pages))
"""


@functools.cache
def _help_pages() -> dict[str, tuple[int, str, str]]:
    proc = subprocess.run(
        [sys.executable, "-c", HELP_PAGES, *TASKS],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return {name: (code, out, err) for name, (code, out, err) in json.loads(proc.stdout).items()}


@pytest.mark.parametrize("name", TASKS)
def test_every_task_answers_help(name: str) -> None:
    code, out, err = _help_pages()[name]
    assert code == 0, err
    assert f"Usage: inv[oke] [--core-opts] {name} [--options]" in out
    assert "Docstring:" in out
    assert "Traceback" not in err


def test_a_task_answers_help_in_a_process_of_its_own() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "kit.provision", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == _help_pages()["kit.provision"][1]
    assert "Traceback" not in proc.stderr


# One import path per name: outside a package's `__init__` (which is that package's API),
# a module uses every name it imports. A name imported only to be handed on makes a
# second path to it (a facade); callers import the defining module or the package API.


def handed_on(path: Path) -> list[str]:
    """Names `path` imports from a module and never uses (`__all__` does not count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                imported[alias.asname or alias.name] = node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                imported[alias.asname or alias.name.partition(".")[0]] = node.lineno
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    return [f"{name} (line {line})" for name, line in sorted(imported.items()) if name not in used]


def test_no_module_hands_on_what_it_imports() -> None:
    found = {
        name: unused
        for name, path in sorted(MODULES.items())
        if path.name != "__init__.py" and (unused := handed_on(path))
    }
    assert not found, "modules importing names they never use (facades?):\n" + "\n".join(
        f"{name}: {', '.join(unused)}" for name, unused in found.items()
    )


def test_each_runtime_is_composed_not_mixed_in() -> None:
    """A runtime class inherits the interface alone; its parts are collaborators."""
    from bandkit.runtimes.base import Runtime
    from bandkit.runtimes.docker import DockerRuntime
    from bandkit.runtimes.local import LocalRuntime
    from bandkit.runtimes.sbx import SbxRuntime

    for runtime in (DockerRuntime, LocalRuntime, SbxRuntime):
        ours = [k for k in runtime.__mro__ if k.__module__.startswith("bandkit")]
        assert ours == [runtime, Runtime], f"{runtime.__name__}: {ours}"
