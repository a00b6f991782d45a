"""The side builder's pure parts: package index parsing, daemon config, the env it exports."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.image import builder as sidedocker
from bandkit.image import builder_fetch as sidedocker_fetch

INDEX = """Package: docker.io
Architecture: amd64
Version: 26.1.5+dfsg1-9+deb13u1+b1
Depends: libc6 (>= 2.34), containerd (>= 1.4~)
Description: Linux container runtime
 Docker complements kernel namespacing.
Filename: pool/main/d/docker.io/docker.io_26.1.5+dfsg1-9+deb13u1+b1_amd64.deb
SHA256: 53ae1a99f15113f0a0d2226808ec0d24ee31b3b87b87ab8ec35be09a1a2ee13b

Package: docker-buildx
Architecture: amd64
Version: 0.13.1+ds1-3
Filename: pool/main/d/docker-buildx/docker-buildx_0.13.1+ds1-3_amd64.deb
SHA256: fcf8c48204d1603c8f209451d7827eb91bf30759578baf7704e9e1a87e5f1d7f

Package: containerd
Architecture: amd64
Version: 1.7.24~ds1-6+deb13u1
Filename: pool/main/c/containerd/containerd_1.7.24~ds1-6+deb13u1_amd64.deb
SHA256: ed708deb96fe476a3bce4efa5c0538dfbcf717ab9a7c7944ba7260342c25899c
"""


def test_packages_index_gives_version_file_and_hash() -> None:
    found = sidedocker_fetch.parse_packages(INDEX, sidedocker_fetch.PACKAGES)
    assert set(found) == {"docker.io", "docker-buildx", "containerd"}
    assert found["docker-buildx"]["Version"] == "0.13.1+ds1-3"
    assert found["containerd"]["Filename"].endswith("containerd_1.7.24~ds1-6+deb13u1_amd64.deb")
    assert len(found["docker.io"]["SHA256"]) == 64


def test_a_missing_package_is_named() -> None:
    without = INDEX.split("\n\nPackage: containerd")[0]
    with pytest.raises(sidedocker.SideDockerError, match="trixie has no containerd"):
        sidedocker_fetch.parse_packages(without, sidedocker_fetch.PACKAGES)


def test_daemon_config_never_touches_the_main_daemon_network() -> None:
    config = sidedocker.daemon_config()
    # `bridge: none` makes dockerd delete the host's docker0 (the main daemon's bridge).
    assert config["bridge"] == sidedocker.BRIDGE != "docker0"
    assert config["bridge"] != "none"
    for key in ("iptables", "ip6tables", "ip-forward", "ip-masq"):
        assert config[key] is False
    assert config["features"] == {"containerd-snapshotter": True}


def test_env_selects_the_side_socket_and_plugin_folder(tmp_path: Path) -> None:
    where = sidedocker.layout(tmp_path)
    assert sidedocker.env(where) == {
        "DOCKER_HOST": "unix:///run/bandkit-buildx/docker.sock",
        "DOCKER_CONFIG": str(tmp_path / "config"),
    }
    assert where.data.parent == tmp_path
    assert not sidedocker.answers(sidedocker.Layout(tmp_path, run=tmp_path / "run"))
    assert sidedocker.down(sidedocker.Layout(tmp_path, run=tmp_path / "run")) == (
        "side dockerd: not running"
    )


GOOD = "be3d7d96a040eda0505c1808cccc67f183bbc05dff0842c50f88e6c396557412"
RELEASE = (
    "Origin: Debian\nSuite: stable\nMD5Sum:\n"
    " 203e1451a4c2e0edf3646a5da3cec2d8  9679304 main/binary-amd64/Packages.xz\n"
    "SHA256:\n"
    f" {'1' * 64}  1234 main/binary-arm64/Packages.xz\n"
    f" {GOOD}  9679304 main/binary-amd64/Packages.xz\n"
)


def test_release_sha256_reads_the_sha256_section_only() -> None:
    digest = sidedocker_fetch.release_sha256(RELEASE, sidedocker_fetch.INDEX)
    assert digest == GOOD
    with pytest.raises(sidedocker_fetch.SideDockerError, match="no SHA256 for main/contrib"):
        sidedocker_fetch.release_sha256(RELEASE, "main/contrib")


def _gpg(home: Path, *argv: str, data: bytes | None = None) -> bytes:
    proc = subprocess.run(
        ["gpg", "--batch", "--homedir", str(home), *argv],
        input=data,
        capture_output=True,
        check=True,
        timeout=60,
    )
    return proc.stdout


@pytest.fixture
def signer(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A throwaway signing key: (GNUPGHOME, a keyring file holding its public key)."""
    if shutil.which("gpg") is None or shutil.which("gpgv") is None:
        pytest.skip("gpg/gpgv not installed")
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    _gpg(home, "--passphrase", "", "--quick-gen-key", "Test Archive <t@example.org>", "ed25519")
    keyring = tmp_path / "keyring.gpg"
    keyring.write_bytes(_gpg(home, "--export"))
    yield home, keyring
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False, timeout=30)


def test_a_good_signature_yields_the_signed_release_text(signer: tuple[Path, Path]) -> None:
    home, keyring = signer
    inrelease = _gpg(home, "--clearsign", data=RELEASE.encode())
    assert sidedocker_fetch.verified_release(inrelease, keyring) == RELEASE


def test_a_tampered_or_foreign_release_is_refused(
    signer: tuple[Path, Path], tmp_path: Path
) -> None:
    home, keyring = signer
    inrelease = _gpg(home, "--clearsign", data=RELEASE.encode())
    tampered = inrelease.replace(b"be3d7d96", b"00000000")
    with pytest.raises(sidedocker_fetch.SideDockerError, match="does not verify"):
        sidedocker_fetch.verified_release(tampered, keyring)
    other = tmp_path / "other.gpg"
    other.write_bytes(b"")
    with pytest.raises(sidedocker_fetch.SideDockerError, match="does not verify"):
        sidedocker_fetch.verified_release(inrelease, other)
