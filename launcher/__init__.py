"""The in-sandbox launcher: a locked uv project in, a running Band agent out.

Run as `$BAND_SDK_PYTHON -m launcher` (as the agent user, uid 1000), or
`python -m launcher --check` for a dry run. The phases, one module each:

1. `identity`     run as the agent uid, nothing else
2. `config`       WORKSPACE_DIR, band.yaml (strict `schema`), env overrides, endpoints, agent id
3. `paths`        project and entrypoint fenced in the workspace; runtime paths outside it
4. `credentials`  custody tier; the secrets file's GUARDS; environment wins
5. `repo`         optional `repo:` clone/reuse via band-sdk's `band.docker.repo_init`
6. `sync`         `uv sync --locked` under a file lock, skipped when nothing changed (`stamp`)
7. `exec`         `os.execve` the venv's python on the entrypoint (same pid, direct signals)

Logging (`logconfig`, `logsetup`) is set up first, from the SDK's `BAND_LOG_*`
settings read as band-sdk's `LogSettings` reads them (a bad value is `[config]`):
the console on stderr (or BAND_LOG_STREAM), `<logPath>/launcher.log` once paths
resolve, and BAND_LOG_FILE when set.

`launch` holds `resolve_launch` (phases 1-4, no side effects) and `execute`
(5-7); `run.main` is the only place errors become exit codes. Every failure is a
`LauncherError(phase, message)` that prints as `[phase] message`; no message or
log line carries a secret value. Imports are lazy: pydantic only when band.yaml
changed, filelock only when uv must run, band-sdk only for a `repo:` section.
"""

from __future__ import annotations

from launcher.constants import (
    AGENT_HOME,
    AGENT_UID,
    CREDENTIAL_NAMES,
    DEFAULT_REST_URL,
    DEFAULT_WS_URL,
    INSECURE_ENDPOINTS_ENV,
    PLACEHOLDER_AGENT_ID,
    PROXY_MANAGED,
    CredentialName,
    CredentialSource,
    EnvVar,
)
from launcher.errors import LauncherError, Phase

__version__ = "0.1.0"

__all__ = [
    "AGENT_HOME",
    "AGENT_UID",
    "CREDENTIAL_NAMES",
    "DEFAULT_REST_URL",
    "DEFAULT_WS_URL",
    "INSECURE_ENDPOINTS_ENV",
    "PLACEHOLDER_AGENT_ID",
    "PROXY_MANAGED",
    "CredentialName",
    "CredentialSource",
    "EnvVar",
    "LauncherError",
    "Phase",
    "__version__",
]
