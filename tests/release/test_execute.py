"""A failed step's exit code: its error's `exit_code`, and 2 for a registry's answer."""

from __future__ import annotations

from typing import Any

import pytest

from bandkit.errors import BandkitError
from bandkit.release import execute, versions
from bandkit.release.execute import ReleaseStopped, Run, _ProbeFailed
from bandkit.release.oci import RegistryError
from bandkit.release.plan import Plan, Step, StepKind


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (BandkitError("a file is missing"), 1),
        (_ProbeFailed("does not resolve"), 2),
        (RegistryError("the registry said 500"), 2),
    ],
)
def test_a_failed_step_stops_with_its_error_s_exit_code(
    monkeypatch: pytest.MonkeyPatch, error: BandkitError, code: int
) -> None:
    def fails(run: Run, step: Step) -> Any:
        raise error

    monkeypatch.setitem(execute.ACTIONS, StepKind.VERIFY, fails)
    step = Step(StepKind.VERIFY, "127.0.0.1:5000/kit:1.0.0", "check")
    plan = Plan(versions.parse("1.0.0"), (step,))
    run = Run(plan, None, None, None, "", "", progress=lambda line: None)  # type: ignore[arg-type]
    with pytest.raises(ReleaseStopped) as stopped:
        execute.execute(run)
    assert stopped.value.exit_code == code
    assert ("(exit 2: fail closed)" in str(stopped.value)) is (code == 2)
