"""The host-side credential proxy: the sandbox sends the placeholder, the proxy the key.

Docker Sandboxes keep a real key on the host and put it on the wire for the sandbox.
Runtimes without that proxy (local host processes, the docker runtime, the sbx simulator)
run this one: a loopback reverse proxy per pinned upstream origin. The sandbox is hostile
(it can connect to any port it reaches, send malformed HTTP, choose hosts, read echoes),
so the proxy is narrow:

Client authentication: a per-box token. The host generates >=128 random bits per box and
hands them to the agent only inside its endpoint URLs (`http://127.0.0.1:PORT/<token>/...`
in BAND_REST_URL / BAND_WS_URL). Every request, the first on a connection and every later
keep-alive one, must start its target with `/<token>` (compared in constant time); the
prefix is stripped before forwarding, anything else gets 403 and the connection closes
before an upstream connection is even opened. Why a URL token: the band SDK keeps a base
URL's path for REST (it joins by concatenation) and for the Phoenix socket URL, so the
SDK needs no change, and it works the same for host processes, containers on the host
network and the simulator. A UNIX socket would need SDK transports; peer credentials
cannot tell two boxes apart (as a non-root user every local box runs as that user, a
container's peer is another pid namespace).

Credential custody: only the credential header is swapped, and only when its whole value
is a placeholder: `X-API-Key: <placeholder>` or `Authorization: Bearer <placeholder>`
(a duplicate credential header is refused). The key goes into no other header, the
target or a body. It never flows back either: every occurrence of it in a response
(status reason, headers, body, and after a WebSocket upgrade the raw server bytes) is
masked with `*` of the same length, so framing stays valid; a tail that could start a key
is held until the next bytes decide it, however late, and masked if the stream ends
first: a partial key is never released on a timer. After a 101 the WebSocket payloads
are scrubbed as one stream across frames (`FrameScrubber`), the headers between a key's
pieces held with it; a control frame's own payload is never held back. For that the
proxy must read what it passes back, so it asks for `Accept-Encoding: identity` and
offers the socket upgrade without compression extensions.

Upstream: scheme, host and port are fixed by the host at start (the operator's platform);
the request's `Host`, target form or anything in the sandbox never selects one. Plain
http/ws only to a loopback upstream; a non-loopback one is refused at start. A route's
optional `via` (`ADDRESS:PORT`, a private IPv4 literal) is a relay of the host's that
carries the connection unchanged to the upstream: the swarm runtime's relay from the
local cluster's hub network to a platform on this host's loopback.

Paths: a route forwards only the API its upstream serves to agents (its `paths`: the Band
agent REST API, the socket path, a provider's model routes; `boxnet.API_PATHS`), and only
plain paths (no dot or empty segment, no encoded dot, slash, backslash or NUL); anything
else on that host (an LLM stub's pages and turns, the platform's human or control API)
answers 403 with a short reason, before an upstream connection is opened. Each key is
swapped in only below its own path prefixes on its own route's origin (`Route.swaps`):
two upstreams on one host never get each other's key.

Limits (per process, so per box; `bandkit.proxies.wire`, shared with the egress proxy): a
request head must be complete `HEAD_TIMEOUT_S` after the proxy started waiting for it (else 408
and close), and at most `MAX_CLIENTS` client connections are open at once (more get 503
and are closed unread).

Parsing: each request head is checked on its raw bytes first, where h11 is lenient (bare
LF, obs-fold, Content-Length with Transfer-Encoding, a duplicate or non-digit
Content-Length, any Transfer-Encoding but `chunked`, absolute/authority/asterisk-form
targets, CONNECT, an Upgrade other than websocket): 400 and close. The head is then
parsed by h11, a fresh parser per request, fed only bytes that passed the check; the
request is re-serialised by h11 for the upstream (our own Host and framing, hop-by-hop
headers and trailers dropped), so the upstream never parses a byte the sandbox framed.
Responses are parsed by h11 and written back in the proxy's own framing (Content-Length
as received, else chunked; hop-by-hop headers dropped). After a 101 the connection is
piped raw both ways.

Run as `python -P -m bandkit.proxies.keyproxy PORTS_FILE [HOST]` with the config as JSON on
stdin: `{"token": "<token>", "routes": [{"upstream": "https://host:443", "paths":
["/api/v1/agent"], "swaps": [["proxy-managed", "<key>", ["/api/v1/agent"]]], "ca_pem":
""}]}` (optional `head_timeout_s` and `max_clients` override the limits; a route's
optional `port` is where it listens, so a proxy started again after a reboot serves a
container on the address and token it was created with). It writes
`{"ports": [...]}` (one per route, same order) to PORTS_FILE (0600, never through a
link), then serves until SIGTERM or until PORTS_FILE's directory (its box) no longer
exists. Keys and the token never reach argv, the ports file or a log line; a
connection's failure is never logged. `bandkit.runtimes.boxnet` starts it for a box.

The modules, one concern each:

- `config`: the config parsed into pinned `Route`s and `Limits`; key masking of
  responses (`Scrubber`, `FrameScrubber`);
- `heads`: each raw request head vetted, the token checked, the headers each side gets
  (`vet_head`, `check_head`, `strip_token`, `api_path`, `forward_headers`,
  `response_head`);
- `session`: one client connection's state machine (`Session`, `Upstream`, the raw
  WebSocket pipe);
- `server`: the listeners and the entry point (`serve`, `main`);
- `sidecar`: the entry point of a pod's sidecar (one route, key and token from files);
- `zipapp`: all of it (and h11) as one file any Python runs.
"""

from bandkit.proxies.keyproxy.config import (
    ConfigError,
    FrameScrubber,
    Limits,
    Route,
    is_loopback,
    parse_config,
)
from bandkit.proxies.keyproxy.heads import forward_headers, vet_head
from bandkit.proxies.keyproxy.server import main, serve

__all__ = [
    "ConfigError",
    "FrameScrubber",
    "Limits",
    "Route",
    "forward_headers",
    "is_loopback",
    "main",
    "parse_config",
    "serve",
    "vet_head",
]
