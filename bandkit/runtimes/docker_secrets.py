"""The docker runtime's credentials: the keychain, the credential proxy, the trust bundle.

Every secret stays on the host (`Keychain`) by default: the container sees the
placeholder and the credential proxy (`boxnet`, on the gateway, reached through the
egress proxy only) swaps in the key on the wire; `_start_proxy` starts it. A sandbox
named in `key_in_container` gets the real values instead (`KEY_IN_CONTAINER` warns).
`_trust_bundle` is the host's CA bundle plus the platform's CA, mounted read-only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from bandkit.fsio import write_atomic, write_private
from bandkit.runtimes import boxnet, hostbox
from bandkit.runtimes.base import SandboxError, Secret
from bandkit.runtimes.docker_cli import DockerCli
from bandkit.runtimes.keychain import KeychainSecrets

KEY_IN_CONTAINER = (
    "docker runtime: {env} is passed to container {name} as a plain environment variable "
    "(env-file tier, opted in for this sandbox); the real key is inside the container"
)


class DockerSecrets(KeychainSecrets, DockerCli):
    """Secrets and the credential proxy (a part of `DockerRuntime`)."""

    def _trust_bundle(self, name: str, ca_pem: str | None) -> Path | None:
        """The host's CA bundle (SSL_CERT_FILE: a TLS-intercepting egress path's CA) plus
        the platform's CA, for uv and the agent inside; None when the host sets neither."""
        host = os.environ.get("SSL_CERT_FILE", "")
        if not (host and Path(host).is_file()) and not ca_pem:
            return None
        parts = [Path(host).read_text(encoding="utf-8")] if host and Path(host).is_file() else []
        parts += [ca_pem] if ca_pem else []
        bundle = self._box(name) / "ca-bundle.crt"
        write_atomic(bundle, "\n".join(parts), mode=0o644)
        return bundle

    def _start_proxy(
        self,
        name: str,
        workspace: Path,
        env: Mapping[str, str],
        secrets: Sequence[Secret],
        ca_pem: str | None,
        gateway: str,
    ) -> dict[str, str]:
        box = self._box(name)
        hostbox.stop(box)  # a restart gets a fresh proxy
        injections = [boxnet.Injection(s.hosts, s.placeholder, s.value) for s in secrets]
        try:  # on the gateway: reached through the egress proxy only (hostguard)
            urls = boxnet.start_proxy(
                box, workspace, env, injections, ca_pem=ca_pem, listen=gateway
            )
        except (hostbox.BoxError, boxnet.ProxyError) as exc:
            raise SandboxError(f"docker: credential proxy for {name}: {exc}") from None
        write_private(box / "endpoints.json", json.dumps(urls))
        return urls
