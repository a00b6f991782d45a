"""Registry addressing, base tags and the benchmark's no-daemon line (no Docker needed)."""

from __future__ import annotations

import pytest

from bandkit.bench import image as image_bench
from bandkit.dockercli import ImageError
from bandkit.image import bases as image_bases
from bandkit.image import push as image_push
from bandkit.image.facts import host_arch, official_suite, uv_version
from bandkit.image.refs import parse_repository


@pytest.mark.parametrize(
    ("registry", "url"),
    [
        ("127.0.0.1:5000/kit", "http://127.0.0.1:5000/v2/kit/manifests/1.2.3"),
        ("localhost:5000/a/kit", "http://localhost:5000/v2/a/kit/manifests/1.2.3"),
        ("ghcr.io/band-ai/kit", "https://ghcr.io/v2/band-ai/kit/manifests/1.2.3"),
        ("registry.example:443/kit", "https://registry.example:443/v2/kit/manifests/1.2.3"),
    ],
)
def test_manifest_url_is_plain_http_only_on_loopback(registry: str, url: str) -> None:
    assert image_push.manifest_url(parse_repository(registry), "1.2.3") == url


def test_push_refuses_bad_input_before_touching_docker() -> None:
    with pytest.raises(ImageError, match="HOST\\[:PORT\\]/NAME"):
        image_push.push("kit:local", "kit", ["1.0.0"])
    with pytest.raises(ImageError, match="needs one immutable version tag"):
        image_push.push("kit:local", "127.0.0.1:5000/kit", ["latest"])


def test_unreachable_registry_fails_closed() -> None:
    repo = parse_repository("127.0.0.1:9/kit")  # discard port: nothing listens
    with pytest.raises(ImageError, match="unreachable"):
        image_push.remote_digest(repo, "1.0.0")


def test_local_base_tags_carry_the_official_debian_release() -> None:
    arch = host_arch()
    other = "arm64" if arch == "amd64" else "amd64"
    assert official_suite() == "trixie"  # python:3.12.x-slim-trixie in the Dockerfile
    assert image_bases.python_tag(arch) == "local/debian-python:trixie"
    assert image_bases.python_tag(other) == f"local/debian-python:trixie-{other}"
    assert image_bases.uv_tag(arch) == f"local/uv:{uv_version()}"
    assert [b.kind for b in image_bases.planned((arch,))] == ["python", "uv"]


def test_unsupported_arch_is_refused() -> None:
    with pytest.raises(ImageError, match="unsupported arch 'riscv64'"):
        image_bases.ensure_bases(("riscv64",))


def test_bench_prints_one_skip_line_without_a_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image_bench, "docker_ok", lambda: False)
    assert image_bench.run() == [image_bench.SKIP]
    assert "no Docker daemon answers" in image_bench.SKIP
