"""What every test peer says, whichever SDK it is built on: the questions its tools ask and the
shapes of the answers. The peers run as scripts in their own virtualenvs (``tests/peers`` is first
on their path), so this module needs nothing but pydantic, which every SDK brings."""

from __future__ import annotations

from pydantic import BaseModel

CITY_QUESTION = "Which city?"
NAME_QUESTION = "What is your name?"
SUMMARY_PROMPT = "Summarize: {text}"
CITY_SAMPLING_PROMPT = "Say something about cities."
KNOWN_NAMES = ("alice", "albert", "bob")


class City(BaseModel):
    city: str


class Name(BaseModel):
    name: str


class Color(BaseModel):
    color: str


REGION_HEADER = "Region"
COUNT_HEADER = "Count"
"""``x-mcp-header`` names of the ``regional`` tool's parameters (mirrored as ``Mcp-Param-Region``/``-Count``)."""


def regional_text(region: str, count: int, query: str) -> str:
    return f"region={region};count={count};query={query}"


def color_question(name: str) -> str:
    return f"Hello {name}, which color?"


# Peers that ask roots/list once, as soon as a session is initialized, and cache the answer.
STARTUP_ROOTS_PENDING = "startup-roots=<not answered yet>"
STARTUP_ROOTS_FAILED = "startup-roots=<refused>"


def startup_roots_text(uris: list[str]) -> str:
    """What the ``startup_roots`` tool reports once the session-start roots/list was answered."""
    return "startup-roots=" + ",".join(uris)
