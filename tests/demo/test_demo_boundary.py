"""The example and the library: `bandkit.demo` imports from `examples/`, never the other way.

`examples/` is what a user copies or loads by path and what runs inside the sandboxes
(`examples/docker_demo/README.md`, "What is an example here"), so none of it imports
the kit's own packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KIT_PACKAGES = {"bandkit", "smoke", "tasks"}


def _imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    return {name.split(".")[0] for name in names}


@pytest.mark.parametrize(
    "path", sorted(EXAMPLES.rglob("*.py")), ids=lambda p: str(p.relative_to(EXAMPLES))
)
def test_an_example_imports_none_of_the_kit(path: Path) -> None:
    assert not _imported(path) & KIT_PACKAGES, path
