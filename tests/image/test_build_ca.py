"""Builder-stage CAs: which files, staging them, and a TLS failure answered with the remedy."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bandkit.dockercli import ImageError
from bandkit.image import build as image_build
from bandkit.image import build_ca

DATA = Path(__file__).parent / "data"
UV_TLS_OUTPUT = DATA / "build_tls_uv.txt"  # a real `docker build` behind our proxy, no CA
PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _bundle(folder: Path, name: str, certs: int = 1) -> Path:
    path = folder / name
    path.write_bytes(PEM * certs)
    return path


def test_an_explicit_build_ca_wins_over_the_environment(tmp_path: Path) -> None:
    given = _bundle(tmp_path, "corp.crt")
    env = {"SSL_CERT_FILE": str(_bundle(tmp_path, "host.pem", 3))}
    cas, notes = build_ca.resolve([given], env)
    assert cas == [build_ca.CaFile(given, "--build-ca", 1)]
    assert notes == []


def test_the_hosts_variables_are_used_once_each_file(tmp_path: Path) -> None:
    host = _bundle(tmp_path, "host.pem", 3)
    env = {"SSL_CERT_FILE": str(host), "REQUESTS_CA_BUNDLE": str(host)}
    cas, notes = build_ca.resolve([], env)
    assert cas == [build_ca.CaFile(host, "SSL_CERT_FILE", 3)]
    assert notes == []
    other = _bundle(tmp_path, "requests.pem")
    cas, _ = build_ca.resolve([], {**env, "REQUESTS_CA_BUNDLE": str(other)})
    assert [(ca.path, ca.source) for ca in cas] == [
        (host, "SSL_CERT_FILE"),
        (other, "REQUESTS_CA_BUNDLE"),
    ]


def test_a_host_variable_naming_no_usable_file_is_noted_not_fatal(tmp_path: Path) -> None:
    empty = tmp_path / "empty.pem"
    empty.write_text("no certificates here\n")
    env = {"SSL_CERT_FILE": str(tmp_path / "gone.pem"), "REQUESTS_CA_BUNDLE": str(empty)}
    cas, notes = build_ca.resolve([], env)
    assert cas == []
    assert notes == [
        f"SSL_CERT_FILE={tmp_path / 'gone.pem'} is not a file; not given to the builder",
        f"REQUESTS_CA_BUNDLE={empty} holds no PEM certificate; not given to the builder",
    ]


def test_an_explicit_file_that_is_missing_or_empty_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match="build CA file not found"):
        build_ca.resolve([tmp_path / "gone.crt"], {})
    (tmp_path / "empty.crt").write_text("")
    with pytest.raises(ImageError, match="holds no PEM certificate"):
        build_ca.resolve([tmp_path / "empty.crt"], {})


def test_the_build_says_which_bundle_the_builder_trusts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = _bundle(tmp_path, "host.pem", 2)
    monkeypatch.setenv("SSL_CERT_FILE", str(host))
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    lines: list[str] = []
    image_build.builder_cas(image_build.BuildRequest(), lines.append)
    image_build.builder_cas(image_build.BuildRequest(host_ca=False), lines.append)
    assert lines == [
        f"image.build: builder stage also trusts {host} (SSL_CERT_FILE, 2 certificates); "
        "the runtime image does not",
        "image.build: builder stage trusts the base image's CAs only (behind a "
        "TLS-intercepting proxy: set SSL_CERT_FILE or pass --build-ca)",
    ]


def test_staging_names_files_by_content_and_the_last_build_out_cleans(tmp_path: Path) -> None:
    host = _bundle(tmp_path, "host.pem")
    ca = build_ca.CaFile(host, "SSL_CERT_FILE", 1)
    folder = tmp_path / "build-ca"
    folder.mkdir()
    (folder / "README.md").write_text("kept\n")
    (folder / f"{build_ca.STAGED_PREFIX}leftover.crt").write_bytes(PEM)  # a crashed build's
    with build_ca.staged([ca], folder) as outer:
        assert outer == [folder / build_ca.staged_name(PEM)]
        assert not (folder / f"{build_ca.STAGED_PREFIX}leftover.crt").exists()
        assert stat.S_IMODE(outer[0].stat().st_mode) == 0o644
        with build_ca.staged([ca], folder) as inner:  # a concurrent build, same bundle
            assert inner == outer
        assert outer[0].read_bytes() == PEM  # still there: the outer build holds it
    assert sorted(p.name for p in folder.iterdir()) == ["README.md"]


def test_uvs_unknown_issuer_in_a_real_build_is_recognised() -> None:
    lines = UV_TLS_OUTPUT.read_text(encoding="utf-8").splitlines()
    assert build_ca.tls_failure(lines) == "invalid peer certificate: UnknownIssuer"


@pytest.mark.parametrize(
    ("line", "found"),
    [
        (
            "pip._vendor.urllib3.exceptions.SSLError: [SSL: CERTIFICATE_VERIFY_FAILED] "
            "certificate verify failed: unable to get local issuer certificate (_ssl.c:1006)",
            True,
        ),
        ("curl: (60) SSL certificate problem: self-signed certificate in certificate chain", True),
        ("E: Certificate verification failed: The certificate is NOT trusted.", True),
        ("fatal: unable to access 'x': server certificate verification failed. CAfile: y", True),
        # Not a missing CA: no CA file fixes these, so no CA remedy is offered.
        ("  ╰─▶ invalid peer certificate: Expired", False),
        ("certificate verify failed: certificate has expired (_ssl.c:1006)", False),
        ("Step 20/39 : RUN uv sync --no-install-project", False),
    ],
)
def test_tls_failures_from_other_tools(line: str, found: bool) -> None:
    assert (build_ca.tls_failure([line]) is not None) is found


def test_the_remedy_without_any_ca_names_the_variable_flag_and_file() -> None:
    bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    message = build_ca.tls_remedy("invalid peer certificate: UnknownIssuer", [], bundle)
    assert message.startswith(
        "the build could not verify a TLS certificate (invalid peer certificate: UnknownIssuer)"
    )
    assert f"Export SSL_CERT_FILE={bundle} (or REQUESTS_CA_BUNDLE" in message
    assert "`uv run invoke image.build --build-ca FILE`" in message
    assert "builder stage only: docker/band_python_kit/build-ca/README.md" in message
    assert "\n" not in message


def test_the_remedy_when_the_given_bundle_lacks_the_proxy_ca(tmp_path: Path) -> None:
    ca = build_ca.CaFile(tmp_path / "host.pem", "SSL_CERT_FILE", 140)
    message = build_ca.tls_remedy("unable to get local issuer certificate", [ca], None)
    assert f"it was given {tmp_path / 'host.pem'} (SSL_CERT_FILE, 140 certificates)" in message
    assert "which lacks that CA. Point SSL_CERT_FILE at a bundle" in message
    assert "`--build-ca FILE`" in message


def test_the_system_bundle_is_the_first_that_exists(tmp_path: Path) -> None:
    there = _bundle(tmp_path, "b.pem")
    assert build_ca.system_bundle((tmp_path / "a.pem", there)) == there
    assert build_ca.system_bundle((tmp_path / "a.pem",)) is None


def test_a_failing_build_with_tls_output_raises_the_remedy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real streaming path: a `docker` that prints uv's failure and exits 1."""
    fake = tmp_path / "docker"
    fake.write_text(f"#!/bin/sh\ncat '{UV_TLS_OUTPUT}'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with pytest.raises(
        build_ca.BuildTlsError, match=r"\(invalid peer certificate: UnknownIssuer\)"
    ):
        image_build._run_streaming(["build", "."], lambda _line: None)
    fake.write_text("#!/bin/sh\necho 'Step 1/2 : FROM nowhere'\necho boom\nexit 1\n")
    with pytest.raises(ImageError) as plain:
        image_build._run_streaming(["build", "."], lambda _line: None)
    assert not isinstance(plain.value, build_ca.BuildTlsError)
    assert plain.value.args[0].endswith("boom")
