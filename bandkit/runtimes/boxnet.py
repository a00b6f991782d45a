"""The network side of a box: the credential proxy it gets, the CA bundle it trusts, and
the host's egress settings it inherits.

`start_proxy` runs `keyproxy` (tagged `proxy_tag(root)`, so `hostbox.stop` ends it) for
each endpoint whose host an `Injection` targets, and returns the env that points the agent
at it. `trust_bundle` writes this host's CA bundle plus a TLS platform's CA.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import yaml

from bandkit.errors import BandkitError
from bandkit.runtimes import processes

PROXY_START_TIMEOUT_S = 15.0
INSECURE_ENV = "BAND_KIT_ALLOW_INSECURE_ENDPOINTS"  # == launcher.constants (tested)


class ProxyError(BandkitError):
    """The credential proxy did not start; the message says where its log is."""


@dataclass(frozen=True)
class Injection:
    """A proxy-managed secret: the placeholder the box sees, the hosts it is swapped for."""

    hosts: tuple[str, ...]
    placeholder: str
    value: str


def proxy_tag(root: Path) -> str:
    """The tag of the box's credential proxy (host side, not part of the agent)."""
    return f"bandkit-box-proxy:{root}"


# Host settings the agent needs to reach package indexes the way this host does (an
# egress proxy, a corporate CA); like sbx setting HTTP(S)_PROXY in the VM. Values are
# passed through unchanged, and loopback is always exempt from a proxy.
HOST_NETWORK_ENV = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_INDEX",
    "UV_NATIVE_TLS",
    "UV_SYSTEM_CERTS",
    "UV_HTTP_TIMEOUT",
)
LOOPBACK_NO_PROXY = "127.0.0.1,localhost,::1"


def host_network_env() -> dict[str, str]:
    env = {name: os.environ[name] for name in HOST_NETWORK_ENV if os.environ.get(name)}
    for name in ("NO_PROXY", "no_proxy"):
        current = os.environ.get(name, "")
        env[name] = f"{current},{LOOPBACK_NO_PROXY}" if current else LOOPBACK_NO_PROXY
    return env


def host_matches(pattern: str, host: str) -> bool:
    """sbx host patterns: exact, `*.x` (one label), `**.x` (any depth), `**` (all)."""
    pattern = pattern.split(":", 1)[0] if pattern.count(":") == 1 else pattern
    if pattern == "**":
        return True
    if pattern.startswith("**."):
        return host.endswith(pattern[2:]) or host == pattern[3:]
    if pattern.startswith("*."):
        suffix = pattern[1:]
        return host.endswith(suffix) and "." not in host[: -len(suffix)]
    return pattern == host


def _endpoints(workspace: Path, env: Mapping[str, str]) -> dict[str, str]:
    path = workspace / "band.yaml"
    data = (yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None) or {}
    band = data.get("band") or {}
    from launcher.constants import DEFAULT_REST_URL, DEFAULT_WS_URL

    return {
        "BAND_REST_URL": env.get("BAND_REST_URL") or band.get("restUrl") or DEFAULT_REST_URL,
        "BAND_WS_URL": env.get("BAND_WS_URL") or band.get("wsUrl") or DEFAULT_WS_URL,
    }


def start_proxy(
    root: Path,
    workspace: Path,
    env: Mapping[str, str],
    injections: Sequence[Injection],
    *,
    ca_pem: str | None = None,
) -> dict[str, str]:
    """Start the credential proxy for endpoints whose host an injection targets; return
    the env that points the agent at it.

    The agent reaches the proxy over plain loopback HTTP and the proxy reaches a TLS
    platform over TLS (trusting `ca_pem` as well as the system roots), so a rewritten
    https/wss endpoint comes with the launcher's opt-in for non-TLS endpoints: the only
    plaintext hop is 127.0.0.1 on this host.
    """
    endpoints = _endpoints(workspace, env)
    routes: list[dict[str, object]] = []
    names: list[tuple[str, str]] = []
    for name, url in endpoints.items():
        parts = urlsplit(url)
        swaps = [
            [i.placeholder, i.value]
            for i in injections
            if any(host_matches(h, parts.hostname or "") for h in i.hosts)
        ]
        if swaps:
            routes.append({"upstream": url, "swaps": swaps, "ca_pem": ca_pem or ""})
            names.append((name, url))
    if not routes:
        return {}
    ports_file = root / "proxy.json"
    ports_file.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bandkit.runtimes.keyproxy", str(ports_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=(root / "proxy.log").open("ab"),
        env={**os.environ, processes.TAG_ENV: proxy_tag(root)},
        start_new_session=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"routes": routes}).encode())
    proc.stdin.close()
    deadline = time.monotonic() + PROXY_START_TIMEOUT_S
    while not ports_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise ProxyError(f"credential proxy did not start; see {root / 'proxy.log'}")
        time.sleep(0.02)
    ports = json.loads(ports_file.read_text())["ports"]
    rewritten: dict[str, str] = {}
    for (name, url), port in zip(names, ports, strict=True):
        parts = urlsplit(url)
        scheme = {"https": "http", "wss": "ws"}.get(parts.scheme, parts.scheme)
        rewritten[name] = urlunsplit((scheme, f"127.0.0.1:{port}", parts.path, parts.query, ""))
        if scheme != parts.scheme:
            rewritten[INSECURE_ENV] = "1"
    return rewritten


def trust_bundle(path: Path, ca_pem: str | None) -> dict[str, str]:
    """Write this host's CA bundle plus `ca_pem` to `path`; the env that makes the agent
    (and uv) trust it. Empty when there is no platform CA."""
    if not ca_pem:
        return {}
    host = os.environ.get("SSL_CERT_FILE", "")
    parts = [Path(host).read_text(encoding="utf-8")] if host and Path(host).is_file() else []
    path.write_text("\n".join([*parts, ca_pem]), encoding="utf-8")
    path.chmod(0o644)
    return {"SSL_CERT_FILE": str(path), "REQUESTS_CA_BUNDLE": str(path)}
