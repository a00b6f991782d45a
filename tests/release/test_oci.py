"""The registry client's verdicts against a real HTTP server on 127.0.0.1.

Only a 404 is absent; every other answer (401, 500, no digest, nobody listening) is
unknown, answered after ONE request (the SDK's retry loop would back off for minutes).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bandkit.image.refs import Repository
from bandkit.release.oci import Registries, RegistryError
from bandkit.release.plan import ABSENT, Present, Unknown

DIGEST = "sha256:" + "c" * 64
Answer = tuple[int, dict[str, str], bytes]


class Server(ThreadingHTTPServer):
    answers: dict[tuple[str, str], Answer]
    hits: list[tuple[str, str]]


class Handler(BaseHTTPRequestHandler):
    server: Server

    def _answer(self) -> None:
        key = (self.command, self.path)
        self.server.hits.append(key)
        status, headers, body = self.server.answers.get(key, (404, {}, b""))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_HEAD = do_GET = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Server]:
    httpd = Server(("127.0.0.1", 0), Handler)
    httpd.answers, httpd.hits = {}, []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def repo(server: Server) -> Repository:
    return Repository(f"127.0.0.1:{server.server_address[1]}", "band/kit")


def test_a_404_is_absent_and_a_200_with_a_digest_is_present(server: Server) -> None:
    server.answers[("HEAD", "/v2/band/kit/manifests/1.0.0")] = (
        200,
        {"Docker-Content-Digest": DIGEST},
        b"",
    )
    assert Registries().probe(repo(server), "1.0.0") == Present(DIGEST)
    assert Registries().probe(repo(server), "2.0.0") == ABSENT


@pytest.mark.parametrize(
    "answer",
    [
        (500, {}, b""),
        (401, {}, b""),
        (429, {}, b""),
        (200, {}, b""),  # no digest
        (200, {"Docker-Content-Digest": "md5:abc"}, b""),
    ],
)
def test_anything_else_is_unknown_after_one_request(server: Server, answer: Answer) -> None:
    server.answers[("HEAD", "/v2/band/kit/manifests/1.0.0")] = answer
    started = time.monotonic()
    probe = Registries().probe(repo(server), "1.0.0")
    assert isinstance(probe, Unknown)
    assert time.monotonic() - started < 5
    assert server.hits.count(("HEAD", "/v2/band/kit/manifests/1.0.0")) == 1


def test_nobody_listening_is_unknown() -> None:
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        port = probe_socket.getsockname()[1]
    probe = Registries().probe(Repository(f"127.0.0.1:{port}", "band/kit"), "1.0.0")
    assert isinstance(probe, Unknown)
    assert "did not answer" in probe.error


def test_tags_of_an_unknown_repository_are_none_and_pages_are_followed(server: Server) -> None:
    unknown = b'{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known"}]}'
    assert Registries().tags(repo(server)) == []
    server.answers[("GET", "/v2/band/kit/tags/list?n=1000")] = (
        200,
        {"Link": '</v2/band/kit/tags/list?n=1000&last=b>; rel="next"'},
        b'{"name":"band/kit","tags":["a","b"]}',
    )
    server.answers[("GET", "/v2/band/kit/tags/list?n=1000&last=b")] = (
        200,
        {},
        b'{"name":"band/kit","tags":["c"]}',
    )
    assert Registries().tags(repo(server)) == ["a", "b", "c"]
    server.answers[("GET", "/v2/band/kit/tags/list?n=1000")] = (404, {}, unknown)
    assert Registries().tags(repo(server)) == []


def test_a_refused_tag_listing_fails_closed(server: Server) -> None:
    denied = b'{"errors":[{"code":"DENIED","message":"requested access is denied"}]}'
    server.answers[("GET", "/v2/band/kit/tags/list?n=1000")] = (403, {}, denied)
    with pytest.raises(RegistryError, match=r"refused GET tags/list.*docker login 127\.0\.0\.1"):
        Registries().tags(repo(server))
