"""The `docker` runtime: kit-image containers that are sandboxes, launched like the kit.

The container runs the kit's own launch command (from `spec.yaml`, so it cannot drift):
`band-entrypoint.sh` as the entrypoint (proxy CA, drop to uid 1000 with an empty
bounding set and no-new-privs), then `python -m launcher`. The workspace is bind-mounted
at the same absolute path and `WORKSPACE_DIR` points at it; the container's stdout/stderr
is the startup log (`docker logs`).

Isolation (a sandbox is hostile):

- network: each sandbox gets its own internal bridge network (no route off the host),
  recorded in the manifest before it is made and removed at teardown. The only way out
  is the sandbox's egress proxy (`egress`): a host process listening on that network's
  gateway address, serving only that network, default deny, admitting the kit's
  allowlist (`caps.network.allow`), the spec's `egress` hosts, the platform route and
  per-sandbox grants (`allow`, `kit.allow`), logging every decision (`policy_log`).
  `HTTP(S)_PROXY` in the container name it; `NO_PROXY` is the container's loopback.
- host firewall (`hostguard`): the gateway address is the host itself, and a bridge's
  packets to any host address take the host's INPUT chain, where Docker's isolation does
  not apply. So before the container exists, a chain per network (recorded in the
  manifest and the box first, re-installed at `start`, removed at teardown) drops all
  the bridge sends to the host but TCP to the egress proxy's port on the gateway: no
  sshd, dev server or database on 0.0.0.0, no UDP/DNS, no ICMP. Fails closed (no
  iptables, not root: no sandbox); `host_firewall=False` or `BANDKIT_HOST_FIREWALL=off`
  is the operator's warned opt-out.
- privileges: `--cap-drop ALL` plus only SETUID/SETGID/SETPCAP, which the entrypoint's
  own `setpriv` needs to drop to uid 1000 with an empty bounding set;
  `no-new-privileges`; pid and memory limits.
- identity (`identity`): without a user namespace the agent is host uid 1000, so
  each box's agent (and every `exec`) runs with a primary gid of its own, drawn so that
  no host account has or can take it: the kernel opens a process's /proc (environ,
  memory, root) to another unprivileged one only when uid and gid both match, so a host
  process of uid 1000 cannot read the proxy token. Recorded before the container exists;
  an image whose entrypoint predates it is refused.
- restarts: no restart policy, on purpose. The firewall chain and both proxies are host
  state (a reboot flushes the one and kills the others); a container the daemon started
  by itself at boot would run before them, reaching every service on the host's
  addresses. `start` (so `resume` and `kit.resume`) brings back the chain first, then
  the proxies where the container's env names them, then the container.
- ownership: the container and the network carry the label `bandkit.owner=<run id>`;
  the run id is recorded in the manifest (and the box's `owner.json`). Removal checks the
  label: a same-named container or network without it is reported and kept.

Credentials, decided here and never from the workspace: by default every secret stays
on the host. The container sees the placeholder; the credential proxy (`boxnet`, bound to
the network's gateway address, which the host firewall lets no container reach directly)
swaps in the key on the way to the platform (and to host-set model APIs), and the
container reaches it through its egress proxy, which admits exactly the credential
proxy's addresses (the "platform" rules). `NO_PROXY` names the container's own loopback,
so a local server inside it (an adapter's MCP endpoint) is reached directly. A sandbox
named in `key_in_container` (an operator's explicit runtime option) gets the real values
as environment variables instead, through a 0600
`--env-file` (never argv); `warnings` says so.

`PROXY_CA_CERT_B64` is passed when the platform uses TLS (`SandboxSpec.ca_cert_pem`). The
host's `SSL_CERT_FILE` bundle plus that CA is mounted read-only as the container's
`SSL_CERT_FILE`, so TLS through an intercepting network path verifies as on the host.

Box layout (`<run_dir>/docker/<name>/`, host side, never mounted except the CA bundle):
owner.json, egress-config.json, egress.json (port), grants.json, policy.log, egress.log,
proxy.json / proxy.log (credential proxy), endpoints.json, ca-bundle.crt.

The modules, one concern each:

- `runtime`: `DockerRuntime`, the lifecycle, the verbs and the removers; the limits.
- `engine`: `Engine`, the docker binary run with argv and a timeout; a container's state.
- `ownership`: `Box` (a sandbox's host-side directory and its owner record), the labels,
  removal of only what is ours.
- `identity`: the agent's gid per box, and the image's labels that allow it.
- `network`: the network's address, egress rules, the policy log, the firewall's removal.
- `credentials`: the credential proxy (start, restart) and the trust bundle.
- `interruptions`: pause, disconnect and reconnect a box (`Endpoint`), for the smoke.
"""

from bandkit.runtimes.docker.interruptions import Endpoint
from bandkit.runtimes.docker.ownership import LABEL, OWNER_LABEL
from bandkit.runtimes.docker.runtime import DEFAULT_IMAGE, DockerRuntime

__all__ = ["DEFAULT_IMAGE", "LABEL", "OWNER_LABEL", "DockerRuntime", "Endpoint"]
