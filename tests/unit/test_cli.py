"""The command line as an operator runs it: ``python -m gateway …`` in a subprocess.

Each run is bounded by :data:`TIMEOUT`; the environment is stripped of the gateway's own variables so
that the developer's shell cannot change the outcome.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gateway.config import json_schema, parse_config
from gateway.config.load import REPLICA_ID_ENV, STATE_KEYS_ENV

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "config" / "gateway.example.yaml"
TIMEOUT = 60.0


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in (STATE_KEYS_ENV, REPLICA_ID_ENV)}
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=REPO_ROOT,
        env={**clean, **(env or {})},
        check=False,
    )


@pytest.fixture
def bad_config(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.yaml"
    path.write_text(
        "state:\n  keys: [" + "k" * 32 + "]\n"
        "routes:\n  - name: main\n    path: /mcp\n    backend:\n      url: http://127.0.0.1:8000/mcp\n"
        "      tiemout: 3\n",
        encoding="utf-8",
    )
    return path


def test_check_config_accepts_the_example() -> None:
    result = run_cli("check-config", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    assert "OK — 2 route(s)" in result.stdout
    assert "local-fastmcp (/mcp → http://127.0.0.1:8000/mcp)" in result.stdout


def test_check_config_shows_a_stdio_route_by_its_command(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(
        "state:\n  keys: [" + "k" * 32 + "]\n"
        "routes:\n  - name: local\n    path: /mcp\n    backend:\n      transport: stdio\n"
        "      command: [python, -m, 'my server']\n",
        encoding="utf-8",
    )
    result = run_cli("check-config", str(path))
    assert result.returncode == 0, result.stderr
    assert "local (/mcp → stdio: python -m 'my server')" in result.stdout


def test_check_config_refuses_a_bad_file_naming_the_yaml_path(bad_config: Path) -> None:
    result = run_cli("check-config", str(bad_config))
    assert result.returncode == 1
    assert f"{bad_config}: invalid configuration:" in result.stderr
    assert "routes[0].backend.tiemout: unknown option" in result.stderr
    assert result.stdout == ""


def test_check_config_refuses_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    result = run_cli("check-config", str(missing))
    assert result.returncode == 1
    assert f"{missing}: cannot read the file" in result.stderr


def test_check_config_takes_keys_from_the_environment(tmp_path: Path) -> None:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    del data["state"]["keys"]
    keyless = tmp_path / "keyless.yaml"
    keyless.write_text(yaml.safe_dump(data), encoding="utf-8")
    refused = run_cli("check-config", str(keyless))
    assert refused.returncode == 1
    assert "state.keys: at least one key is required" in refused.stderr
    accepted = run_cli("check-config", str(keyless), env={STATE_KEYS_ENV: "s" * 43})
    assert accepted.returncode == 0, accepted.stderr


def test_gen_key_prints_a_fresh_urlsafe_key_the_config_accepts() -> None:
    first, second = run_cli("gen-key"), run_cli("gen-key")
    assert first.returncode == second.returncode == 0
    key = first.stdout.strip()
    assert first.stdout == key + "\n"
    assert re.fullmatch(r"[A-Za-z0-9_-]{43,}", key)
    assert key != second.stdout.strip()
    settings = parse_config(
        {"state": {"keys": [key]}, "routes": [{"name": "m", "path": "/mcp", "backend": {"url": "http://h/mcp"}}]},
        env={},
    )
    assert settings.state_keys == (key.encode(),)


def test_config_schema_prints_the_json_schema() -> None:
    result = run_cli("config-schema")
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["required"] == ["routes"]
    assert result.stdout == json_schema()


def test_serve_with_an_invalid_config_exits_2_with_the_reason(bad_config: Path) -> None:
    result = run_cli("serve", "--config", str(bad_config))
    assert result.returncode == 2
    assert "mrtr-gateway: invalid configuration:" in result.stderr
    assert "routes[0].backend.tiemout: unknown option" in result.stderr


def test_unknown_subcommand_is_a_usage_error() -> None:
    result = run_cli("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
