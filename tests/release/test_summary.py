"""The summary table: short digests in the rows, each full digest once below."""

from __future__ import annotations

from bandkit.release.summary import Row, render


def test_the_summary_lists_each_full_digest_once() -> None:
    digest = "sha256:" + "d" * 64
    text = render(
        [
            Row("reg.test/a:1", digest, "pushed", "why", 1.25),
            Row("reg.test/b:1", digest, "copied", ""),
        ],
        ["floating tags left alone"],
    )
    assert "sha256:dddddddddddd " in text
    assert text.count(digest) == 1
    assert "skipped: floating tags left alone" in text
    assert "1.2s" in text
