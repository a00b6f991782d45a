"""A docker box's credentials: the credential proxy and the trust bundle.

Every secret stays on the host (the runtime's keychain) by default: the container sees
the placeholder and the credential proxy (`boxnet`, on the gateway, reached through the
egress proxy only) swaps in the key on the wire; `start_proxy` starts it. A sandbox
named in `key_in_container` gets the real values instead (`KEY_IN_CONTAINER` warns).
`trust_bundle` is the host's CA bundle plus the platform's CA, mounted read-only.
`restart_proxy` starts the proxy again after a reboot or a kill, on the address, ports
and token the container was created with (`endpoints.json`, 0600 in the host-side box).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from bandkit import processes
from bandkit.fsio import UnsafePathError, read_regular, write_atomic, write_private
from bandkit.runtimes import boxnet, hostbox
from bandkit.runtimes.base import SandboxError, Secret
from bandkit.runtimes.docker.ownership import Box

PROXY_INPUTS = "proxy-inputs.json"  # what the proxy forwards to (no key): for a restart
ENDPOINTS = "endpoints.json"  # the URLs the container got (0600: they hold its token)
KEY_IN_CONTAINER = (
    "docker runtime: {env} is passed to container {name} as a plain environment variable "
    "(env-file tier, opted in for this sandbox); the real key is inside the container"
)


def trust_bundle(box: Box, ca_pem: str | None) -> Path | None:
    """The host's CA bundle (SSL_CERT_FILE: a TLS-intercepting egress path's CA) plus
    the platform's CA, for uv and the agent inside; None when the host sets neither."""
    host = os.environ.get("SSL_CERT_FILE", "")
    if not (host and Path(host).is_file()) and not ca_pem:
        return None
    parts = [Path(host).read_text(encoding="utf-8")] if host and Path(host).is_file() else []
    parts += [ca_pem] if ca_pem else []
    bundle = box.path / "ca-bundle.crt"
    write_atomic(bundle, "\n".join(parts), mode=0o644)
    return bundle


def start_proxy(
    box: Box,
    workspace: Path,
    env: Mapping[str, str],
    secrets: Sequence[Secret],
    ca_pem: str | None,
    gateway: str,
) -> dict[str, str]:
    """Start the box's credential proxy on `gateway`; the URLs the container gets."""
    hostbox.stop(box.path)  # a restart gets a fresh proxy
    injections = [boxnet.Injection.of(s) for s in secrets]
    pinned = boxnet.pinned_endpoints(env)  # what it forwards to: host-side, no secret
    inputs = {"pinned": pinned, "ca_pem": ca_pem or "", "gateway": gateway}
    write_private(box.path / PROXY_INPUTS, json.dumps(inputs))
    try:  # on the gateway: reached through the egress proxy only (hostguard)
        urls = boxnet.start_proxy(
            box.path, workspace, env, injections, ca_pem=ca_pem, listen=gateway
        )
    except (hostbox.BoxError, boxnet.ProxyError) as exc:
        raise SandboxError(f"docker: credential proxy for {box.name}: {exc}") from None
    write_private(box.path / ENDPOINTS, json.dumps(urls))
    return urls


def proxy_expected(box: Box) -> bool:
    """Whether the box's container was created to use a credential proxy."""
    return (box.path / PROXY_INPUTS).is_file()


def proxy_running(box: Box) -> bool:
    return bool(processes.tagged_pids(boxnet.proxy_tag(box.path)))


def restart_proxy(box: Box, secrets: Sequence[Secret]) -> None:
    """Start the credential proxy again (a reboot, a kill) where the container looks
    for it: the same gateway address, ports and token (its env names them), with the
    keys `secrets` (the keychain's). Nothing when it runs or the box never had one."""
    if not proxy_expected(box) or proxy_running(box):
        return
    try:
        inputs = json.loads(read_regular(box.path / PROXY_INPUTS, what="proxy inputs")[0])
        urls = json.loads(read_regular(box.path / ENDPOINTS, what="proxy endpoints")[0])
        pinned, gateway = dict(inputs["pinned"]), str(inputs["gateway"])
        ca_pem = str(inputs.get("ca_pem") or "") or None
    except (OSError, UnsafePathError, ValueError, KeyError, TypeError) as exc:
        raise SandboxError(
            f"docker: the credential proxy record of {box.name} is unreadable ({exc}); "
            "remove the sandbox and provision it again"
        ) from None
    injections = [boxnet.Injection.of(s) for s in secrets]
    try:
        again = boxnet.start_proxy(
            box.path, None, pinned, injections, ca_pem=ca_pem, listen=gateway, again=urls
        )
    except boxnet.ProxyError as exc:
        raise SandboxError(f"docker: credential proxy for {box.name}: {exc}") from None
    if again != urls:
        hostbox.stop(box.path)
        raise SandboxError(
            f"docker: the credential proxy of {box.name} came back elsewhere than its "
            "container looks for it; remove the sandbox and provision it again"
        )
