"""The network side of a box: the credential proxy it gets, the CA bundle it trusts, and
the host's egress settings it inherits.

`start_proxy` runs `keyproxy` (tagged `proxy_tag(root)`, so `hostbox.stop` ends it) for
each pinned endpoint that an `Injection`'s scope names, and returns the env that points
the agent at it. The endpoints are pinned host-side (`pinned_endpoints`: the operator's
BAND_REST_URL / BAND_WS_URL, else production, and the model APIs the host set), never
taken from the workspace; each start draws a fresh per-box token that the proxy requires
on every request (see `keyproxy`). The proxy process gets a minimal environment, its
config (keys, token) on stdin. `trust_bundle` writes this host's CA bundle plus a TLS
platform's CA.

What a box's proxy forwards at all is data: `API_PATHS`, the path prefixes each kind of
upstream serves to agents (the Band agent API and its socket; the providers' model
routes), below the pinned URL's own path; anything else on that host answers 403. A key
goes only where one of its scopes says (`key_scopes`: URL prefixes, so scheme, host,
port and a path prefix): the platform and a model API on the same host, on two ports,
never get each other's key.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import bandkit
from bandkit import processes
from bandkit.errors import BandkitError
from bandkit.fsio import read_regular
from bandkit.proxies import keyproxy

if TYPE_CHECKING:
    from bandkit.runtimes.base import Secret

KEYPROXY_MODULE = "bandkit.proxies.keyproxy"  # what the proxy process runs (`python -m`)
PROXY_START_TIMEOUT_S = 15.0
INSECURE_ENV = "BAND_KIT_ALLOW_INSECURE_ENDPOINTS"  # == launcher.constants (tested)
REST_ENV = "BAND_REST_URL"
WS_ENV = "BAND_WS_URL"
# Model endpoints a box may be given host-side (the demo's stub and real brains): proxied
# like the platform's, so an LLM key is swapped in on the wire too. Only when set.
LLM_ENVS = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL")
SCHEMES = {
    REST_ENV: ("https", "http"),
    WS_ENV: ("wss", "ws"),
    **{name: ("https", "http") for name in LLM_ENVS},
}
SOCKET_PATH = "/api/v1/socket/websocket"  # the platform's (and the emulator's) socket path
TOKEN_BYTES = 32  # the per-box proxy token: 256 random bits
# What each kind of upstream serves to an agent, as path prefixes below the pinned URL's
# own path (a prefix matches itself and what lies below it; "" is the pinned path).
# The Band REST client (band_rest's agent_api_*) calls only /api/v1/agent/...: an agent
# key reaches no human (/api/v1/me) or control route; the socket client adds only a
# query to the pinned socket URL. Anthropic's SDK (the claude CLI) calls /v1/messages
# (count_tokens is below it) and /v1/models; OpenAI's base URL ends in /v1 and the SDKs
# (codex: responses; crewai/litellm: chat/completions) call below it.
API_PATHS: dict[str, tuple[str, ...]] = {
    REST_ENV: ("/api/v1/agent",),
    WS_ENV: ("",),
    "ANTHROPIC_BASE_URL": ("/v1/messages", "/v1/models"),
    "OPENAI_BASE_URL": ("/responses", "/chat/completions", "/models"),
}
DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}


class ProxyError(BandkitError):
    """The credential proxy did not start; the message says where its log is."""


@dataclass(frozen=True)
class Injection:
    """A proxy-managed secret: the placeholder the box sees, swapped for `value` only on
    requests under one of `scopes` (URL prefixes: `key_scopes`)."""

    scopes: tuple[str, ...]
    placeholder: str
    value: str = field(repr=False)

    @classmethod
    def of(cls, secret: Secret) -> Injection:
        return cls(secret.scopes, secret.placeholder, secret.value)


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


def _ws_for(rest_url: str) -> str:
    """The platform's socket URL when only its REST URL is configured (same origin, the
    platform's socket path)."""
    parts = urlsplit(rest_url)
    scheme = {"https": "wss", "http": "ws"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, SOCKET_PATH, "", ""))


def pinned_endpoints(env: Mapping[str, str]) -> dict[str, str]:
    """The platform endpoints a box's proxy may reach: the operator's BAND_REST_URL /
    BAND_WS_URL (host-side configuration the runtime got at provision time), else
    production. Never the workspace's band.yaml: the sandbox can write that. Model API
    base URLs the host put in the sandbox's env (`LLM_ENVS`) are pinned the same way."""
    from launcher.constants import DEFAULT_REST_URL, DEFAULT_WS_URL

    rest = env.get(REST_ENV) or DEFAULT_REST_URL
    ws = env.get(WS_ENV) or (_ws_for(rest) if env.get(REST_ENV) else DEFAULT_WS_URL)
    models = {name: env[name] for name in LLM_ENVS if env.get(name)}  # host-set model APIs
    return {REST_ENV: rest, WS_ENV: ws, **models}


def upstream_origin(name: str, url: str) -> tuple[str, str]:
    """(origin, host) of a pinned endpoint; ProxyError for one the key may not go to."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        raise ProxyError(f"{name} is not a valid URL") from None
    if parts.scheme not in SCHEMES[name] or not host:
        raise ProxyError(f"{name} must be a {' or '.join(SCHEMES[name])} URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ProxyError(f"{name} must not embed credentials (user:password@)")
    if parts.scheme in ("http", "ws") and not keyproxy.is_loopback(host):
        raise ProxyError(
            f"{name} {parts.scheme}://{host}: the credential proxy sends the key over plain "
            f"{parts.scheme} only to a loopback platform; use https/wss"
        )
    netloc = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{netloc}{f':{port}' if port else ''}", host


Origin = tuple[str, str, int]  # (scheme, host, port), the port explicit


def _origin(url: str) -> tuple[Origin, str]:
    """((scheme, host, port), path) of a URL; ValueError when it has no scheme or host."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in DEFAULT_PORTS or not host:
        raise ValueError(url)
    return (scheme, host, parts.port or DEFAULT_PORTS[scheme]), parts.path


def api_paths(name: str, url: str) -> tuple[str, ...]:
    """The paths the proxy forwards for pinned endpoint `name` at `url`: `API_PATHS`
    below the URL's own path (`/` when that leaves nothing)."""
    base = urlsplit(url).path.rstrip("/")
    if name == WS_ENV:
        base = urlsplit(url).path  # the socket URL is the socket itself
    return tuple(base + path or "/" for path in API_PATHS[name])


def key_scopes(name: str, url: str) -> tuple[str, ...]:
    """The scopes of a key meant for pinned endpoint `name` at `url`: its origin (the port
    explicit) and each API path (`api_paths`), e.g. `http://127.0.0.1:8080/api/v1/agent`.
    ProxyError for a URL without an http(s)/ws(s) scheme or a host."""
    try:
        (scheme, host, port), _ = _origin(url)
    except ValueError:
        raise ProxyError(f"{name} must be an http(s) or ws(s) URL with a host") from None
    netloc = f"[{host}]" if ":" in host else host
    return tuple(f"{scheme}://{netloc}:{port}{path}" for path in api_paths(name, url))


def band_key_scopes(rest_url: str, ws_url: str = "") -> tuple[str, ...]:
    """An agent key's scopes: the platform's agent REST API and its socket (the socket
    URL derived from the REST URL when not given, as `pinned_endpoints` does)."""
    pinned = pinned_endpoints({REST_ENV: rest_url, **({WS_ENV: ws_url} if ws_url else {})})
    return key_scopes(REST_ENV, pinned[REST_ENV]) + key_scopes(WS_ENV, pinned[WS_ENV])


def _prefixes(injection: Injection, origin: Origin) -> list[str]:
    """The path prefixes under which `injection` applies at `origin` (none: not there)."""
    out = []
    for scope in injection.scopes:
        try:
            where, path = _origin(scope)
        except ValueError:
            raise ProxyError(
                "a key scope must be a URL prefix scheme://host[:port][/path] "
                f"(http, https, ws or wss), not {scope[:80]!r}"
            ) from None
        if where == origin:
            out.append(path or "/")
    return out


def _proxy_env() -> dict[str, str]:
    """All the proxy process gets: where its code is, its tag, the host's trust store
    location (to verify a TLS platform). No operator environment, no keys."""
    env = {"PYTHONPATH": str(Path(bandkit.__file__).resolve().parents[1]), "LANG": "C.UTF-8"}
    env.update({k: os.environ[k] for k in ("SSL_CERT_FILE", "SSL_CERT_DIR") if os.environ.get(k)})
    return env


def start_proxy(
    root: Path,
    workspace: Path | None,
    env: Mapping[str, str],
    injections: Sequence[Injection],
    *,
    ca_pem: str | None = None,
    listen: str = "127.0.0.1",
    again: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Start the credential proxy for the pinned endpoints an injection's scope names;
    return the env that points the agent at it ({} when none does: the key then goes
    nowhere). Each route forwards only its kind's `api_paths`, and swaps a key in only
    under that key's scopes there.

    The upstreams are `pinned_endpoints(env)`; `workspace` is not read (its band.yaml is
    the sandbox's to write). The agent reaches the proxy over plain loopback HTTP at
    `http://127.0.0.1:PORT/<token>/...`, the token fresh per start and handed only to
    this box (in the returned URLs, never logged here); the proxy reaches a TLS platform
    over TLS (trusting `ca_pem` as well as the system roots), so a rewritten https/wss
    endpoint comes with the launcher's opt-in for non-TLS endpoints: the only plaintext
    hop is 127.0.0.1 on this host. `listen` binds it elsewhere instead: the docker
    runtime's sandbox network gateway, so that the container's own loopback (an adapter's
    local MCP server) stays its own and bypasses the egress proxy.

    `again`: the URLs an earlier start returned, for a proxy started again under a box
    that still holds them (a container after a reboot): the same token and ports, so the
    box finds it where it was; ProxyError when they do not fit these routes.
    """
    del workspace  # never consulted: kept so callers need not change
    names, routes = proxy_routes(env, injections, ca_pem)
    if not routes:
        return {}
    token = secrets.token_urlsafe(TOKEN_BYTES)
    if again is not None:
        token = _same_place(again, names, routes)
    ports_file = root / "proxy.json"
    ports_file.unlink(missing_ok=True)
    log = root / "proxy.log"
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        log_fd = os.open(log, flags, 0o600)
    except OSError as exc:
        raise ProxyError(f"cannot open the credential proxy's log {log}: {exc.strerror}") from None
    with os.fdopen(log_fd, "ab") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", KEYPROXY_MODULE, str(ports_file), listen],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**_proxy_env(), processes.TAG_ENV: proxy_tag(root)},
            cwd="/",
            start_new_session=True,
        )
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps({"token": token, "routes": routes}).encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass  # it exited already; its log says why
    deadline = time.monotonic() + PROXY_START_TIMEOUT_S
    while not ports_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()  # no proxy half-started: it would hold the keys with no box using it
            proc.wait()
            raise ProxyError(f"credential proxy did not start; see {log}")
        time.sleep(0.02)
    content, _ = read_regular(ports_file, what="the credential proxy's ports file")
    return proxied_urls(names, json.loads(content)["ports"], token, listen)


Routes = tuple[list[tuple[str, str]], list[dict[str, object]]]


def proxy_routes(
    env: Mapping[str, str], injections: Sequence[Injection], ca_pem: str | None = None
) -> Routes:
    """The credential proxy's routes for the pinned endpoints an injection's scope names
    (its config's `routes`, each upstream the pinned origin), and the (env name, URL) each
    one stands for, in the same order; both empty when no key goes anywhere."""
    routes: list[dict[str, object]] = []
    names: list[tuple[str, str]] = []
    for name, url in pinned_endpoints(env).items():
        try:
            pinned, _ = _origin(url)
        except ValueError:
            continue  # no scope can name it: no key goes there
        swaps = [
            [i.placeholder, i.value, prefixes]
            for i in injections
            if (prefixes := _prefixes(i, pinned))
        ]
        if swaps:
            origin, _ = upstream_origin(name, url)
            routes.append(
                {
                    "upstream": origin,
                    "paths": list(api_paths(name, url)),
                    "swaps": swaps,
                    "ca_pem": ca_pem or "",
                }
            )
            names.append((name, url))
    return names, routes


def proxied_urls(
    names: Sequence[tuple[str, str]], ports: Sequence[int], token: str, listen: str
) -> dict[str, str]:
    """The env that points the agent at the proxy: each pinned URL on `listen` at its
    route's port below the token, a TLS scheme made plain (with the launcher's opt-in)."""
    rewritten: dict[str, str] = {}
    for (name, url), port in zip(names, ports, strict=True):
        parts = urlsplit(url)
        scheme = {"https": "http", "wss": "ws"}.get(parts.scheme, parts.scheme)
        path = f"/{token}{parts.path}"
        where = f"[{listen}]" if ":" in listen else listen
        rewritten[name] = urlunsplit((scheme, f"{where}:{port}", path, parts.query, ""))
        if scheme != parts.scheme:
            rewritten[INSECURE_ENV] = "1"
    return rewritten


def _same_place(
    again: Mapping[str, str], names: Sequence[tuple[str, str]], routes: list[dict[str, object]]
) -> str:
    """The token of URLs an earlier start returned; each route gets its old port."""
    tokens = set()
    for (name, _url), route in zip(names, routes, strict=True):
        parts = urlsplit(again.get(name, ""))
        segments = parts.path.split("/")
        if parts.port is None or len(segments) < 2 or not segments[1]:
            raise ProxyError(f"the box's recorded {name} is not a proxy URL; create it again")
        route["port"] = parts.port
        tokens.add(segments[1])
    if len(tokens) != 1:
        raise ProxyError("the box's recorded proxy URLs disagree on their token; create it again")
    return tokens.pop()


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
