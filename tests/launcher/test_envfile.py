from __future__ import annotations

import pytest

from launcher.envfile import EnvFileError, parse_env_file


def test_supported_forms() -> None:
    text = """
# comment
BAND_API_KEY=plain
export OPENAI_API_KEY = spaced # trailing comment
GH_TOKEN='single # kept $NOT_EXPANDED'
GITHUB_TOKEN="double\\nline \\"q\\""
ANTHROPIC_API_KEY=a#b
EMPTY=
"""
    assert parse_env_file(text) == {
        "BAND_API_KEY": "plain",
        "OPENAI_API_KEY": "spaced",
        "GH_TOKEN": "single # kept $NOT_EXPANDED",
        "GITHUB_TOKEN": 'double\nline "q"',
        "ANTHROPIC_API_KEY": "a#b",
        "EMPTY": "",
    }


def test_later_lines_win() -> None:
    assert parse_env_file("A=1\nA=2\n") == {"A": "2"}


@pytest.mark.parametrize(
    "text",
    ["JUSTTEXT", "1BAD=x", "A='unterminated", 'A="unterminated', "A='x' trailing", "$(rm)=x"],
)
def test_errors_name_the_line_never_its_content(text: str) -> None:
    with pytest.raises(EnvFileError, match="line 2") as caught:
        parse_env_file("OK=1\n" + text + "\n")
    assert text not in str(caught.value)
