"""``state.seal_version``: a replica that seals ``v1.`` tokens the previous release can read.

The lossless rolling upgrade from the release that read only version 1 (docs/operations.md) rests
on three facts proved here: with ``seal_version=1`` this codec mints exactly the tokens that
release minted (byte for byte, given the same nonce), that release's own unseal (its verbatim
source, :mod:`previous_release`) reads them back to equal claims, and every replica of this
release reads both versions whatever it seals. The default stays version 2.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from dataclasses import fields, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from previous_release import COMMIT, MODULES, load_codec, source_of
from state_oracle import NEW, NOW, OLD, UNSEALABLE, make_claims

import gateway.state.codec as codec
from gateway.config.load import ConfigError, parse_config
from gateway.state.claims import Claims
from gateway.state.codec import MAX_TOKEN_LENGTH, KeyRing

FIELDS = tuple(f.name for f in fields(Claims))


CASES = {
    "typical": make_claims(),
    "no-principal-no-extra": make_claims(principal=None, extra={}),
    "non-ascii": make_claims(target="prévision ☃ 天気", aud="météo", owner="réplica-0"),
    "lone-surrogate": make_claims(target="lone \udc80", extra={"s": "\ud800"}),
    "big-integers": make_claims(round=2**40, exp=2**70, extra={"n": 2**80, "f": -0.0, "u": None}),
    "other-methods": make_claims(method="resources/read", target="file:///a b?c", round=1),
    "empty-target": make_claims(method="prompts/get", target=""),
}


@pytest.fixture(scope="module")
def previous() -> ModuleType:
    """The previous release's codec module."""
    return load_codec()


@pytest.fixture
def fixed_nonce(monkeypatch: pytest.MonkeyPatch) -> bytes:
    """Both codecs draw this nonce through ``os.urandom``."""
    nonce = bytes(range(12))

    def urandom(n: int) -> bytes:
        assert n == len(nonce)
        return nonce

    monkeypatch.setattr(os, "urandom", urandom)
    return nonce


def as_dict(claims: object) -> dict[str, Any]:
    """Claims of either release as a plain dict (the two releases' Claims are different classes)."""
    return {name: getattr(claims, name) for name in FIELDS}


# --- the previous release's source, as vendored ---------------------------------------------------


BLOB_IDS = {
    "encoding": "04e37c4eda2cea15461003242a04f4b3d13aa0b6",
    "claims": "88c580f7d2c1c01f0c06521ab3e954904ccf474c",
    "codec": "5600be269ae731cfa4782cf1962aa43fa4544b71",
}
"""``git rev-parse <COMMIT>:gateway/state/<name>.py``: the object ids of that release's files."""


@pytest.mark.parametrize("name", MODULES)
def test_the_vendored_previous_release_is_that_commit_verbatim(name: str) -> None:
    """Git names a file by the SHA-1 of ``blob <size>\\0<bytes>``: equal ids are equal bytes, checked
    without git or the history (an export or a shallow clone checks it too)."""
    data = source_of(name).encode("utf-8")
    blob_id = hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).hexdigest()
    assert blob_id == BLOB_IDS[name], f"{name}.py.txt is not {COMMIT[:7]}:gateway/state/{name}.py"


def test_the_previous_release_seals_and_reads_only_v1(previous: ModuleType) -> None:
    """The loaded module really is the v1-only release: the very problem this option solves."""
    old_ring = previous.KeyRing([OLD])
    claims = previous.Claims(**as_dict(make_claims()))
    assert old_ring.seal(claims).startswith("v1.")
    with pytest.raises(previous.StateError) as info:
        old_ring.unseal(KeyRing([OLD]).seal(make_claims()), now=NOW)
    assert info.value.reason == "bad_version"


# --- seal_version=1 mints what the previous release minted ----------------------------------------


@pytest.mark.parametrize("claims", CASES.values(), ids=CASES.keys())
def test_a_v1_token_is_byte_for_byte_the_previous_release_token(
    previous: ModuleType, fixed_nonce: bytes, claims: Claims
) -> None:
    mine = KeyRing([OLD, NEW], seal_version=1).seal(claims)
    theirs = previous.KeyRing([OLD, NEW]).seal(previous.Claims(**as_dict(claims)))
    assert mine.startswith("v1.")
    assert mine == theirs


@pytest.mark.parametrize("claims", CASES.values(), ids=CASES.keys())
def test_the_previous_release_unseals_a_v1_token_to_equal_claims(previous: ModuleType, claims: Claims) -> None:
    token = KeyRing([NEW, OLD], seal_version=1).seal(claims)
    for ring in (previous.KeyRing([NEW]), previous.KeyRing([OLD, NEW])):
        assert as_dict(ring.unseal(token, now=NOW)) == as_dict(claims)


@pytest.mark.parametrize("claims", CASES.values(), ids=CASES.keys())
def test_every_replica_of_this_release_unseals_a_v1_token_to_equal_claims(claims: Claims) -> None:
    token = KeyRing([OLD], seal_version=1).seal(claims)
    assert token.startswith("v1.")
    assert KeyRing([OLD], seal_version=1).unseal(token, now=NOW) == claims
    assert KeyRing([OLD]).unseal(token, now=NOW) == claims


def test_a_replica_sealing_v1_reads_what_an_upgraded_replica_sealed() -> None:
    """Step 2 of the upgrade: replicas sealing v1 and v2 serve the same calls side by side."""
    v2 = KeyRing([OLD]).seal(make_claims())
    assert v2.startswith("v2.")
    assert KeyRing([OLD], seal_version=1).unseal(v2, now=NOW) == make_claims()


def test_a_v1_token_the_previous_release_sealed_goes_on_as_v1(previous: ModuleType) -> None:
    """Step 1: a call an old replica sealed is continued by a new one, which seals the next round as v1."""
    old_token = previous.KeyRing([OLD]).seal(previous.Claims(**as_dict(make_claims())))
    ring = KeyRing([OLD], seal_version=1)
    claims = ring.unseal(old_token, now=NOW)
    following = ring.seal(replace(claims, round=claims.round + 1))
    assert following.startswith("v1.")
    assert as_dict(previous.KeyRing([OLD]).unseal(following, now=NOW)) == as_dict(replace(make_claims(), round=3))


# --- the default, the refusals ------------------------------------------------------------------


def test_the_default_seals_v2() -> None:
    assert KeyRing([OLD]).seal_version == 2
    assert KeyRing([OLD]).seal(make_claims()).startswith("v2.")
    assert KeyRing([OLD], seal_version=2).seal(make_claims()).startswith("v2.")
    assert KeyRing([OLD], seal_version=1).seal_version == 1


@pytest.mark.parametrize("version", [0, 3, -1, True, 1.0, "1", None])
def test_keyring_refuses_an_unknown_seal_version(version: Any) -> None:
    with pytest.raises(ValueError, match="seal_version must be one of"):
        KeyRing([OLD], seal_version=version)


def test_replacing_the_secrets_keeps_the_seal_version() -> None:
    ring = KeyRing([OLD], seal_version=1)
    ring.replace([NEW, OLD])
    token = ring.seal(make_claims())
    assert token.startswith("v1.")
    assert KeyRing([NEW]).unseal(token, now=NOW) == make_claims()


@pytest.mark.parametrize(
    "overrides",
    UNSEALABLE,
)
def test_v1_seal_refuses_claims_that_would_not_unseal_equal(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="refusing to seal"):
        KeyRing([OLD], seal_version=1).seal(make_claims(**overrides))


def test_v1_seal_refuses_a_token_over_the_length_limit() -> None:
    with pytest.raises(ValueError, match="limit"):
        KeyRing([OLD], seal_version=1).seal(make_claims(extra={"blob": "a" * MAX_TOKEN_LENGTH}))


# --- the config option --------------------------------------------------------------------------


def config(**state: Any) -> dict[str, Any]:
    return {
        "state": {"keys": ["a" * 32], **state},
        "routes": [{"name": "main", "path": "/mcp", "backend": {"url": "http://127.0.0.1:8000/mcp"}}],
    }


def test_config_seal_version_defaults_to_2_and_takes_1() -> None:
    assert parse_config(config(), env={}).config.state.seal_version == 2
    assert parse_config(config(seal_version=2), env={}).config.state.seal_version == 2
    assert parse_config(config(seal_version=1), env={}).config.state.seal_version == 1


@pytest.mark.parametrize("value", [0, 3, True, 1.0, "1", None, [1]])
def test_config_refuses_any_other_seal_version_naming_the_option(value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(config(seal_version=value), env={})
    assert str(info.value) == f"state.seal_version: must be 1 or 2 (an integer), not {value!r}"


# --- when version 1 goes ------------------------------------------------------------------------------

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_version_1_is_read_only_until_the_release_after_next() -> None:
    """A reminder that fails on purpose. Version 1 was marked for removal while the gateway was
    0.1.0 (pyproject.toml's version); it goes in ``codec.V1_DROPPED_IN``, 0.3.0, the release after
    next. When the version moves, update the pin below; once it reaches ``V1_DROPPED_IN``, remove
    version 1 (``_to_v1``, ``_from_v1``, ``seal_version`` 1, its config value and these tests)."""
    version = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["version"]
    assert version == "0.1.0", f"the gateway is now {version}: is this {codec.V1_DROPPED_IN}? then drop version 1"
    assert release(version) < release(codec.V1_DROPPED_IN), "drop version 1 in this release"
    assert codec.SEAL_VERSIONS == (1, 2)
    assert KeyRing([OLD]).unseal(KeyRing([OLD], seal_version=1).seal(make_claims()), now=NOW) == make_claims()
