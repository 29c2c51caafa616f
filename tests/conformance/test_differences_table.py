"""The table of allowed differences stays honest: every entry names an exchange the suite sends and
cites the spec, and ``docs/conformance.md`` reproduces it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.differences import DIFFERENCES, NORMALIZATIONS

HERE = Path(__file__).parent
DOC = HERE.parents[1] / "docs" / "conformance.md"


@pytest.mark.parametrize("case", sorted(DIFFERENCES))
def test_every_difference_is_an_exchange_of_the_suite(case: str) -> None:
    sources = "".join(p.read_text() for p in HERE.glob("test_*.py") if p.name != Path(__file__).name)
    assert f'"{case}"' in sources, f"{case!r} is listed as a difference but no test sends it"
    assert DIFFERENCES[case].spec.strip()
    assert DIFFERENCES[case].reference != DIFFERENCES[case].gateway


def test_the_documentation_lists_every_difference_and_normalization() -> None:
    text = DOC.read_text()
    for case in DIFFERENCES:
        assert f"| {case} |" in text, f"docs/conformance.md does not list the difference {case!r}"
    for what, why in NORMALIZATIONS:
        assert f"| {what} | {why} |" in text, f"docs/conformance.md does not list the normalization {what!r}"
