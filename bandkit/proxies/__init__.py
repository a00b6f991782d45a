"""The host-side proxies a box's traffic goes through, each run as its own process.

- `egress`: the docker runtime's egress proxy, a sandbox's only way out (default deny,
  sbx host rules, a policy log); `python -m bandkit.proxies.egress CONFIG`.
- `keyproxy`: the credential proxy, which swaps a placeholder for the real key on the
  wire to a pinned upstream; `python -P -m bandkit.proxies.keyproxy PORTS_FILE [HOST]`.
- `wire`: what both share: the head limit and timeout, the client cap, the refusal of a
  malformed head, upstream connects, the byte copy and the process lifetime.

The runtimes start them (`bandkit.runtimes.boxnet` the credential proxy, `egress.start`
the egress proxy) and find them by their process tag, not by their command line.
"""
