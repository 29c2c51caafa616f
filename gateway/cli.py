"""Command line: ``mrtr-gateway serve | check-config | gen-key | config-schema | healthcheck | demo``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import shlex
import signal
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import yaml
from aiohttp import web

from gateway.config.load import PLACEHOLDER_MARK, ConfigError, Settings, json_schema, load_config, redact_url
from gateway.config.model import BackendConfig

DEFAULT_CONFIG = "/etc/mrtr-gateway/gateway.yaml"


def _serve(args: argparse.Namespace) -> int:
    from gateway import server
    from gateway.app import build_app
    from gateway.observability import tracing
    from gateway.observability.logging import configure_logging

    try:
        settings = load_config(args.config)
        app = build_app(settings)  # reads static auth keys: a bad one is a configuration error too
    except ConfigError as exc:
        print(f"mrtr-gateway: invalid configuration:\n{exc}", file=sys.stderr)
        return 2
    if placeholders := settings.placeholder_keys():
        print(
            f"mrtr-gateway: invalid configuration:\nstate.keys: key #{placeholders[0]} is a placeholder "
            f"({PLACEHOLDER_MARK}…), not a secret; generate one with `mrtr-gateway gen-key`",
            file=sys.stderr,
        )
        return 2
    logging_cfg = settings.config.logging
    configure_logging(logging_cfg.level, logging_cfg.json_logs)
    tracing.setup_from_env(os.environ)  # off unless OTEL_TRACES_EXPORTER names an exporter (docs/operations.md)
    listen = settings.config.listen
    try:
        server.event_loop(listen.event_loop)
    except server.LoopUnavailable as exc:
        print(f"mrtr-gateway: invalid configuration:\nlisten.event_loop: {exc}", file=sys.stderr)
        return 2
    host, port = args.host or listen.host, args.port if args.port is not None else listen.port
    app.on_startup.append(_reload_keys_on_sighup)
    try:
        # The server bounds connections and header sizes (gateway.server); the app, everything else.
        server.run(app, host, port, listen)
    except OSError as exc:
        # Binding is the only step that fails this way before serving; say which address, in one line.
        if exc.errno not in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise
        address = exc.address if isinstance(exc, server.BindFailed) else f"{host}:{port}"
        print(f"mrtr-gateway: cannot listen on {address}: {os.strerror(exc.errno).lower()}", file=sys.stderr)
        return 1
    finally:
        tracing.shutdown()  # export the spans still buffered
    return 0


async def _reload_keys_on_sighup(app: web.Application) -> None:
    """SIGHUP re-reads state.keys_file now (runs after the cleanup contexts started the watcher).

    Without a keys file there is nothing to reload, but SIGHUP must still not end the process
    (its default action): a habit of `kill -HUP` after editing a config would stop the gateway.
    """
    import structlog

    from gateway import keys

    if keys.KEY_WATCHER in app:
        handler = app[keys.KEY_WATCHER].request
    else:

        def handler() -> None:
            structlog.get_logger("gateway").warning("sighup_ignored", reason="state keys are not read from a file")

    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, handler)


def _check_config(args: argparse.Namespace) -> int:
    from gateway.auth.gate import static_keys

    try:
        settings = load_config(args.file)
        static_keys(settings.routes)  # the JWT keys a route reads from its config or from files
    except ConfigError as exc:
        print(f"{args.file}: invalid configuration:\n{exc}", file=sys.stderr)
        return 1
    routes = ", ".join(f"{r.name} ({r.path} → {_backend_label(r.backend)})" for r in settings.routes)
    print(f"{args.file}: OK — {len(settings.routes)} route(s): {routes}")
    _warn_placeholders(args.file, settings)
    return 0


def _warn_placeholders(file: str, settings: Settings) -> None:
    for index in settings.placeholder_keys():
        print(
            f"{file}: warning: state.keys #{index} is a placeholder; `serve` refuses it "
            "(generate a key with `mrtr-gateway gen-key`)",
            file=sys.stderr,
        )


def _backend_label(backend: BackendConfig) -> str:
    if backend.command is not None:
        return "stdio: " + shlex.join(backend.command)
    return redact_url(str(backend.url))


def _healthcheck(args: argparse.Namespace) -> int:
    """GET /healthz on the port the configuration listens on (the container's HEALTHCHECK).

    Only ``listen`` is read, so the probe works whatever else the file holds and needs no keys.
    """
    port, host = args.port, "127.0.0.1"
    if port is None:
        try:
            data = yaml.safe_load(Path(args.config).read_text(encoding="utf-8"))
            listen = (data or {}).get("listen") or {}
            port = int(listen.get("port", 8080))
            configured = str(listen.get("host", "0.0.0.0"))  # noqa: S104
        except (OSError, ValueError, TypeError, AttributeError, yaml.YAMLError) as exc:
            print(f"healthcheck: cannot read listen.port from {args.config}: {exc}", file=sys.stderr)
            return 1
        if configured not in ("0.0.0.0", "::", ""):  # noqa: S104
            host = f"[{configured}]" if ":" in configured else configured
    url = f"http://{host}:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as response:
            ok = response.status == 200
    except OSError as exc:
        print(f"healthcheck: {url}: {exc}", file=sys.stderr)
        return 1
    return 0 if ok else 1


def _gen_key(args: argparse.Namespace) -> int:
    from gateway.keyset import generate_secret

    print(generate_secret())
    return 0


def _schema(args: argparse.Namespace) -> int:
    sys.stdout.write(json_schema())
    return 0


def _demo(args: argparse.Namespace) -> int:
    from gateway.demo.run import run_demo

    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(run_demo(port=args.port, walk=args.walk))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mrtr-gateway", description="Serve legacy MCP servers as MCP 2026-07-28 servers."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the gateway")
    serve.add_argument("--config", required=True, help="YAML configuration file")
    serve.add_argument("--host", help="override listen.host")
    serve.add_argument("--port", type=int, help="override listen.port")
    serve.set_defaults(func=_serve)
    check = sub.add_parser("check-config", help="validate a configuration file and exit")
    check.add_argument("file")
    check.set_defaults(func=_check_config)
    gen = sub.add_parser("gen-key", help="print a new random requestState key")
    gen.set_defaults(func=_gen_key)
    schema = sub.add_parser("config-schema", help="print the configuration JSON schema")
    schema.set_defaults(func=_schema)
    health = sub.add_parser("healthcheck", help="exit 0 when the gateway on this host answers /healthz")
    health.add_argument("--config", default=DEFAULT_CONFIG, help=f"read listen.port from it (default {DEFAULT_CONFIG})")
    health.add_argument("--port", type=int, help="probe this port instead")
    health.add_argument("--timeout", type=float, default=4.0, help="seconds to wait (default 4)")
    health.set_defaults(func=_healthcheck)
    demo = sub.add_parser("demo", help="run a bundled legacy demo server behind the gateway on loopback")
    demo.add_argument("--port", type=int, default=8080, help="gateway port (default 8080; 0 = any free port)")
    demo.add_argument(
        "--walk",
        metavar="TOOL",
        nargs="?",
        const="ask_two",
        help="drive one tool end to end in the terminal, showing each round, then exit (default tool: ask_two)",
    )
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    raise SystemExit(main())
