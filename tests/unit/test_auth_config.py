"""routes[].auth: what the config refuses before the gateway starts (no symmetric or unsigned
algorithms, one mode, one key source, proxies that are addresses, no private keys)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from gateway.auth.verification_keys import BadKey, parse_static_keys
from gateway.config.load import ConfigError, parse_config

JWT = {"issuer": "https://issuer.test", "audience": ["https://gw.test/mcp"], "jwks_url": "https://issuer.test/jwks"}


def config_error(auth: dict[str, Any]) -> str:
    data = {
        "state": {"keys": ["k" * 32]},
        "routes": [{"name": "r", "path": "/mcp", "backend": {"url": "http://127.0.0.1:1/mcp"}, "auth": auth}],
    }
    with pytest.raises(ConfigError) as info:
        parse_config(data, env={})
    return str(info.value)


@pytest.mark.parametrize("alg", ["none", "HS256", "HS512", "hs256"])
def test_unsigned_and_symmetric_algorithms_cannot_be_configured(alg: str) -> None:
    message = config_error({"jwt": {**JWT, "algorithms": [alg]}})
    assert message.startswith("routes[0].auth.jwt.algorithms[0]: Input should be")


def test_exactly_one_mode() -> None:
    both = {"jwt": JWT, "trusted_header": {"header": "X-User", "proxies": ["10.0.0.0/8"]}}
    assert "exactly one of jwt or trusted_header" in config_error(both)
    assert "exactly one of jwt or trusted_header" in config_error({})


def test_exactly_one_key_source() -> None:
    assert "exactly one source" in config_error({"jwt": {**JWT, "keys": ["{}"]}})
    assert "exactly one source" in config_error({"jwt": {k: v for k, v in JWT.items() if k != "jwks_url"}})


def test_proxies_must_be_addresses() -> None:
    message = config_error({"trusted_header": {"header": "X-User", "proxies": ["proxy.internal"]}})
    assert "proxy #0 ('proxy.internal') is not an IP address or CIDR" in message


def test_resource_metadata_needs_jwt() -> None:
    auth = {
        "trusted_header": {"header": "X-User", "proxies": ["10.0.0.0/8"]},
        "resource_metadata": {"resource": "https://gw.test/mcp", "authorization_servers": ["https://issuer.test"]},
    }
    assert "resource_metadata needs jwt" in config_error(auth)


def test_private_and_symmetric_keys_are_refused_by_name() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    with pytest.raises(BadKey, match=r"keys\[0\] is a private key"):
        parse_static_keys([pem], [])
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with pytest.raises(BadKey, match=r"keys\[1\] kty 'oct' is not an asymmetric key type"):
        parse_static_keys([public.decode(), json.dumps({"kty": "oct", "k": "c2VjcmV0"})], [])
    with pytest.raises(BadKey, match=r"key_files\[0\] \(/nonexistent/key.pem\) cannot be read"):
        parse_static_keys([], ["/nonexistent/key.pem"])


def test_check_config_refuses_an_unusable_key_file_naming_route_and_file(tmp_path: Path) -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    key_file = tmp_path / "issuer.pem"
    key_file.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    jwt_config = {"issuer": "https://issuer.test", "audience": ["https://gw.test/mcp"], "key_files": [str(key_file)]}
    config = {
        "state": {"keys": ["k" * 32]},
        "routes": [
            {"name": "open", "path": "/open", "backend": {"url": "http://127.0.0.1:1/mcp"}},
            {"name": "r", "path": "/mcp", "backend": {"url": "http://127.0.0.1:1/mcp"}, "auth": {"jwt": jwt_config}},
        ],
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "check-config", str(path)],
        check=False,
        capture_output=True,
        timeout=60,
        text=True,
    )
    assert result.returncode == 1
    assert f"routes[1].auth.jwt.key_files[0] ({key_file}) is a private key" in result.stderr
