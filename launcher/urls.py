"""URL rules for endpoints and repository remotes (pure functions, no IO)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def redact_url(value: str) -> str:
    """The URL with any userinfo replaced by `***`, safe to put in a message."""
    try:
        parts = urlsplit(value)
    except ValueError:
        return "<unparseable URL>"
    if "@" not in parts.netloc:
        return value
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))


def shown_endpoint(value: str) -> str:
    """`value` as it may appear in a log: scheme://host[:port] and the path masked.

    A host-side credential proxy hands the sandbox URLs whose first path segment is the
    box's access token; a log line must never carry it. The platform's own paths (`/`,
    the socket path) carry nothing, but the rule is the same for every URL: origin only.
    """
    try:
        parts = urlsplit(redact_url(value))
    except ValueError:
        return "<unparseable URL>"
    if not parts.netloc:
        return "<unparseable URL>"
    suffix = "/..." if parts.path not in ("", "/") or parts.query else ""
    return f"{parts.scheme}://{parts.netloc}{suffix}"


def endpoint_problem(value: str, *, scheme: str, insecure_scheme: str, allow_insecure: bool) -> str:
    """Why `value` is not an acceptable endpoint, or "" when it is.

    Acceptable: `scheme://host[:port]/...` (https/wss); `insecure_scheme` (http/ws)
    only when allowed. Never user:password@ (the key travels as a header).
    """
    try:
        parts = urlsplit(value)
        hostname, _ = parts.hostname, parts.port  # reading port forces its lazy parse
    except ValueError:
        return "is not a valid URL (bad host or port)"
    allowed = (scheme, insecure_scheme) if allow_insecure else (scheme,)
    if parts.scheme not in allowed:
        if parts.scheme == insecure_scheme:
            return (
                f"must be {scheme}:// (plain {insecure_scheme}:// is only for the local "
                "emulator: set BAND_KIT_ALLOW_INSECURE_ENDPOINTS=1)"
            )
        return f"must be a {scheme}:// URL"
    if not hostname:
        return f"must be a {scheme}:// URL with a host"
    if parts.username is not None or parts.password is not None:
        return "must not embed credentials (user:password@)"
    return ""


def repo_url_problem(value: str) -> str:
    """Why `value` is not an acceptable `repo.url`, or "" when it is.

    SSH (`git@host:path`, `ssh://[git@]host/path`) or `https://host/path`; no
    embedded credentials (band.yaml is committed; the URL lands in logs).
    """
    cleaned = value.strip()
    if not cleaned:
        return "must not be blank"
    if cleaned.startswith("git@"):
        host, sep, path = cleaned.removeprefix("git@").partition(":")
        if not (host and sep and path):
            return "an SCP-style SSH remote must look like git@host:path"
        return ""
    if not cleaned.startswith(("ssh://", "https://")):
        return "must be an SSH (git@host:path or ssh://) or https:// repository URL"
    try:
        parts = urlsplit(cleaned)
        hostname, _ = parts.hostname, parts.port
    except ValueError:
        return "is not a valid URL (bad host or port)"
    if not hostname or len(parts.path) <= 1:
        return "must include a host and a repository path"
    # ssh://git@host is the conventional login user, not a secret; anything else
    # in userinfo is a credential.
    if parts.password is not None or (parts.scheme == "https" and parts.username is not None):
        return "must not embed credentials; use a credential helper or an SSH key"
    return ""
