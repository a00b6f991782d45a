"""Custody tiers and the secrets file's guards, one scenario per guard (real git)."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from launcher import credentials
from launcher.config import build_spec
from launcher.credentials import GUARDS, SecretsFile, guarded_secrets_file, resolve_credentials
from launcher.environment import LauncherEnv
from launcher.errors import LauncherError, Phase
from tests.launcher.fakes import CANARY, CANARY_FILE, Box

ENV_FILE_TIER = {
    "source": "workspace-env-file",
    "path": ".band/secrets.env",
    "acknowledgePlaintextInSandbox": True,
}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _secrets(box: Box, content: str = f"BAND_API_KEY={CANARY_FILE}\n", mode: int = 0o600) -> Path:
    path = box.ws / ".band" / "secrets.env"
    path.parent.mkdir(exist_ok=True)
    path.write_text(content)
    path.chmod(mode)
    (box.ws / ".gitignore").write_text(".band/\n")
    return path


def failing_guard(box: Box, configured: str = ".band/secrets.env") -> tuple[str, str]:
    secrets = SecretsFile(workspace=box.ws, configured=configured)
    for guard in GUARDS:
        try:
            guard(secrets)
        except LauncherError as exc:
            failure = exc
            break
    else:
        return "", ""
    assert failure.phase is Phase.CREDENTIALS
    assert CANARY_FILE not in str(failure)
    return guard.__name__, str(failure)


def test_the_policy_is_an_ordered_tuple_of_named_checks() -> None:
    assert [guard.__name__ for guard in GUARDS] == [
        "stays_inside_workspace",
        "never_traverses_a_symlink",
        "is_a_regular_file",
        "has_owner_only_mode",
        "is_gitignored_and_untracked",
        "defines_only_documented_names",
    ]


def test_a_good_file_passes_every_guard_outside_a_repository(box: Box) -> None:
    _secrets(box)
    assert failing_guard(box) == ("", "")
    assert guarded_secrets_file(box.ws, ".band/secrets.env").values == {"BAND_API_KEY": CANARY_FILE}


def test_a_good_file_passes_every_guard_inside_a_repository(box: Box) -> None:
    _secrets(box)
    _git(box.ws, "init", "-q")
    assert failing_guard(box) == ("", "")


def _outside(box: Box) -> str:
    (box.root / "outside.env").write_text(f"BAND_API_KEY={CANARY_FILE}\n")
    return "../outside.env"


def _leaf_link(box: Box) -> str:
    real = _secrets(box)
    real.rename(real.with_name("real.env"))
    real.symlink_to(real.with_name("real.env"))
    return ".band/secrets.env"


def _parent_link(box: Box) -> str:
    _secrets(box)
    (box.ws / ".band").rename(box.ws / "store")
    (box.ws / ".band").symlink_to(box.ws / "store")
    return ".band/secrets.env"


def _missing(box: Box) -> str:
    (box.ws / ".gitignore").write_text(".band/\n")
    return ".band/secrets.env"


def _directory(box: Box) -> str:
    (box.ws / ".band" / "secrets.env").mkdir(parents=True)
    return ".band/secrets.env"


def _fifo(box: Box) -> str:
    (box.ws / ".band").mkdir()
    os.mkfifo(box.ws / ".band" / "secrets.env", 0o600)
    return ".band/secrets.env"


def _group_readable(box: Box) -> str:
    _secrets(box, mode=0o640)
    return ".band/secrets.env"


def _unignored_no_repo(box: Box) -> str:
    _secrets(box)
    (box.ws / ".gitignore").write_text("")
    return ".band/secrets.env"


def _unignored_in_repo(box: Box) -> str:
    _unignored_no_repo(box)
    _git(box.ws, "init", "-q")
    return ".band/secrets.env"


def _tracked(box: Box) -> str:
    _secrets(box)
    _git(box.ws, "init", "-q")
    _git(box.ws, "add", "-f", ".band/secrets.env")
    return ".band/secrets.env"


def _undocumented(box: Box) -> str:
    _secrets(box, f"BAND_API_KEY={CANARY_FILE}\nAWS_SECRET_ACCESS_KEY={CANARY_FILE}\n")
    return ".band/secrets.env"


def _unparsable(box: Box) -> str:
    _secrets(box, f"BAND_API_KEY={CANARY_FILE}\n{CANARY_FILE}\n")
    return ".band/secrets.env"


SCENARIOS: list[tuple[str, Callable[[Box], str], str, str]] = [
    ("outside", _outside, "stays_inside_workspace", "must stay inside the workspace"),
    ("leaf-link", _leaf_link, "never_traverses_a_symlink", "symlink"),
    ("parent-link", _parent_link, "never_traverses_a_symlink", "symlink"),
    ("missing", _missing, "is_a_regular_file", "not found"),
    ("directory", _directory, "is_a_regular_file", "regular file"),
    ("fifo", _fifo, "is_a_regular_file", "regular file"),
    ("group-readable", _group_readable, "has_owner_only_mode", "owner-only (chmod 600), got 640"),
    ("unignored-no-repo", _unignored_no_repo, "is_gitignored_and_untracked", "git-ignored"),
    ("unignored-in-repo", _unignored_in_repo, "is_gitignored_and_untracked", "git-ignored"),
    ("tracked", _tracked, "is_gitignored_and_untracked", "tracked by Git"),
    ("undocumented", _undocumented, "defines_only_documented_names", "AWS_SECRET_ACCESS_KEY"),
    ("unparsable", _unparsable, "defines_only_documented_names", "line 2 is not NAME=value"),
]


@pytest.mark.parametrize(
    ("setup", "guard", "fragment"), [s[1:] for s in SCENARIOS], ids=[s[0] for s in SCENARIOS]
)
def test_each_guard_stops_its_scenario(
    box: Box, setup: Callable[[Box], str], guard: str, fragment: str
) -> None:
    name, message = failing_guard(box, setup(box))
    assert name == guard
    assert fragment in message


def test_every_guard_has_a_failing_scenario() -> None:
    assert {s[2] for s in SCENARIOS} == {guard.__name__ for guard in GUARDS}


def test_an_undecidable_git_answer_fails_closed(box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    _secrets(box)

    def broken_git(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 128, "", "fatal: bad object HEAD")

    monkeypatch.setattr(credentials, "run_git", broken_git)
    assert failing_guard(box)[0] == "is_gitignored_and_untracked"


def test_git_redirection_from_the_environment_is_ignored(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    _unignored_no_repo(box)
    other = box.root / "other"
    other.mkdir()
    _git(other, "init", "-q")
    (other / ".git" / "info" / "exclude").write_text("*\n")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(box.ws))
    assert failing_guard(box)[0] == "is_gitignored_and_untracked"


def test_unreadable_file_is_a_credentials_error(box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    _secrets(box)

    def unreadable(self: Path, *args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_text", unreadable)
    with pytest.raises(LauncherError, match=r"^\[credentials\] credentials file is not readable"):
        guarded_secrets_file(box.ws, ".band/secrets.env")


def _resolve(box: Box, credentials_section: object, **env: str) -> dict[str, str]:
    spec = build_spec(box.config(credentials=credentials_section))
    return resolve_credentials(spec, LauncherEnv.from_environ(env), box.ws)


def test_environment_wins_and_the_file_fills_gaps(
    box: Box, caplog: pytest.LogCaptureFixture
) -> None:
    _secrets(box, f"BAND_API_KEY={CANARY_FILE}\nOPENAI_API_KEY=file\nGH_TOKEN=\n")
    caplog.set_level(logging.INFO)
    resolved = _resolve(box, ENV_FILE_TIER, OPENAI_API_KEY=CANARY, gh_token="env-gh")
    assert resolved == {"BAND_API_KEY": CANARY_FILE, "OPENAI_API_KEY": CANARY, "GH_TOKEN": "env-gh"}
    assert "workspace-env-file" in caplog.text
    assert "WARNING" in caplog.text
    assert "filled 1 name(s)" in caplog.text
    assert CANARY not in caplog.text
    assert CANARY_FILE not in caplog.text


def test_env_file_needs_the_acknowledgement(box: Box) -> None:
    _secrets(box)
    tier = {**ENV_FILE_TIER, "acknowledgePlaintextInSandbox": False}
    with pytest.raises(LauncherError, match="acknowledgePlaintextInSandbox: true is required"):
        _resolve(box, tier)


def test_proxy_managed_accepts_only_the_sentinel(box: Box) -> None:
    tier = {"source": "proxy-managed"}
    assert _resolve(box, tier, BAND_API_KEY="proxy-managed") == {"BAND_API_KEY": "proxy-managed"}
    with pytest.raises(LauncherError, match="sentinel") as caught:
        _resolve(box, tier, BAND_API_KEY=CANARY)
    assert CANARY not in str(caught.value)


def test_provider_keys_pass_through_under_proxy_managed(box: Box) -> None:
    resolved = _resolve(
        box, {"source": "proxy-managed"}, BAND_API_KEY="proxy-managed", OPENAI_API_KEY="sbx-ph"
    )
    assert resolved["OPENAI_API_KEY"] == "sbx-ph"


def test_no_section_means_environment_only(box: Box) -> None:
    _secrets(box)  # present but not selected: never read
    assert _resolve(box, None, BAND_API_KEY=CANARY) == {"BAND_API_KEY": CANARY}


def test_band_key_is_required(box: Box) -> None:
    with pytest.raises(LauncherError, match=r"^\[credentials\] BAND_API_KEY missing"):
        _resolve(box, {"source": "proxy-managed"}, OPENAI_API_KEY=CANARY)
