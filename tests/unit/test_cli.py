"""The command line as an operator runs it: ``python -m gateway …`` in a subprocess.

Each run is bounded by :data:`TIMEOUT`; the environment is stripped of the gateway's own variables so
that the developer's shell cannot change the outcome.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config.load import REPLICA_ID_ENV, STATE_KEYS_ENV, json_schema, parse_config

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


# --- mistakes the command line catches ----------------------------------------------------------


def write_config(tmp_path: Path, **overrides: Any) -> Path:
    data: dict[str, Any] = {
        "state": {"keys": ["k" * 32]},
        "listen": {"host": "127.0.0.1", "port": 0},
        "logging": {"json": True},
        "routes": [{"name": "main", "path": "/mcp", "backend": {"url": "http://127.0.0.1:9/mcp"}}],
        **overrides,
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_check_config_never_prints_credentials_embedded_in_a_url(tmp_path: Path) -> None:
    url = "https://alice:hunter2@tickets.example.com/mcp?api_key=tok3n"
    path = write_config(tmp_path, routes=[{"name": "t", "path": "/mcp", "backend": {"url": url}}])
    result = run_cli("check-config", str(path))
    assert result.returncode == 0, result.stderr
    assert "t (/mcp → https://<redacted>@tickets.example.com/mcp?api_key=<redacted>)" in result.stdout
    assert "hunter2" not in result.stdout + result.stderr
    assert "tok3n" not in result.stdout + result.stderr


def test_check_config_warns_that_the_example_key_is_a_placeholder() -> None:
    result = run_cli("check-config", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    assert "warning: state.keys #0 is a placeholder; `serve` refuses it" in result.stderr


def test_serve_refuses_the_example_files_placeholder_key() -> None:
    result = run_cli("serve", "--config", str(EXAMPLE))
    assert result.returncode == 2
    assert "state.keys: key #0 is a placeholder (REPLACE-ME…), not a secret" in result.stderr
    assert "mrtr-gateway gen-key" in result.stderr


def test_serve_on_a_busy_port_says_so_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_cli("serve", "--config", str(write_config(tmp_path)), "--port", str(port))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"mrtr-gateway: cannot listen on 127.0.0.1:{port}: address already in use"
    ]


def test_check_config_names_the_duplicate_yaml_key(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(
        "routes:\n  - name: a\n    path: /mcp\n    path: /other\n    backend: {url: 'http://h/mcp'}\n", encoding="utf-8"
    )
    result = run_cli("check-config", str(path))
    assert result.returncode == 1
    assert f"{path}: not valid YAML at line 4, column 5: duplicate key 'path' (first set at line 3)" in result.stderr


# --- a running gateway: healthcheck, and keys reloaded on SIGHUP ---------------------------------


@contextlib.contextmanager
def serving(config: Path) -> Iterator[tuple[subprocess.Popen[str], queue.Queue[str]]]:
    """``serve`` in a subprocess; its stderr lines arrive in the queue. Stopped with SIGTERM at the end."""
    clean = {k: v for k, v in os.environ.items() if k not in (STATE_KEYS_ENV, REPLICA_ID_ENV)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd=REPO_ROOT,
        env=clean,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stderr is not None

    def read_lines() -> None:
        for line in proc.stderr or ():
            lines.put(line)

    reader = threading.Thread(target=read_lines, daemon=True)
    reader.start()
    try:
        yield proc, lines
    finally:
        proc.terminate()
        proc.wait(timeout=TIMEOUT)
        reader.join(timeout=TIMEOUT)
        proc.stderr.close()


def wait_for_line(lines: queue.Queue[str], needle: str) -> str:
    deadline = time.monotonic() + TIMEOUT
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if needle in line:
            return line
    raise AssertionError(f"no stderr line with {needle!r} within {TIMEOUT} s")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_healthcheck_probes_the_configured_port_and_sighup_does_not_stop_the_gateway(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path, listen={"host": "0.0.0.0", "port": port})
    assert run_cli("healthcheck", "--config", str(config)).returncode == 1  # nothing listens yet
    with serving(config) as (proc, lines):
        wait_for_line(lines, "listening")
        result = run_cli("healthcheck", "--config", str(config))
        assert result.returncode == 0, result.stderr
        proc.send_signal(signal.SIGHUP)  # keys are not from a file: nothing to reload, and no exit
        wait_for_line(lines, "sighup_ignored")
        assert run_cli("healthcheck", "--config", str(config)).returncode == 0
        assert proc.poll() is None


def test_sighup_reloads_the_keys_file_without_a_restart(tmp_path: Path) -> None:
    from gateway.state.codec import KeyRing

    old, new = "o" * 43, "n" * 43
    keys_file = tmp_path / "keys"
    keys_file.write_text(old, encoding="utf-8")
    config = write_config(tmp_path, state={"keys_file": str(keys_file), "reload_interval": 0})
    with serving(config) as (proc, lines):
        wait_for_line(lines, "listening")
        keys_file.write_text(f"{new}\n{old}\n", encoding="utf-8")
        proc.send_signal(signal.SIGHUP)
        reloaded = json.loads(wait_for_line(lines, "state_keys_reloaded"))
        assert proc.poll() is None
    assert reloaded["keys"] == ",".join(KeyRing([new.encode(), old.encode()]).key_ids)
    assert old not in json.dumps(reloaded)
    assert new not in json.dumps(reloaded)


def test_serve_in_json_mode_writes_only_json_lines_and_a_request_line_per_response(tmp_path: Path) -> None:
    """No aiohttp banner or access log on either stream: what an operator ships is JSON lines only."""
    port = free_port()
    config = write_config(tmp_path, listen={"host": "127.0.0.1", "port": port})
    clean = {k: v for k, v in os.environ.items() if k not in (STATE_KEYS_ENV, REPLICA_ID_ENV)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO_ROOT,
        env=clean,
    )
    lines: queue.Queue[str] = queue.Queue()
    everything: list[str] = []

    def read_lines() -> None:
        for line in proc.stdout or ():
            everything.append(line)
            lines.put(line)

    reader = threading.Thread(target=read_lines, daemon=True)
    reader.start()
    try:
        wait_for_line(lines, "listening")
        refused = urllib.request.Request(
            f"http://127.0.0.1:{port}/mcp", data=b"{}", method="POST", headers={"Content-Type": "text/plain"}
        )
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(refused, timeout=TIMEOUT)
        assert answer.value.code == 406
        answer.value.close()
        logged = json.loads(wait_for_line(lines, '"event": "request"'))
    finally:
        proc.terminate()
        proc.wait(timeout=TIMEOUT)
        reader.join(timeout=TIMEOUT)
        if proc.stdout is not None:
            proc.stdout.close()
    assert (logged["route"], logged["outcome"], logged["reason"], logged["status"]) == (
        "main",
        "rejected",
        "not_acceptable",
        406,
    )
    assert everything
    for line in everything:
        json.loads(line)  # raises on a banner, an access-log line or any other non-JSON line
