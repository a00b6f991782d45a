"""The credentials phase: custody tiers and the workspace secrets file's guards.

- No `credentials:` section: the environment is the only source (as upstream).
- `proxy-managed`: the environment is the only source, and BAND_API_KEY must be
  the sentinel `proxy-managed` (the real key stays on the host; a real-looking
  key here means custody is broken, so the launch stops).
- `workspace-env-file`: plaintext fallback, acknowledged in band.yaml and warned
  about at every launch. The file passes every check in GUARDS, in order, before
  a value is read; the environment wins over it, the file only fills gaps.

Values are never logged or put in a message: only names and counts.
"""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from launcher.config import WorkspaceSpec
from launcher.constants import (
    CREDENTIAL_NAMES,
    DEFAULT_SECRETS_PATH,
    PROXY_MANAGED,
    CredentialName,
    CredentialSource,
)
from launcher.environment import LauncherEnv
from launcher.errors import LauncherError, Phase

logger = logging.getLogger("launcher.credentials")

GIT_TIMEOUT_S = 30.0
# Git's own verdict for a directory outside any repository: the one outcome that
# relaxes the tracked-file check (to the ignore-rule check against a scratch repo).
# Every other git failure fails closed.
NOT_A_REPOSITORY = "not a git repository"


@dataclass
class SecretsFile:
    """The configured secrets file: as written (`raw_path`) and with links resolved."""

    workspace: Path
    configured: str
    values: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def raw_path(self) -> Path:
        configured = Path(self.configured)
        return configured if configured.is_absolute() else self.workspace / configured

    @property
    def path(self) -> Path:
        return self.raw_path.resolve()


def _fail(message: str) -> LauncherError:
    return LauncherError(Phase.CREDENTIALS, message)


def stays_inside_workspace(secrets: SecretsFile) -> None:
    if not secrets.path.is_relative_to(secrets.workspace):
        raise _fail(
            f"credentials.path must stay inside the workspace {secrets.workspace} (symlinks "
            f"resolved), got {secrets.configured!r}"
        )


def never_traverses_a_symlink(secrets: SecretsFile) -> None:
    """Neither the file nor any directory between it and the workspace is a link."""
    for candidate in (secrets.raw_path, *secrets.raw_path.parents):
        if candidate == secrets.workspace:
            return
        if candidate.is_symlink():
            raise _fail(f"credentials file path must not go through a symlink: {candidate}")


def is_a_regular_file(secrets: SecretsFile) -> None:
    try:
        mode = secrets.path.lstat().st_mode
    except FileNotFoundError:
        raise _fail(
            f"credentials file not found: {secrets.path} (create it from secrets.env.example, "
            "chmod 600)"
        ) from None
    if not stat.S_ISREG(mode):
        raise _fail(f"credentials file must be a regular file: {secrets.path}")


def has_owner_only_mode(secrets: SecretsFile) -> None:
    mode = stat.S_IMODE(secrets.path.stat().st_mode)
    if mode & 0o077:
        raise _fail(
            f"credentials file must be owner-only (chmod 600), got {mode:o}: {secrets.path}"
        )


def run_git(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git on the workspace: untranslated messages, no GIT_* redirection from the
    environment, no global/system config, and a foreign-uid mount tolerated."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(LC_ALL="C", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    try:
        return subprocess.run(
            ["git", "-c", f"safe.directory={workspace}", "-C", str(workspace), *args],
            capture_output=True,
            text=True,
            check=False,
            env=env,
            timeout=GIT_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _fail(f"git could not be run to check the credentials file: {exc}") from None


def _git_detail(result: subprocess.CompletedProcess[str]) -> str:
    return (result.stderr or result.stdout).strip() or f"exit {result.returncode}"


def _require_ignored(secrets: SecretsFile, *git_dir_options: str) -> None:
    ignored = run_git(secrets.workspace, *git_dir_options, "check-ignore", "-q", str(secrets.path))
    if ignored.returncode == 1:
        raise _fail(
            f"credentials file must be git-ignored (add `.band/` to .gitignore): {secrets.path}"
        )
    if ignored.returncode != 0:
        raise _fail(
            f"git could not tell whether the credentials file is ignored: {_git_detail(ignored)}"
        )


def is_gitignored_and_untracked(secrets: SecretsFile) -> None:
    """In a repository: untracked and ignored. Outside one: ignored by the workspace's
    rules already (checked against a scratch repository), so a later `git init &&
    git add .` cannot commit it. Any other git outcome fails closed."""
    inside = run_git(secrets.workspace, "rev-parse", "--is-inside-work-tree")
    if inside.returncode == 0 and inside.stdout.strip() == "true":
        tracked = run_git(secrets.workspace, "ls-files", "--error-unmatch", str(secrets.path))
        if tracked.returncode == 0:
            raise _fail(
                f"credentials file is tracked by Git: `git rm --cached` it and rotate the "
                f"keys: {secrets.path}"
            )
        if tracked.returncode != 1:
            raise _fail(
                f"git could not tell whether the credentials file is tracked: "
                f"{_git_detail(tracked)}"
            )
        _require_ignored(secrets)
        return
    if NOT_A_REPOSITORY not in (inside.stderr or "").lower():
        raise _fail(
            f"git could not tell whether the workspace is a repository: {_git_detail(inside)}"
        )
    with tempfile.TemporaryDirectory(prefix="band-launcher-git-") as scratch:
        git_dir = Path(scratch) / "scratch.git"
        created = run_git(secrets.workspace, "init", "-q", "--bare", str(git_dir))
        if created.returncode != 0:
            raise _fail(f"git could not evaluate the ignore rules: {_git_detail(created)}")
        _require_ignored(secrets, f"--git-dir={git_dir}", f"--work-tree={secrets.workspace}")


def defines_only_documented_names(secrets: SecretsFile) -> None:
    """Reads the file (as data) and rejects any name outside CredentialName."""
    from launcher.envfile import EnvFileError, parse_env_file

    try:
        values = parse_env_file(secrets.path.read_text(encoding="utf-8"))
    except EnvFileError as exc:
        raise _fail(f"credentials file {secrets.path}: {exc}") from None
    except UnicodeDecodeError:
        raise _fail(f"credentials file is not UTF-8 text: {secrets.path}") from None
    unknown = sorted(set(values) - set(CREDENTIAL_NAMES))
    if unknown:
        raise _fail(
            f"credentials file defines undocumented name(s) {', '.join(unknown)}; allowed: "
            f"{', '.join(CREDENTIAL_NAMES)}"
        )
    secrets.values = {name: value for name, value in values.items() if value}


# The security policy of the secrets file, in enforcement order. A check that
# cannot decide fails the launch.
GUARDS: tuple[Callable[[SecretsFile], None], ...] = (
    stays_inside_workspace,
    never_traverses_a_symlink,
    is_a_regular_file,
    has_owner_only_mode,
    is_gitignored_and_untracked,
    defines_only_documented_names,
)


def guarded_secrets_file(workspace: Path, configured: str) -> SecretsFile:
    """Run every guard in order; only a file that passes them all is read."""
    secrets = SecretsFile(workspace=workspace, configured=configured)
    for guard in GUARDS:
        try:
            guard(secrets)
        except OSError as exc:  # e.g. a host-owned 600 file the agent cannot read
            raise _fail(
                f"credentials file is not readable ({exc.strerror}): {secrets.path}"
            ) from None
    return secrets


def file_credentials(spec: WorkspaceSpec, workspace: Path) -> dict[str, str]:
    """Values from the workspace env file (empty unless that tier is selected)."""
    section = spec.credentials
    if section is None or section.source is not CredentialSource.WORKSPACE_ENV_FILE:
        return {}
    if not section.acknowledge_plaintext:
        raise _fail(
            "credentials.acknowledgePlaintextInSandbox: true is required for "
            "workspace-env-file: plaintext keys live in the workspace and in the sandbox"
        )
    logger.warning(
        "credentials tier workspace-env-file: plaintext keys are in the workspace and the "
        "sandbox; prefer proxy-managed, where real keys never enter the sandbox"
    )
    secrets = guarded_secrets_file(workspace, section.path or DEFAULT_SECRETS_PATH)
    return secrets.values


def resolve_credentials(spec: WorkspaceSpec, env: LauncherEnv, workspace: Path) -> dict[str, str]:
    """Canonical name -> value for the agent: environment first, the file filling gaps."""
    from_file = file_credentials(spec, workspace)
    resolved: dict[str, str] = {}
    filled: list[str] = []
    for name in CREDENTIAL_NAMES:
        if value := env.credentials.get(name):
            resolved[name] = value
        elif value := from_file.get(name):
            resolved[name] = value
            filled.append(name)
    if (
        spec.credentials is not None
        and spec.credentials.source is CredentialSource.WORKSPACE_ENV_FILE
    ):
        logger.info(
            "credentials file filled %d name(s) missing from the environment: %s",
            len(filled),
            ", ".join(filled) or "none",
        )
    band_key = resolved.get(CredentialName.BAND_API_KEY)
    if not band_key:
        raise _fail(
            f"{CredentialName.BAND_API_KEY} missing: set it in the environment (the sandbox "
            f"injects the {PROXY_MANAGED!r} sentinel under proxy-managed custody) or in the "
            "workspace env file"
        )
    if (
        spec.credentials is not None
        and spec.credentials.source is CredentialSource.PROXY_MANAGED
        and band_key != PROXY_MANAGED
    ):
        raise _fail(
            f"proxy-managed custody: {CredentialName.BAND_API_KEY} must be the {PROXY_MANAGED!r} "
            "sentinel, but a real-looking key is present; keep the real key on the host "
            "(a sandbox secret with placeholder `proxy-managed`) and remove it from the "
            "sandbox environment"
        )
    return resolved
