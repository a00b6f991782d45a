from __future__ import annotations

import pytest

from launcher.urls import endpoint_problem, redact_url, repo_url_problem, shown_endpoint


@pytest.mark.parametrize(
    ("value", "insecure_ok", "problem"),
    [
        ("https://app.band.ai", False, ""),
        ("https://app.band.ai:8443/api", False, ""),
        ("http://app.band.ai", False, "BAND_KIT_ALLOW_INSECURE_ENDPOINTS=1"),
        ("http://127.0.0.1:8000", True, ""),
        ("ftp://app.band.ai", True, "must be a https:// URL"),
        ("https://", False, "with a host"),
        ("https://:443", False, "with a host"),
        ("https://app.band.ai:port", False, "bad host or port"),
        ("https://user:pw@app.band.ai", False, "must not embed credentials"),
        ("https://user@app.band.ai", False, "must not embed credentials"),
        ("app.band.ai", False, "must be a https:// URL"),
    ],
)
def test_rest_endpoint_rules(value: str, insecure_ok: bool, problem: str) -> None:
    found = endpoint_problem(
        value, scheme="https", insecure_scheme="http", allow_insecure=insecure_ok
    )
    assert (problem in found) if problem else found == ""


def test_ws_endpoint_rules() -> None:
    rule = {"scheme": "wss", "insecure_scheme": "ws"}
    assert endpoint_problem("wss://h/api/v1/socket/websocket", allow_insecure=False, **rule) == ""
    assert "wss://" in endpoint_problem("https://h/x", allow_insecure=True, **rule)
    assert endpoint_problem("ws://127.0.0.1:1/x", allow_insecure=True, **rule) == ""
    assert endpoint_problem("ws://127.0.0.1:1/x", allow_insecure=False, **rule)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("https://github.com/o/r.git", ""),
        ("git@github.com:o/r.git", ""),
        ("ssh://git@github.com/o/r.git", ""),
        ("ssh://github.com:2222/o/r.git", ""),
        ("", "blank"),
        ("   ", "blank"),
        ("git@github.com", "git@host:path"),
        ("http://github.com/o/r.git", "SSH"),
        ("file:///srv/r.git", "SSH"),
        ("https://github.com", "host and a repository path"),
        ("https://token@github.com/o/r.git", "credentials"),
        ("https://u:p@github.com/o/r.git", "credentials"),
        ("ssh://git:pw@github.com/o/r.git", "credentials"),
        ("https://github.com:x/o/r", "bad host or port"),
    ],
)
def test_repo_url_rules(value: str, problem: str) -> None:
    found = repo_url_problem(value)
    assert (problem in found) if problem else found == ""


def test_redaction_hides_userinfo_only() -> None:
    assert redact_url("https://u:secret@h.example/p") == "https://***@h.example/p"
    assert redact_url("https://h.example/p") == "https://h.example/p"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("https://app.band.ai", "https://app.band.ai"),
        ("http://127.0.0.1:5/0123abcd/", "http://127.0.0.1:5/..."),
        ("ws://127.0.0.1:5/tok/api/v1/socket/websocket", "ws://127.0.0.1:5/..."),
        ("https://user:pw@host.example/x?k=v", "https://***@host.example/..."),
        ("not a url", "<unparseable URL>"),
    ],
)
def test_shown_endpoint_keeps_the_origin_only(value: str, shown: str) -> None:
    assert shown_endpoint(value) == shown
