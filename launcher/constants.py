"""Facts the launcher, the image and the runtimes share: import them, never retype them.

Everything here is a plain constant or an enum, so importing this module costs
nothing measurable (the launcher's fast path depends on that).
"""

from __future__ import annotations

from enum import StrEnum

# The workload identity the image creates (`useradd -u 1000 agent`, `ENV HOME`).
AGENT_UID = 1000
AGENT_HOME = "/home/agent"
AGENT_USER = "agent"

# Image contract: where the immutable SDK lives and the env vars that point into it.
DEFAULT_SDK_HOME = "/opt/band"
DEFAULT_SDK_PYTHON = f"{DEFAULT_SDK_HOME}/venv/bin/python"
DEFAULT_SDK_UV = f"{DEFAULT_SDK_HOME}/bin/uv"

# Production endpoints: the defaults when neither the environment nor band.yaml sets one.
DEFAULT_REST_URL = "https://app.band.ai"
DEFAULT_WS_URL = "wss://app.band.ai/api/v1/socket/websocket"

# band.yaml: its file name in the workspace, the one schema version, entrypoint default.
CONFIG_FILENAME = "band.yaml"
SCHEMA_VERSION = "1"
DEFAULT_ENTRYPOINT = "main.py"
DEFAULT_PROJECT_PATH = "."

# The Band key value a sandbox holds under proxy-managed custody: the host-side
# proxy swaps it for the real key on the wire. Same spelling as
# band.credentials.PROXY_MANAGED_API_KEY (pinned by a test); a different concept
# from CredentialSource.PROXY_MANAGED, the custody tier's name.
PROXY_MANAGED = "proxy-managed"

# The starter's agent.id before provisioning; the launcher refuses to start with it.
PLACEHOLDER_AGENT_ID = "replace-with-agent-id"

# Conventional location of the workspace-env-file tier's secrets file.
DEFAULT_SECRETS_PATH = ".band/secrets.env"


class EnvVar(StrEnum):
    """Every environment variable the launcher reads (case-insensitively) or sets."""

    WORKSPACE_DIR = "WORKSPACE_DIR"  # set by the sandbox runtime
    CONFIG_PATH = "BAND_KIT_CONFIG_PATH"  # the one path override: where band.yaml is
    ALLOW_INSECURE_ENDPOINTS = "BAND_KIT_ALLOW_INSECURE_ENDPOINTS"  # "1": http/ws allowed
    AGENT_UID = "BAND_KIT_AGENT_UID"  # the uid the launcher must run as (default 1000)
    SDK_HOME = "BAND_SDK_HOME"
    SDK_PYTHON = "BAND_SDK_PYTHON"
    SDK_UV = "BAND_SDK_UV"
    AGENT_ID = "BAND_AGENT_ID"
    REST_URL = "BAND_REST_URL"
    WS_URL = "BAND_WS_URL"
    LOG_LEVEL = "BAND_LOG_LEVEL"
    # Seconds the launcher waits, before the exec, for the endpoints to accept a connection
    # (a cluster runtime sets it: an agent may start before its proxy is reachable).
    ENDPOINT_WAIT = "BAND_KIT_ENDPOINT_WAIT_S"
    HOME = "HOME"


# uv's settings that change what `uv sync --locked` installs from one lock (which groups,
# editable or not, which sources and config): the sync's fast path compares them too, so
# a venv synced without a group is never taken for one with it. Others (the cache, the
# link mode, bytecode) change how it installs, not what.
SYNC_SELECTION_ENV = (
    "UV_NO_DEV",
    "UV_NO_GROUP",
    "UV_NO_DEFAULT_GROUPS",
    "UV_NO_EDITABLE",
    "UV_NO_SOURCES",
    "UV_CONFIG_FILE",
    "UV_NO_CONFIG",
)

# Shorter alias other packages import: `from launcher.constants import INSECURE_ENDPOINTS_ENV`.
INSECURE_ENDPOINTS_ENV = EnvVar.ALLOW_INSECURE_ENDPOINTS.value


class CredentialName(StrEnum):
    """The documented credential names: the only ones a secrets file may define,
    and the canonical (uppercase) names the agent process receives."""

    BAND_API_KEY = "BAND_API_KEY"
    OPENAI_API_KEY = "OPENAI_API_KEY"
    ANTHROPIC_API_KEY = "ANTHROPIC_API_KEY"
    COPILOT_GITHUB_TOKEN = "COPILOT_GITHUB_TOKEN"  # noqa: S105 - a name, not a value
    GH_TOKEN = "GH_TOKEN"  # noqa: S105
    GITHUB_TOKEN = "GITHUB_TOKEN"  # noqa: S105


CREDENTIAL_NAMES: tuple[str, ...] = tuple(name.value for name in CredentialName)


class CredentialSource(StrEnum):
    """Custody tiers `credentials.source` may select in band.yaml."""

    PROXY_MANAGED = "proxy-managed"  # the VM holds only the sentinel
    WORKSPACE_ENV_FILE = "workspace-env-file"  # plaintext fallback, warned about


# Files the launcher writes under runtime.statePath / runtime.logPath.
SYNC_LOCK_FILENAME = "dependency_sync.lock"
STAMP_FILENAME = "launcher-stamp.json"
LOG_FILENAME = "launcher.log"

# Lock timeouts (seconds): dependency sync here, repository bootstrap in repo_init.
SYNC_LOCK_TIMEOUT_S = 600.0
REPO_LOCK_TIMEOUT_S = 120.0
