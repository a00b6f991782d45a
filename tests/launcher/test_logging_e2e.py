"""BAND_LOG_* as uid 1000, side by side with the upstream launcher from band-sdk on the
same workspace: the same settings mean the same to both; a bad value stops ours with
one `[config]` line where upstream dies with a traceback."""

from __future__ import annotations

import re

import pytest

from tests.launcher.harness import AgentBox, agent_report, assert_clean

LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} \S+ (DEBUG|INFO|WARNING|ERROR) ")
MODULES = ("launcher", "band.docker.launcher")


def log_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if LOG_LINE.match(line)]


@pytest.mark.parametrize("module", MODULES)
def test_stream_and_level_mean_the_same_to_both_launchers(agent_box: AgentBox, module: str) -> None:
    loud = agent_box.run(
        env=agent_box.env(BAND_LOG_STREAM="stdout", BAND_LOG_LEVEL="debug"), module=module
    )
    assert loud.returncode == 0, loud.stderr
    agent_report(loud)
    assert log_lines(loud.stdout), loud.stdout  # the launcher's lines, on stdout
    assert log_lines(loud.stderr) == []
    assert_clean(loud)

    quiet = agent_box.run(env=agent_box.env(band_log_level="WARNING"), module=module)
    assert quiet.returncode == 0, quiet.stderr
    agent_report(quiet)
    assert [line for line in log_lines(quiet.stderr) if " INFO " in line] == []


@pytest.mark.parametrize("module", MODULES)
def test_band_log_file_gets_the_launch_lines(agent_box: AgentBox, module: str) -> None:
    extra = agent_box.root / "extra-logs" / "band.log"
    launch = agent_box.run(env=agent_box.env(BAND_LOG_FILE=str(extra)), module=module)
    assert launch.returncode == 0, launch.stderr
    text = extra.read_text()
    assert extra.stat().st_mode & 0o777 == 0o600  # both create it owner-only
    assert (extra.parent.stat().st_mode & 0o777) == 0o700
    assert "canary" not in text
    if module == "launcher":
        # Ours keeps BAND_LOG_FILE to the end of the launch. Upstream replaces it with
        # launcher.log once paths resolve, before its first line: the file stays empty.
        assert log_lines(text), text
        assert "phase exec" in text
    else:
        assert text == ""


def test_a_bad_setting_is_one_line_for_ours_a_traceback_upstream(agent_box: AgentBox) -> None:
    env = agent_box.env(BAND_LOG_LEVEL="loud")
    ours = agent_box.run(env=env)
    assert ours.returncode == 1
    assert ours.stderr.count("\n") == 1, ours.stderr
    assert "[config] BAND_LOG_LEVEL must be a logging level name" in ours.stderr
    assert_clean(ours)
    assert not ours.agent_lines()

    upstream = agent_box.run(env=env, module="band.docker.launcher")
    assert upstream.returncode != 0  # refused as well: the same validation
    assert not upstream.agent_lines()
    assert "Traceback" in upstream.stderr
