"""The docker runtime's egress proxy: the only way out of a sandbox, default deny.

A docker sandbox sits alone on an internal bridge network (no route off the host). Its
one exit is this host-side HTTP proxy, listening on that network's gateway address and
serving only clients from that network. It takes two request forms and nothing else:

- `CONNECT host:port` (HTTPS, WebSockets, anything tunnelled): answered
  `HTTP/1.1 200 Connection established`, then the bytes are piped both ways;
- plain HTTP in absolute form (`GET http://host[:port]/path HTTP/1.1`): forwarded in
  origin form with `Host` set to the target and `Connection: close`, proxy headers
  dropped, the response piped back untouched.

Every request head is parsed with h11; a malformed head, an origin-form request or any
other scheme is answered 400. A target no rule admits is answered 403. Every decision is
appended to the policy log as one JSON line (`sandbox`, `decision`, `host`, `proxy_type`,
`rule`, `source`, `reason`, `time`), which `summarize` folds into the shape of
`sbx policy log --json` (`blocked_hosts` / `allowed_hosts` with counts and last seen).

Rules are sbx host patterns; which destinations only a rule naming the exact address
opens (this host, its networks, private ranges) is `rules`' to say. The name is
resolved once and the connection goes to the addresses checked (no second lookup to
rebind). The rules are the kit's allowlist (`caps.network.allow` of the kit spec), the
sandbox's own (`SandboxSpec.egress`), the platform routes the runtime adds (its
credential proxy), and per-sandbox grants (`kit.allow`) kept in a grants file that the
running proxy re-reads when it changes.

Run as `python -m bandkit.proxies.egress CONFIG` (see `start`); it writes
`{"port": N}` to the ports file atomically, then serves until SIGTERM or until its box
directory is removed. Header values are never logged. The limits it shares with the
credential proxy are `bandkit.proxies.wire`'s.

The modules, one concern each:

- `rules`: rules, host and port parsing, the policy they form, the kit allowlist;
- `hostnet`: this host's own interface addresses (from the kernel);
- `request`: a request head parsed into a `Request`;
- `log`: the policy log and its summary;
- `server`: the server (`Proxy`, `serve`) and its `Config`;
- `box`: a box's proxy, host side (start, restart, stop, grants, proxy variables).
"""

from bandkit.proxies.egress.box import (
    CONFIG_NAME,
    GRANTS_NAME,
    PORTS_NAME,
    add_grant,
    egress_tag,
    proxy_env,
    remove_grant,
    restart,
    running,
    start,
    stop,
)
from bandkit.proxies.egress.log import LOG_NAME, read_log, render, summarize
from bandkit.proxies.egress.rules import (
    EgressError,
    Policy,
    Rule,
    is_local,
    kit_allowlist,
    parse_rule,
)
from bandkit.proxies.egress.server import Config, serve

__all__ = [
    "CONFIG_NAME",
    "GRANTS_NAME",
    "LOG_NAME",
    "PORTS_NAME",
    "Config",
    "EgressError",
    "Policy",
    "Rule",
    "add_grant",
    "egress_tag",
    "is_local",
    "kit_allowlist",
    "parse_rule",
    "proxy_env",
    "read_log",
    "remove_grant",
    "render",
    "restart",
    "running",
    "serve",
    "start",
    "stop",
    "summarize",
]
