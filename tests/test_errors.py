"""Expected failures: one clear line for the user, the whole chain with BANDKIT_DEBUG=1.

A task fails on bad input (a spec that does not exist) as a user runs it: without the
switch stderr is exactly the one line it always was; with it the traceback comes first,
with the `FileNotFoundError` that the library raised `from None` over. The chain's
messages were never meant for the user: canary secrets planted in them (a command's argv,
a key in the environment, a sandbox secret) come out masked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from invoke.exceptions import Exit

from bandkit.errors import BandkitError, conceal, debug_report, debugging
from bandkit.release.plan import ReleaseRefused
from bandkit.runtimes.base import Secret
from tasks._common import reports
from tests.commands import invoke

DIGEST = "sha256:" + "0" * 64


def _stamp_missing_spec(tmp_path: Path, **extra: str) -> tuple[int, str, str, str]:
    spec = tmp_path / "missing-spec.yaml"
    env = {k: v for k, v in os.environ.items() if k != "BANDKIT_DEBUG"} | extra
    args = ("kit.stamp", "--image-ref", "127.0.0.1:5000/kit:1", "--digest", DIGEST)
    done = invoke(*args, "--spec", str(spec), env=env, timeout=20)
    line = f"kit.stamp: cannot read the spec {spec}: No such file or directory\n"
    return done.returncode, done.stdout, done.stderr, line


def test_without_the_switch_a_bad_input_is_one_line_and_no_traceback(tmp_path: Path) -> None:
    code, out, err, line = _stamp_missing_spec(tmp_path)
    assert (code, out, err) == (1, "", line)


def test_bandkit_debug_prints_the_traceback_and_the_cause_first(tmp_path: Path) -> None:
    code, out, err, line = _stamp_missing_spec(tmp_path, BANDKIT_DEBUG="1")
    assert (code, out) == (1, "")
    assert err.endswith(line), err  # the user's line is still the last one
    report = err.removesuffix(line)
    assert report.startswith("Traceback (most recent call last):"), report
    cause, _, raised = report.partition("raised `from None`")
    assert "FileNotFoundError: [Errno 2] No such file or directory:" in cause
    assert 'spec.py", line' in raised
    assert "in stamp_file" in raised
    assert "bandkit.kit.spec.SpecError: cannot read the spec" in raised


def test_exit_code_is_an_attribute_with_a_default_and_overrides() -> None:
    class Closed(BandkitError):
        exit_code = 2

    assert BandkitError("x").exit_code == 1
    assert Closed("x").exit_code == 2
    refused = ReleaseRefused(["immutable"], ReleaseRefused.IMMUTABLE)
    assert refused.exit_code == 2

    @reports("t.closed")
    def fails() -> None:
        raise Closed("no")

    with pytest.raises(Exit) as stopped:
        fails()
    assert (stopped.value.code, stopped.value.message) == (2, "t.closed: no")


def test_the_debug_report_shows_causes_and_suppressed_contexts_once() -> None:
    def failing() -> None:
        try:
            try:
                {}["key"]
            except KeyError as exc:
                raise ValueError("middle") from exc
        except ValueError:
            raise BandkitError("top") from None

    with pytest.raises(BandkitError) as caught:
        failing()
    report = debug_report(caught.value)
    assert report.index("KeyError") < report.index("ValueError: middle") < report.index("top")
    assert "direct cause" in report
    assert "raised `from None`" in report
    assert report.count("Traceback (most recent call last):") == 3

    looped = BandkitError("loop")
    looped.__context__ = BandkitError("other")
    looped.__context__.__context__ = looped  # a cycle ends, shown once each
    assert debug_report(looped).count("Traceback") == 0  # never raised: no frames
    assert debug_report(looped).count("loop") == 1


@pytest.mark.parametrize(("value", "on"), [("1", True), ("yes", True), ("0", False), ("", False)])
def test_the_switch_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, on: bool
) -> None:
    monkeypatch.setenv("BANDKIT_DEBUG", value)
    assert debugging() is on


ENV_CANARY = "canary-user-key-5d1f0e"
SECRET_CANARY = "canary-agent-key-9b27aa"
CONCEALED_CANARY = "canary-prompted-key-33e1"


def test_the_debug_report_masks_every_known_secret(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BAND_API_KEY_USER", ENV_CANARY)
    monkeypatch.setenv("BANDKIT_DEBUG", "1")
    Secret("BAND_API_KEY", ("127.0.0.1",), SECRET_CANARY)
    conceal(CONCEALED_CANARY)
    argv = [sys.executable, "-c", "import time; time.sleep(5)", SECRET_CANARY, ENV_CANARY]

    @reports("t.leaky")
    def fails() -> None:
        try:
            subprocess.run([*argv, CONCEALED_CANARY], timeout=0.01, check=False)
        except subprocess.TimeoutExpired:  # its message quotes the argv
            raise BandkitError("the tool timed out") from None

    with pytest.raises(Exit):
        fails()
    err = capsys.readouterr().err
    assert "subprocess.TimeoutExpired: Command '[" in err  # the cause is shown...
    assert err.count("***") == 3  # ...with each canary masked
    for canary in (ENV_CANARY, SECRET_CANARY, CONCEALED_CANARY):
        assert canary not in err
