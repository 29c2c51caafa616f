"""The YAML config: errors that name their YAML path, environment overrides, and golden snapshots.

The example file is loaded into the normalized runtime model (``Settings``) and compared with
``tests/unit/golden/example.settings.json``; a change to the model's defaults or normalization shows
up there as a reviewable diff. Regenerate with ``UPDATE_GOLDEN=1 pytest tests/unit/test_config.py``.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config.load import (
    REPLICA_ID_ENV,
    STATE_KEYS_ENV,
    ConfigError,
    Settings,
    json_schema,
    load_config,
    parse_config,
    redact_url,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "config" / "gateway.example.yaml"
SCHEMA_FILE = REPO_ROOT / "config" / "gateway.schema.json"
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"

KEY_A = "a" * 32
KEY_B = "b" * 43


def minimal(**overrides: Any) -> dict[str, Any]:
    """The smallest valid config as parsed YAML, with top-level overrides."""
    data: dict[str, Any] = {
        "state": {"keys": [KEY_A]},
        "routes": [{"name": "main", "path": "/mcp", "backend": {"url": "http://127.0.0.1:8000/mcp"}}],
    }
    data.update(overrides)
    return data


def route(name: str = "main", path: str = "/mcp", **backend: Any) -> dict[str, Any]:
    return {"name": name, "path": path, "backend": {"url": "http://127.0.0.1:8000/mcp", **backend}}


def config_error(data: Any, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(data, env={} if env is None else env)
    return str(info.value)


def assert_matches_golden(name: str, actual: str) -> None:
    golden = GOLDEN_DIR / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(actual, encoding="utf-8")
    expected = golden.read_text(encoding="utf-8") if golden.exists() else "<missing>"
    assert actual == expected, (
        f"{golden.relative_to(REPO_ROOT)} is out of date; review the change, then regenerate it with "
        "`UPDATE_GOLDEN=1 pytest tests/unit/test_config.py`"
    )


def snapshot(settings: Settings) -> str:
    """The normalized runtime model as stable JSON, with every secret redacted."""
    config = settings.config.model_dump(mode="json")
    config["state"]["keys"] = [f"<redacted #{i}>" for i in range(len(config["state"]["keys"]))]
    for route_dump in config["routes"]:
        route_dump["backend"]["headers"] = dict.fromkeys(route_dump["backend"]["headers"], "<redacted>")
    dump = {
        "config": config,
        "replica_id": settings.replica_id,
        "state_keys": [f"<redacted: {len(k)} bytes>" for k in settings.state_keys],
    }
    return json.dumps(dump, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# --- errors name the YAML path ------------------------------------------------------------------


def test_unknown_key_deep_in_a_route_names_its_path() -> None:
    message = config_error(minimal(routes=[route(tiemout=3)]))
    assert message.startswith("routes[0].backend.tiemout: unknown option")


def test_unknown_top_level_key_names_it() -> None:
    assert config_error(minimal(listne={"port": 1})).startswith("listne: unknown option")


def test_field_name_is_not_accepted_in_place_of_its_yaml_alias() -> None:
    assert config_error(minimal(logging={"json_logs": True})).startswith("logging.json_logs: unknown option")


def test_bad_backend_url_names_its_path() -> None:
    message = config_error(minimal(routes=[route(), route("second", "/other", url="ftp://example.com/mcp")]))
    assert message == "routes[1].backend.url: must be an absolute http:// or https:// URL"


def test_short_key_is_refused_with_its_length_and_a_remedy() -> None:
    message = config_error(minimal(state={"keys": [KEY_A, "too-short"]}))
    assert message.startswith("state.keys: key #1 is 9 bytes; each key must be at least 32 bytes")
    assert "mrtr-gateway gen-key" in message


def test_repeated_key_is_refused() -> None:
    assert config_error(minimal(state={"keys": [KEY_A, KEY_B, KEY_A]})) == (
        "state.keys: key #2 repeats key #0; remove the duplicate"
    )


def test_no_key_at_all_is_refused_with_the_env_var_named() -> None:
    message = config_error(minimal(state={"ttl": 60}))
    assert message.startswith("state.keys: at least one key is required")
    assert STATE_KEYS_ENV in message


@pytest.mark.parametrize(
    ("routes", "expected"),
    [
        ([route("a", "/one"), route("a", "/two")], "routes: duplicate name 'a': routes[0] and routes[1]"),
        (
            [route("a", "/one"), route("b", "/two"), route("c", "/one")],
            "routes: duplicate path '/one': routes[0] and routes[2]",
        ),
    ],
    ids=["name", "path"],
)
def test_duplicate_route_is_refused_naming_both_entries(routes: list[dict[str, Any]], expected: str) -> None:
    assert config_error(minimal(routes=routes)) == expected


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics", "mcp", "/m cp"])
def test_reserved_or_malformed_route_path_is_refused(path: str) -> None:
    assert config_error(minimal(routes=[route(path=path)])).startswith("routes[0].path: must start with '/'")


def test_missing_routes_is_refused() -> None:
    data = minimal()
    del data["routes"]
    assert config_error(data) == "routes: Field required"


def test_empty_routes_is_refused() -> None:
    assert config_error(minimal(routes=[])).startswith("routes: List should have at least 1 item")


def test_every_problem_is_reported_one_per_line() -> None:
    message = config_error(minimal(listen={"port": 70000}, routes=[route(url="nope", transport="carrier-pigeon")]))
    lines = message.splitlines()
    assert [line.split(":", 1)[0] for line in lines] == [
        "listen.port",
        "routes[0].backend.transport",
        "routes[0].backend.url",
    ]


# --- backend transports and the options each one takes -----------------------------------------


def stdio_route(**backend: Any) -> dict[str, Any]:
    return {"name": "local", "path": "/mcp", "backend": {"transport": "stdio", "command": ["server"], **backend}}


def test_a_stdio_backend_takes_command_env_and_cwd() -> None:
    data = minimal(routes=[stdio_route(command=["uvx", "some-server"], env={"TOKEN": "t"}, cwd="/srv")])
    backend = parse_config(data, env={}).routes[0].backend
    assert (backend.transport, backend.url) == ("stdio", None)
    assert (backend.command, backend.env, backend.cwd) == (["uvx", "some-server"], {"TOKEN": "t"}, "/srv")


def test_a_stdio_backend_needs_a_command() -> None:
    data = minimal(routes=[route(), {"name": "b", "path": "/b", "backend": {"transport": "stdio"}}])
    assert config_error(data) == "routes[1].backend.command: required when transport is stdio (the server's argv)"


@pytest.mark.parametrize("command", [[], [""]], ids=["empty-list", "empty-program"])
def test_a_stdio_command_names_a_program(command: list[str]) -> None:
    assert config_error(minimal(routes=[stdio_route(command=command)])).startswith("routes[0].backend.command: ")


def test_a_stdio_backend_refuses_a_url() -> None:
    message = config_error(minimal(routes=[stdio_route(url="http://127.0.0.1:8000/mcp")]))
    assert message == "routes[0].backend.url: not allowed when transport is stdio (the server is run from `command`)"


def test_a_stdio_backend_refuses_headers_it_could_not_send() -> None:
    message = config_error(minimal(routes=[stdio_route(headers={"X-Api-Key": "k"})]))
    assert message.startswith("routes[0].backend.headers: not allowed when transport is stdio")


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_http_backends_need_a_url(transport: str) -> None:
    data = minimal(routes=[{"name": "a", "path": "/mcp", "backend": {"transport": transport}}])
    assert config_error(data) == f"routes[0].backend.url: required when transport is {transport}"


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_http_backends_refuse_the_stdio_options_naming_each(transport: str) -> None:
    message = config_error(minimal(routes=[route(transport=transport, command=["server"], env={"A": "1"}, cwd="/")]))
    assert message.splitlines() == [
        "routes[0].backend.command: only allowed when transport is stdio",
        "routes[0].backend.env: only allowed when transport is stdio",
        "routes[0].backend.cwd: only allowed when transport is stdio",
    ]


@pytest.mark.parametrize("data", [None, [], "routes: []", 42], ids=["empty", "list", "string", "number"])
def test_non_mapping_top_level_is_refused(data: Any) -> None:
    assert config_error(data) == "(top level): the configuration must be a YAML mapping"


def test_invalid_yaml_file_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "gateway.yaml"
    bad.write_text("routes:\n  - name: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML") as info:
        load_config(bad, env={})
    assert str(info.value).startswith(f"{bad}: not valid YAML")


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_unreadable_file_names_the_file(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "gateway.yaml"
    if kind == "directory":
        target.mkdir()
    with pytest.raises(ConfigError) as info:
        load_config(target, env={})
    assert str(info.value).startswith(f"{target}: cannot read the file (")


def test_validation_errors_from_a_file_name_the_yaml_path(tmp_path: Path) -> None:
    bad = tmp_path / "gateway.yaml"
    bad.write_text(yaml.safe_dump(minimal(routes=[route(max_sessions=0)])), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^routes\[0\]\.backend\.max_sessions: "):
        load_config(bad, env={})


# --- environment overrides ----------------------------------------------------------------------


def test_state_keys_env_replaces_the_file_keys_in_order() -> None:
    settings = parse_config(minimal(), env={STATE_KEYS_ENV: f"{KEY_B},{KEY_A}"})
    assert settings.config.state.keys == [KEY_B, KEY_A]
    assert settings.state_keys == (KEY_B.encode(), KEY_A.encode())


def test_state_keys_env_keeps_the_other_state_options() -> None:
    settings = parse_config(minimal(state={"keys": [KEY_A], "ttl": 42}), env={STATE_KEYS_ENV: KEY_B})
    assert settings.config.state.ttl == 42
    assert settings.state_keys == (KEY_B.encode(),)


def test_state_keys_env_ignores_whitespace_and_empty_items() -> None:
    settings = parse_config(minimal(), env={STATE_KEYS_ENV: f" {KEY_B} ,,{KEY_A}\n"})
    assert settings.state_keys == (KEY_B.encode(), KEY_A.encode())


def test_state_keys_env_supplies_keys_a_file_lacks() -> None:
    settings = parse_config(minimal(state=None), env={STATE_KEYS_ENV: KEY_B})
    assert settings.state_keys == (KEY_B.encode(),)


def test_state_keys_env_is_validated_like_the_file() -> None:
    assert config_error(minimal(), env={STATE_KEYS_ENV: f"{KEY_A},short"}).startswith("state.keys: key #1 is 5 bytes")


def test_empty_state_keys_env_leaves_the_file_keys() -> None:
    assert parse_config(minimal(), env={STATE_KEYS_ENV: ""}).state_keys == (KEY_A.encode(),)


# --- replica id ---------------------------------------------------------------------------------


def test_replica_id_from_the_file_wins_over_the_environment() -> None:
    settings = parse_config(minimal(replica_id="from-file"), env={REPLICA_ID_ENV: "from-env"})
    assert settings.replica_id == "from-file"


def test_replica_id_from_the_environment() -> None:
    assert parse_config(minimal(), env={REPLICA_ID_ENV: "gateway-7f9c-abcde"}).replica_id == "gateway-7f9c-abcde"


def test_replica_id_falls_back_to_the_hostname() -> None:
    assert parse_config(minimal(), env={}).replica_id == socket.gethostname()


# --- example, golden snapshot and published schema ----------------------------------------------


def test_example_config_loads() -> None:
    settings = load_config(EXAMPLE, env={})
    assert [(r.name, r.path) for r in settings.routes] == [("local-fastmcp", "/mcp"), ("tickets", "/tickets/mcp")]
    assert settings.routes[0].backend.url == "http://127.0.0.1:8000/mcp"


def test_example_config_sets_every_option_of_the_model() -> None:
    """Each option appears in the example, so that the example documents all of them."""
    raw = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    schema = json.loads(json_schema())

    def missing(node: dict[str, Any], value: dict[str, Any], where: str) -> list[str]:
        if "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
        out = []
        for name, prop in node.get("properties", {}).items():
            if name not in value:
                out.append(f"{where}{name}")
            elif prop.get("type") == "array" and "$ref" in prop.get("items", {}):
                out += missing(prop["items"], value[name][0], f"{where}{name}[0].")
            elif "$ref" in prop:
                out += missing(prop, value[name], f"{where}{name}.")
        return out

    assert missing(schema, raw, "") == []


def test_example_settings_match_the_golden_snapshot() -> None:
    settings = load_config(EXAMPLE, env={REPLICA_ID_ENV: "golden-replica"})
    assert_matches_golden("example.settings.json", snapshot(settings))


def test_snapshot_redacts_every_secret() -> None:
    settings = load_config(EXAMPLE, env={STATE_KEYS_ENV: KEY_B})
    text = snapshot(settings)
    assert KEY_B not in text
    assert "example-not-a-real-key" not in text


def test_published_schema_is_the_model_schema() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == json_schema(), (
        "config/gateway.schema.json is out of date; regenerate it with "
        "`mrtr-gateway config-schema > config/gateway.schema.json`"
    )


def test_example_points_editors_at_the_schema() -> None:
    first_line = EXAMPLE.read_text(encoding="utf-8").splitlines()[0]
    assert first_line == "# yaml-language-server: $schema=./gateway.schema.json"


# --- mistakes caught at check time --------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:99999/mcp", "the port in '127.0.0.1:99999' must be a number from 1 to 65535"),
        ("http://127.0.0.1:0/mcp", "the port in '127.0.0.1:0' must be a number from 1 to 65535"),
        ("http://backend:http/mcp", "the port in 'backend:http' must be a number from 1 to 65535"),
        ("http://my backend/mcp", "must not contain spaces or control characters"),
        ("http://bad_host!/mcp", "the host 'bad_host!' is not a valid host name or IP address"),
        ("http://a..b/mcp", "the host 'a..b' is not a valid host name or IP address"),
        ("http:///mcp", "must be an absolute http:// or https:// URL"),
        ("http://h/mcp#part", "must not have a #fragment (it is never sent to the server)"),
    ],
)
def test_a_backend_url_that_cannot_be_connected_to_is_refused_at_check_time(url: str, expected: str) -> None:
    assert config_error(minimal(routes=[route(url=url)])) == f"routes[0].backend.url: {expected}"


@pytest.mark.parametrize(
    "url", ["http://h", "https://user:pw@h.example:8443/mcp?tenant=a", "http://[::1]:8000/mcp", "http://10.0.0.1:1/"]
)
def test_usual_backend_urls_are_accepted(url: str) -> None:
    assert parse_config(minimal(routes=[route(url=url)]), env={}).routes[0].backend.url == url


@pytest.mark.parametrize("host", ["0.0.0 .0", "", "local host", "bad/host"])
def test_a_listen_host_with_spaces_or_stray_characters_is_refused(host: str) -> None:
    assert config_error(minimal(listen={"host": host})).startswith("listen.host: the host ")


@pytest.mark.parametrize("url", ["http://10.1.2.3:70000", "http://10.1.2.3:8080/mcp", "http://10.1.2.3:8080/?a=1"])
def test_a_bad_advertise_url_is_refused(url: str) -> None:
    assert config_error(minimal(replicas={"advertise_url": url})).startswith("replicas.advertise_url: ")


@pytest.mark.parametrize("path", ["/mcp?tenant=a", "/mcp#x"])
def test_a_route_path_with_a_query_or_fragment_is_refused(path: str) -> None:
    assert config_error(minimal(routes=[route(path=path)])) == (
        "routes[0].path: must be a plain path without a query ('?') or fragment ('#'); routes match the path"
    )


def test_a_duplicate_route_name_no_longer_hides_a_duplicate_path() -> None:
    message = config_error(minimal(routes=[route("a", "/one"), route("a", "/one")]))
    assert message.splitlines() == [
        "routes: duplicate name 'a': routes[0] and routes[1]",
        "routes: duplicate path '/one': routes[0] and routes[1]",
    ]


def test_a_type_error_shows_the_bad_value_truncated() -> None:
    message = config_error(minimal(listen={"port": "eighty" * 30}))
    assert message.startswith("listen.port: Input should be a valid integer")
    shown = message.split("(got ", 1)[1]
    assert shown.startswith("'eightyeighty")
    assert shown.endswith("…)")
    assert len(shown) <= 62


def test_a_type_error_in_a_secret_field_does_not_show_the_value() -> None:
    secret = "s3cr3t-value-that-must-not-be-printed"
    message = config_error(minimal(routes=[route(headers={"X-Api-Key": [secret]})]))
    assert message.startswith("routes[0].backend.headers.X-Api-Key: Input should be a valid string")
    assert secret not in message


def test_a_literal_error_shows_what_was_given() -> None:
    message = config_error(minimal(routes=[route(transport="carrier-pigeon")]))
    assert message.startswith("routes[0].backend.transport: Input should be ")
    assert message.endswith("(got 'carrier-pigeon')")


def test_duplicate_yaml_keys_are_an_error_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(
        f"state:\n  keys: [{KEY_A}]\nlisten:\n  port: 8080\n  port: 9090\n"
        "routes:\n  - name: main\n    path: /mcp\n    backend: {url: 'http://h/mcp'}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert str(info.value) == (
        f"{path}: not valid YAML at line 5, column 3: duplicate key 'port' (first set at line 4)"
    )


def test_yaml_merge_keys_may_still_be_overridden(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(
        f"state:\n  keys: [{KEY_A}]\n"
        "routes:\n  - name: main\n    path: /mcp\n    backend:\n      <<: {url: 'http://h/mcp', timeout: 5}\n"
        "      timeout: 9\n",
        encoding="utf-8",
    )
    assert load_config(path, env={}).routes[0].backend.timeout == 9


def test_a_yaml_syntax_error_names_the_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text("listen:\n  port: 8080\n routes: [\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    message = str(info.value)
    assert message.startswith(f"{path}: not valid YAML at line 3, column 2: ")
    assert "<unicode string>" not in message


# --- credentials in URLs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://alice:hunter2@h.example/mcp", "https://<redacted>@h.example/mcp"),
        ("https://tok3n@h.example:8443/mcp", "https://<redacted>@h.example:8443/mcp"),
        ("http://h/mcp?api_key=tok3n&x=", "http://h/mcp?api_key=<redacted>&x=<redacted>"),
        ("http://h/mcp", "http://h/mcp"),
    ],
)
def test_redact_url_hides_credentials(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_bad_url_with_credentials_is_refused_without_printing_them() -> None:
    message = config_error(minimal(routes=[route(url="http://alice:hunter2@h:99999/mcp")]))
    assert "hunter2" not in message
    assert message == "routes[0].backend.url: the port in 'h:99999' must be a number from 1 to 65535"


# --- keys from a file or directory --------------------------------------------------------------


def keyfile_config(path: Path, **state: Any) -> dict[str, Any]:
    return minimal(state={"keys_file": str(path), **state})


def test_keys_come_from_a_file_holding_the_list(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"{KEY_B},{KEY_A}\n", encoding="utf-8")
    settings = parse_config(keyfile_config(path), env={})
    assert settings.state_keys == (KEY_B.encode(), KEY_A.encode())
    assert settings.state_keys_file == path


def test_keys_come_from_a_directory_one_per_file_in_name_order_skipping_hidden_entries(tmp_path: Path) -> None:
    """The layout of a mounted Kubernetes Secret: a symlink per key into a hidden ..data directory."""
    data = tmp_path / "..2026_01_01_00_00_00.000000001"
    data.mkdir()
    (data / "1-current").write_text(KEY_B + "\n", encoding="utf-8")
    (data / "2-previous").write_text(KEY_A, encoding="utf-8")
    (tmp_path / "..data").symlink_to(data.name)
    for name in ("1-current", "2-previous"):
        (tmp_path / name).symlink_to(f"..data/{name}")
    assert parse_config(keyfile_config(tmp_path), env={}).state_keys == (KEY_B.encode(), KEY_A.encode())


def test_a_directory_file_holding_a_list_is_refused(tmp_path: Path) -> None:
    (tmp_path / "keys").write_text(f"{KEY_A},{KEY_B}", encoding="utf-8")
    message = config_error(keyfile_config(tmp_path))
    assert message.startswith(f"state.keys_file: {tmp_path}: keys holds a list")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", "holds no key"),
        ("short", "key #0 is 5 bytes; each key must be at least 32 bytes"),
        (f"{KEY_A}\n{KEY_A}", "key #1 repeats key #0"),
    ],
)
def test_a_bad_key_file_is_refused_naming_it(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "keys"
    path.write_text(content, encoding="utf-8")
    assert config_error(keyfile_config(path)).startswith(f"state.keys_file: {path}: {expected}")


def test_a_missing_key_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "absent"
    assert config_error(keyfile_config(path)).startswith(f"state.keys_file: {path}: cannot read it (")


def test_keys_and_keys_file_together_are_refused(tmp_path: Path) -> None:
    data = minimal(state={"keys": [KEY_A], "keys_file": str(tmp_path)})
    assert config_error(data) == "state: set keys or keys_file, not both"


def test_state_keys_env_replaces_a_keys_file(tmp_path: Path) -> None:
    settings = parse_config(keyfile_config(tmp_path / "absent"), env={STATE_KEYS_ENV: KEY_B})
    assert (settings.state_keys, settings.state_keys_file) == ((KEY_B.encode(),), None)


def test_the_example_key_is_a_placeholder() -> None:
    settings = load_config(EXAMPLE, env={})
    assert settings.placeholder_keys() == [0]
    assert parse_config(minimal(), env={}).placeholder_keys() == []


def test_route_roots_must_be_file_uris() -> None:
    good = {**route(), "roots": [{"uri": "file:///workspace", "name": "workspace"}]}
    settings = parse_config(minimal(routes=[good]), env={})
    (root,) = settings.config.routes[0].roots or []
    assert (root.uri, root.name) == ("file:///workspace", "workspace")
    bad = {**route(), "roots": [{"uri": "https://example.com/repo"}]}
    assert config_error(minimal(routes=[bad])).startswith("routes[0].roots[0].uri: must be a file:// URI")
