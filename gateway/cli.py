"""Command line: ``mrtr-gateway serve | check-config | gen-key | demo``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import signal
import sys
from collections.abc import Sequence

from gateway.config import ConfigError, json_schema, load_config
from gateway.config.model import BackendConfig


def _serve(args: argparse.Namespace) -> int:
    from gateway import server
    from gateway.app import build_app
    from gateway.observability.logging import configure_logging

    try:
        settings = load_config(args.config)
        app = build_app(settings)  # reads static auth keys: a bad one is a configuration error too
    except ConfigError as exc:
        print(f"mrtr-gateway: invalid configuration:\n{exc}", file=sys.stderr)
        return 2
    logging_cfg = settings.config.logging
    configure_logging(logging_cfg.level, logging_cfg.json_logs)
    listen = settings.config.listen
    # The server bounds connections and header sizes (gateway.server); the app, everything else.
    server.run(
        app,
        args.host or listen.host,
        args.port if args.port is not None else listen.port,
        listen,
    )
    return 0


def _check_config(args: argparse.Namespace) -> int:
    from gateway.auth import static_keys

    try:
        settings = load_config(args.file)
        static_keys(settings.routes)  # the JWT keys a route reads from its config or from files
    except ConfigError as exc:
        print(f"{args.file}: invalid configuration:\n{exc}", file=sys.stderr)
        return 1
    routes = ", ".join(f"{r.name} ({r.path} → {_backend_label(r.backend)})" for r in settings.routes)
    print(f"{args.file}: OK — {len(settings.routes)} route(s): {routes}")
    return 0


def _backend_label(backend: BackendConfig) -> str:
    if backend.command is not None:
        return "stdio: " + shlex.join(backend.command)
    return str(backend.url)


def _gen_key(args: argparse.Namespace) -> int:
    from gateway.state.codec import generate_secret

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
