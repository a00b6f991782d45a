"""Fixed or predictable host paths a local user could make first, beyond the demo's box root
(`tests/demo/test_box_root.py`): the local runtime's `BOXES_HOME/<digest>` (as root), the
sbx runtime's kits directory (default `/tmp/bandkit-sbx-kits-<uid>`) and the build CA lock
(`/tmp/bandkit-build-ca-<hash>.lock`). Each is refused with the path and the fix when it
is a link, another user's, or writable by others, and nothing of ours goes into it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bandkit.dockercli import ImageError
from bandkit.image import build_ca
from bandkit.runtimes import hostbox, local
from bandkit.runtimes.base import SandboxError, SandboxSpec
from bandkit.runtimes.sbx.kits import staged_kit

OTHER_UID = 1000
AS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not AS_ROOT, reason="another user's file needs root to make")


def plant(path: Path, how: str, victim: Path) -> None:
    """What a local user leaves at `path` before we get there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if how == "link":
        path.symlink_to(victim)
        return
    path.mkdir(mode=0o777)
    path.chmod(0o777)
    if how == "other user's":
        os.chown(path, OTHER_UID, OTHER_UID)


def contents(path: Path) -> tuple[int, int, list[str]]:
    info = path.stat()
    return stat.S_IMODE(info.st_mode), info.st_uid, sorted(p.name for p in path.iterdir())


HOW = [
    pytest.param("link", id="link"),
    pytest.param("other user's", id="other-users", marks=needs_root),
    pytest.param("world-writable", id="world-writable"),
]


@needs_root  # BOXES_HOME is used as root only
@pytest.mark.parametrize("how", HOW)
def test_the_local_boxes_home_must_be_ours(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "var-lib" / "bandkit" / "local-boxes"
    monkeypatch.setattr(local, "BOXES_HOME", home)
    started: list[Path] = []
    monkeypatch.setattr(hostbox, "start", lambda root, **_kw: started.append(root))
    run_dir = tmp_path / "run"  # under pytest's 0700 tmp: the agent uid cannot enter it
    rt = local.LocalRuntime(run_dir)
    boxes = rt.boxes_root()
    assert boxes.parent == home
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    plant(boxes, how, victim)
    planted = contents(boxes)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with pytest.raises(SandboxError) as refused:
        rt.create(SandboxSpec(name="box", workspaces=(workspace,)))
    assert str(boxes) in str(refused.value)
    assert "remove it" in str(refused.value)
    assert started == []
    assert contents(boxes) == planted  # not chmod'ed, nothing of ours inside
    assert contents(victim) == (0o700, 0, [])
    assert rt.list() == []


@needs_root
def test_a_fresh_local_boxes_home_is_ours_and_traversable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "var-lib" / "bandkit" / "local-boxes"
    monkeypatch.setattr(local, "BOXES_HOME", home)
    monkeypatch.setattr(hostbox, "start", lambda root, **_kw: None)
    rt = local.LocalRuntime(tmp_path / "run")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    rt.create(SandboxSpec(name="box", workspaces=(workspace,)))
    try:
        for path in (home.parent, home, rt.boxes_root()):
            info = path.lstat()
            assert stat.S_ISDIR(info.st_mode)
            assert info.st_uid == 0
            assert stat.S_IMODE(info.st_mode) == 0o755
    finally:
        rt.remove("box")  # gives its uid lease back (the machine's pool, not tmp_path's)


@pytest.mark.parametrize("how", HOW)
def test_the_sbx_kits_directory_must_be_ours(how: str, tmp_path: Path) -> None:
    kits = tmp_path / "tmp" / f"bandkit-sbx-kits-{os.getuid()}"
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    plant(kits, how, victim)
    planted = contents(kits)
    kit = tmp_path / "kit"
    kit.mkdir()
    (kit / "spec.yaml").write_text("name: k\n")
    with pytest.raises(SandboxError) as refused:
        staged_kit(
            str(kit),
            name="box",
            env={"BAND_REST_URL": "http://127.0.0.1:9"},
            current=False,
            kits_dir=kits,
            warn=lambda _m: None,
        )
    assert str(kits) in str(refused.value)
    assert contents(kits) == planted  # the kit (with the platform env) was not copied there
    assert contents(victim) == (0o700, os.geteuid(), [])


@needs_root
def test_a_build_ca_lock_another_user_made_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build_ca.tempfile, "gettempdir", lambda: str(tmp_path))
    folder = tmp_path / "build-ca"
    folder.mkdir()
    lock = build_ca._lock_file(folder)
    lock.write_text("")
    os.chown(lock, OTHER_UID, OTHER_UID)
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n")
    staging = build_ca.staged([build_ca.CaFile(pem, "SSL_CERT_FILE", 1)], folder)
    with pytest.raises(ImageError, match="belongs to uid 1000") as refused, staging:
        pass
    assert str(lock) in str(refused.value)
    assert list(folder.iterdir()) == []
