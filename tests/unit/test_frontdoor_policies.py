"""Pure front-door policies: Origin validation, gateway cursors, listings that say "unknown"."""

from __future__ import annotations

import pytest

from gateway.frontdoor.origin import OriginPolicy
from gateway.keyset import KeySet
from gateway.translate import catalogue
from gateway.translate.cursors import Cursors, InvalidCursor


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        (None, True),  # non-browser clients are not affected
        ("http://localhost:6274", True),
        ("http://127.0.0.1", True),
        ("https://127.9.9.9:3000", True),
        ("http://[::1]:8000", True),
        ("https://app.example.com", True),
        ("https://APP.example.com:443", True),
        ("https://app.example.com/", True),
        ("http://app.example.com", False),  # another scheme is another origin
        ("https://app.example.com:8443", False),
        ("https://evil.example", False),
        ("http://localhost.evil.example", False),
        ("http://127.0.0.1.evil.example", False),
        ("null", False),
        ("", False),
        ("garbage", False),
        ("https://app.example.com/path", False),
        ("http://user@localhost", False),
        ("http://localhost:99999", False),
    ],
)
def test_origin_policy_allows_loopback_and_listed_origins_only(origin: str | None, allowed: bool) -> None:
    assert OriginPolicy(["https://app.example.com"]).allows(origin) is allowed


def test_default_origin_policy_is_loopback_only_and_star_allows_any() -> None:
    assert OriginPolicy(None).allows("https://gateway.example.com") is False
    assert OriginPolicy(None).allows("http://localhost:3000") is True
    assert OriginPolicy(["*"]).allows("https://anything.example") is True
    assert OriginPolicy(["null"]).allows("null") is True


def test_cursors_open_only_for_the_route_and_method_they_were_issued_for() -> None:
    cursors = Cursors(KeySet([b"k" * 32]))
    token = cursors.wrap("demo", "tools/list", "page-2")
    assert cursors.unwrap("demo", "tools/list", token) == "page-2"
    for route, method in (("other", "tools/list"), ("demo", "prompts/list")):
        with pytest.raises(InvalidCursor):
            cursors.unwrap(route, method, token)


@pytest.mark.parametrize(
    "token", ["page-2", "c1.", "c1.A", "c1.AAAAA", "c1.!!!!", "c1." + "A" * 40, "c1." + "A" * 9000]
)
def test_cursors_the_gateway_did_not_issue_are_refused(token: str) -> None:
    with pytest.raises(InvalidCursor):
        Cursors(KeySet([b"k" * 32])).unwrap("demo", "tools/list", token)


def test_cursors_survive_key_rotation() -> None:
    old, new = b"o" * 32, b"n" * 32
    token = Cursors(KeySet([old])).wrap("demo", "tools/list", "x")
    assert Cursors(KeySet([new, old])).unwrap("demo", "tools/list", token) == "x"


TOOLS = [{"name": "add"}, {"name": "ask_city"}]
PROMPTS = [{"name": "greet", "arguments": [{"name": "name", "required": True}, {"name": "tone"}]}]


def test_unknown_tools_prompts_and_missing_prompt_arguments_are_named() -> None:
    assert catalogue.unknown_tool(TOOLS, "add") is None
    assert catalogue.unknown_tool(TOOLS, "nope") == "Unknown tool: nope"
    assert catalogue.unknown_tool(TOOLS, "x" * 5000) == "Unknown tool: " + "x" * catalogue.MAX_ECHO
    assert catalogue.prompt_problem(PROMPTS, "greet", {"name": "Ada"}) is None
    assert catalogue.prompt_problem(PROMPTS, "nope", {}) == "Unknown prompt: nope"
    assert catalogue.prompt_problem(PROMPTS, "greet", {"tone": "warm"}) == "Missing required arguments: name"
    assert catalogue.prompt_problem(PROMPTS, "greet", None) == "Missing required arguments: name"


@pytest.mark.parametrize(
    ("uri", "unknown"),
    [
        ("demo://readme", False),
        ("demo://item/42", False),
        ("demo://item/42/extra", True),
        ("demo://files/a/b/c", False),
        ("demo://missing", True),
        ("other://readme", True),
    ],
)
def test_resources_are_known_when_listed_or_matching_a_template(uri: str, unknown: bool) -> None:
    resources = [{"uri": "demo://readme"}]
    templates = [{"uriTemplate": "demo://item/{id}"}, {"uriTemplate": "demo://files/{+path}"}]
    assert (catalogue.unknown_resource(resources, templates, uri) is not None) is unknown
