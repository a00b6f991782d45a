"""Images onto the nodes, the parts that need no daemon (the fast lane): the chain IDs
Docker keys its layers by, which layers a node can be spared, and the save's tar stream
filtered per node (real pipes into real processes standing for the loads)."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
from pathlib import Path

from bandkit.cluster import images

# Read off a Docker 20.10 layer store (image/overlay2/layerdb/sha256/<chain>/diff) for the
# first three layers of a kit image: diff IDs and the chain IDs Docker filed them under.
DIFFS = [
    "sha256:7c2f8c651307281675392bb46da075fcce3f2ce8b2d5413a91d434da3c2e48cd",
    "sha256:fc98372b3d7694c406c7c042efb7dfdf85d400acec490e3020650d369a43ba97",
    "sha256:be4eb2441ff0fd9909a7df3ba311ca511851343329cce7d1794b1434f03f58d3",
]
CHAINS = [
    "sha256:7c2f8c651307281675392bb46da075fcce3f2ce8b2d5413a91d434da3c2e48cd",
    "sha256:d84e89f8db7317b86ebd0a3abf4edecdae10b0d2409f172716aa6c26281785ad",
    "sha256:7f054ebae6fe69731818896840e391cbee7f4756dc4c0e00045d59d085362e22",
]


def test_chain_ids_are_the_ones_docker_files_layers_under() -> None:
    assert images.chain_ids(DIFFS) == CHAINS
    assert images.chain_ids([]) == []


def test_a_layer_is_spared_only_where_the_node_holds_it_at_every_place_used() -> None:
    base, top = DIFFS[:2], "sha256:" + "a" * 64
    agent = [*base, top]
    held = frozenset(images.chain_ids(base))
    assert images.skippable([agent], held) == frozenset(base)
    # the same layer again on another stack (a chain the node lacks): it must go
    elsewhere = [top, DIFFS[0]]
    assert images.skippable([agent, elsewhere], held) == {DIFFS[1]}
    assert images.skippable([agent], frozenset()) == frozenset()


def _entry(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _save_stream(entries: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buffer.getvalue()


def test_each_load_gets_the_save_without_the_files_of_layers_it_has(tmp_path: Path) -> None:
    """Three loads: one holding the base layer, one holding nothing, one that dies at
    once (a broken pipe must not stop the others)."""
    base, top = b"base layer " * 200_000, b"agent layer"  # over a write buffer
    base_digest = "sha256:" + hashlib.sha256(base).hexdigest()
    link = tarfile.TarInfo("c/layer.tar")
    link.type, link.linkname = tarfile.SYMTYPE, "../a/layer.tar"
    folder = tarfile.TarInfo("a")
    folder.type = tarfile.DIRTYPE
    entries = [
        (folder, b""),
        _entry("a/layer.tar", base),
        _entry("b/layer.tar", top),
        (link, b""),
        _entry("manifest.json", b'[{"Layers": ["a/layer.tar", "b/layer.tar"]}]'),
    ]
    source = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert source.stdin is not None
    source.stdin.write(_save_stream(entries))
    source.stdin.close()
    outs = [tmp_path / "holds-base.tar", tmp_path / "holds-nothing.tar"]
    loads = [
        subprocess.Popen(["dd", f"of={out}", "status=none"], stdin=subprocess.PIPE) for out in outs
    ]
    dead = subprocess.Popen(["true"], stdin=subprocess.PIPE)
    dead.wait()
    images._filter(
        source,
        [(loads[0], frozenset({base_digest})), (loads[1], frozenset()), (dead, frozenset())],
    )
    assert [load.wait(timeout=30) for load in loads] == [0, 0]
    assert source.wait(timeout=30) == 0
    for out, spared in zip(outs, (True, False), strict=True):
        with tarfile.open(out) as tar:
            names = tar.getnames()
            assert names == [
                "a",
                *([] if spared else ["a/layer.tar"]),
                "b/layer.tar",
                "c/layer.tar",
                "manifest.json",
            ]
            member = tar.extractfile("b/layer.tar")
            assert member is not None
            assert member.read() == top
            assert tar.getmember("c/layer.tar").linkname == "../a/layer.tar"
