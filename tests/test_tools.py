"""The one subprocess runner: its three failures, their one-line shape, and the masking."""

from __future__ import annotations

import pytest

from bandkit import tools
from bandkit.errors import BandkitError, conceal

CANARY = "tools-canary-8f3a1c"
CONCEALED = "tools-concealed-77d2e9"


class MyError(BandkitError):
    pass


def test_a_failure_names_what_the_argv_and_the_tail_of_the_output_masked() -> None:
    conceal(CONCEALED)
    script = f"echo {CANARY} {CONCEALED} >&2; exit 3"
    with pytest.raises(tools.ToolError) as err:
        tools.run(["sh", "-c", script, CONCEALED], what="demo", timeout=10, redact=[CANARY])
    message = str(err.value)
    assert message.startswith("demo: `sh -c ")
    assert "failed (exit 3): *** ***" in message
    assert CANARY not in message
    assert CONCEALED not in message
    assert err.value.returncode == 3


def test_missing_and_hung_tools_have_their_shell_codes() -> None:
    with pytest.raises(tools.ToolError, match="no-such-tool-xyz is not installed") as missing:
        tools.run(["no-such-tool-xyz"], what="demo", timeout=5, check=False)
    assert missing.value.returncode == tools.MISSING
    with pytest.raises(tools.ToolError, match=r"demo: `sleep 5` timed out after 0.2s") as hung:
        tools.run(["sleep", "5"], what="demo", timeout=0.2, check=False)
    assert hung.value.returncode == tools.TIMED_OUT


def test_the_callers_error_class_and_unchecked_exits() -> None:
    with pytest.raises(MyError, match=r"^demo: `false` failed \(exit 1\): $"):
        tools.run(["false"], what="demo", timeout=5, error=MyError)
    assert tools.run(["false"], what="demo", timeout=5, check=False).returncode == 1


def test_env_is_added_and_unset_is_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLS_GONE", "1")
    argv = ["sh", "-c", 'echo "$TOOLS_ADDED-${TOOLS_GONE:-unset}-${PATH:+path}"']
    done = tools.run(argv, what="demo", timeout=5, env={"TOOLS_ADDED": "a"}, unset=["TOOLS_GONE"])
    assert done.stdout.strip() == "a-unset-path"
