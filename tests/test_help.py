"""Every `python -m MODULE` the docs name answers `--help`: exit 0 and a usage line (a
benchmark name parser once answered "unknown benchmark(s) --help")."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted(REPO.glob("**/README.md")), *sorted(REPO.glob("docs/*.md"))]
DOCUMENTED = sorted(
    {
        name
        for doc in DOCS
        if ".venv" not in doc.parts and "node_modules" not in doc.parts
        for name in re.findall(r"python -m ([a-z_][a-z0-9_.]*)", doc.read_text(encoding="utf-8"))
    }
)


def test_the_docs_name_the_commands_this_test_knows() -> None:
    assert {"bandkit.bench", "bandkit.emulator", "launcher"} <= set(DOCUMENTED)


@pytest.mark.parametrize("module", DOCUMENTED)
def test_each_documented_module_answers_help(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=15,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.lower().startswith("usage:"), done.stdout
    assert "Traceback" not in done.stderr
