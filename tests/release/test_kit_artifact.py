"""The kit artifact's bytes: the stamped spec as config, one empty layer, annotations."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

from bandkit.release import kit_artifact

SPEC = "schemaVersion: '2'\nsandbox:\n  image: reg.test/kit:1.0.0@sha256:" + "a" * 64 + "\n"


def test_the_manifest_is_an_oci_artifact_with_one_empty_layer() -> None:
    artifact = kit_artifact.build(SPEC, source="https://example.test/kit", revision="c0ffee")
    doc = json.loads(artifact.manifest)
    assert doc["artifactType"] == "application/vnd.docker.sandbox.kit.v2"
    assert doc["config"]["mediaType"] == "application/vnd.docker.sandbox.kit.v2.spec+yaml"
    assert doc["config"]["size"] == len(SPEC.encode())
    assert [layer["mediaType"] for layer in doc["layers"]] == [
        "application/vnd.oci.image.layer.v1.tar+gzip"
    ]
    assert doc["annotations"] == {
        "org.opencontainers.image.source": "https://example.test/kit",
        "org.opencontainers.image.revision": "c0ffee",
    }
    blobs = dict((d["digest"], data) for d, data in artifact.blobs())
    assert blobs[doc["config"]["digest"]] == SPEC.encode()
    with tarfile.open(fileobj=io.BytesIO(blobs[doc["layers"][0]["digest"]]), mode="r:gz") as tar:
        assert tar.getmembers() == []


def test_the_bytes_never_vary_between_runs() -> None:
    first = kit_artifact.build(SPEC, source="s", revision="r")
    assert kit_artifact.build(SPEC, source="s", revision="r") == first
    assert gzip.decompress(kit_artifact.EMPTY_LAYER) == b"\0" * 1024


def test_check_names_each_difference() -> None:
    artifact = kit_artifact.build(SPEC, source="s", revision="r")
    assert kit_artifact.check(artifact.manifest, SPEC.encode(), SPEC) == []
    problems = kit_artifact.check(artifact.manifest, b"other", SPEC)
    assert problems == ["the config served differs from the stamped spec, byte for byte"]
    wrong = json.loads(artifact.manifest)
    wrong["artifactType"] = "application/vnd.oci.image.config.v1+json"
    wrong["layers"] = []
    problems = kit_artifact.check(json.dumps(wrong).encode(), SPEC.encode(), SPEC)
    assert len(problems) == 2
    assert kit_artifact.check(b"not json", b"", SPEC) == ["the kit manifest is not JSON"]
