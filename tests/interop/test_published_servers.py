"""Third-party legacy MCP servers published on npm and PyPI, behind the gateway, driven by the official
mcp 2.3.0 client pinned to mode "2026-07-28".

Every server is a release from npm or PyPI, pinned to an exact version and installed by
``scripts/bootstrap.sh`` (npm: ``tests/interop/published/package-lock.json``; PyPI:
``tests/interop/published/requirements.txt`` into ``.venv-published``). Each runs offline: its
tools touch only a temporary directory, a temporary git repository or memory, and the HTTP ones
are reached on 127.0.0.1. For each one the client does what a new user would: a strict
``server/discover``, the lists the server declares, and at least one real tool call whose effect
is checked (a file on disk, a commit message, an answer computed from the arguments).

| server | version | backend transport |
|---|---|---|
| ``@modelcontextprotocol/server-filesystem`` | 2026.8.31 | stdio |
| ``@modelcontextprotocol/server-memory`` | 2026.8.31 | stdio |
| ``@modelcontextprotocol/server-sequential-thinking`` | 2026.8.31 | stdio |
| ``@modelcontextprotocol/server-everything`` | 2026.8.31 | streamable HTTP, HTTP+SSE (2024-11-05) |
| ``mcp-shrimp-task-manager`` | 1.0.21 | stdio |
| ``@pollinations/mcp-server-sqlite`` | 0.6.6 | stdio |
| ``mcp-server-time`` (PyPI) | 2026.8.18 | stdio |
| ``mcp-server-git`` (PyPI) | 2026.8.18 | stdio |
| ``office-word-mcp-server`` (PyPI) | 1.1.11 | HTTP+SSE (2024-11-05), stdio |

What these servers do that the project's own peers do not: ``server-everything`` registers its
elicitation, sampling and roots tools only once the session's capabilities are known (after
``notifications/initialized``), and answers with the whole form it asked for; ``server-memory``
and ``server-sequential-thinking`` return ``structuredContent`` against an output schema the
client validates; ``mcp-server-git`` is a low-level ``mcp`` 1.x server with hand-written schemas;
``office-word-mcp-server`` runs on FastMCP 3 (the standalone ``fastmcp`` package), whose update
check is switched off by ``FASTMCP_CHECK_FOR_UPDATES=off`` so it stays offline.

Some habits of published servers need the gateway's help (the last section):
``office-word-mcp-server`` prints on stdout before it serves; ``server-filesystem`` and
``server-everything`` ask ``roots/list`` right after ``notifications/initialized``, when no call
is in flight (asked of the next call's client, or answered from the route's ``roots``);
``mcp-shrimp-task-manager`` asks ``roots/list`` inside ``tools/list`` and waits for the answer
(answered by the gateway once the list has waited ``UNCLAIMED_STALL``); and
``@pollinations/mcp-server-sqlite`` binds a fixed port, so only one copy can run (``max_sessions: 1``).
``@pollinations/mcp-server-sqlite`` depends on ``sqlite3``, a native module its install script builds.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from harness import GatewayHandle, route, running_gateway, stdio_route
from logged import logged
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from peers.runner import REPO_ROOT, free_port, run_peer
from waiting import eventually

from gateway import keys
from gateway.legacy import stdio_process, unclaimed

pytestmark = pytest.mark.interop

MODERN = "2026-07-28"
PUBLISHED = REPO_ROOT / "tests" / "interop" / "published"
NPM_BIN = PUBLISHED / "node_modules" / ".bin"
PYPI_BIN = REPO_ROOT / ".venv-published" / "bin"
OLD_SDK_BIN = REPO_ROOT / ".venv-oldsdk" / "bin"
"""``mcp-server-time`` 2025.9.25 on ``mcp==1.8.0``: a request before the handshake (even a ``ping``)
makes it raise "Received request before initialization was complete" and exit."""

FLOW_TIMEOUT = 90.0
"""Bound on one test: a Node or Python server's cold start takes seconds on a loaded CI machine."""
SERVER_START_TIMEOUT = 60.0
"""Bound on an HTTP server's start (FastMCP 3 imports for several seconds)."""
BACKEND = {"timeout": 60, "connect_timeout": 30}
"""Route timeouts generous enough for a cold start; every wait is still bounded."""
FASTMCP_OFFLINE = {"FASTMCP_CHECK_FOR_UPDATES": "off", "FASTMCP_SHOW_SERVER_BANNER": "false"}


def npm_server(name: str) -> str:
    return npm_program(f"mcp-server-{name}")


def npm_program(program: str) -> str:
    command = NPM_BIN / program
    if not command.exists():
        pytest.fail(f"{command} is missing; run `bash scripts/bootstrap.sh` from the repo root", pytrace=False)
    return str(command)


def pypi_server(name: str, bin_dir: Path = PYPI_BIN) -> str:
    command = bin_dir / name
    if not command.exists():
        pytest.fail(f"{command} is missing; run `bash scripts/bootstrap.sh` from the repo root", pytrace=False)
    return str(command)


def published_stdio_route(command: list[str], **backend: Any) -> dict[str, Any]:
    return stdio_route("published", "/mcp", command, backend={**BACKEND, **backend})


@asynccontextmanager
async def modern_client(gateway: GatewayHandle, **callbacks: Any) -> AsyncIterator[Client]:
    """The official client, pinned to 2026-07-28, declaring only the capabilities it has callbacks for."""
    async with Client(gateway.url(), mode=MODERN, **callbacks) as client:
        assert client.protocol_version == MODERN
        yield client


async def tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def first_contact(client: Client, server_name: str) -> tuple[types.DiscoverResult, set[str]]:
    """``tools/list``, then a strict ``server/discover`` on the wire: 2026-07-28 offered, the legacy
    server's own name in ``_meta``. Returns both.

    The list goes first because it starts the backend (for stdio, the server's process), which on
    a loaded machine can outlast the SDK's fixed 10 s bound on ``server/discover``; the list is
    bounded by the test's deadline instead. ``send_discover`` because a pinned client answers
    ``discover()`` from the result it synthesized itself."""
    tools = await tool_names(client)
    discovered = types.DiscoverResult.model_validate(await client.session.send_discover(MODERN))
    assert discovered.supported_versions == [MODERN]
    assert discovered.meta is not None
    assert discovered.meta["io.modelcontextprotocol/serverInfo"]["name"] == server_name
    return discovered, tools


def texts(result: types.CallToolResult) -> list[str]:
    assert not result.is_error, result.content
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def only_text(result: types.CallToolResult) -> str:
    (text,) = texts(result)
    return text


# --- stdio, npm ---------------------------------------------------------------------------------


async def test_filesystem_server_writes_reads_and_lists_through_stdio(tmp_path: Path) -> None:
    """server-filesystem with its allowed directory on the command line (a client without roots)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("first line\nsecond line\n")
    command = [npm_server("filesystem"), str(workspace)]
    with anyio.fail_after(FLOW_TIMEOUT):
        async with running_gateway([published_stdio_route(command)]) as gateway, modern_client(gateway) as client:
            discovered, tools = await first_contact(client, "secure-filesystem-server")
            assert discovered.capabilities.tools is not None
            assert {"read_text_file", "write_file", "list_directory", "list_allowed_directories"} <= tools
            target = workspace / "from-the-client.txt"
            written = await client.call_tool("write_file", {"path": str(target), "content": "written via MRTR"})
            assert "Successfully wrote" in only_text(written)
            read = await client.call_tool("read_text_file", {"path": str(workspace / "notes.txt"), "head": 1})
            assert only_text(read) == "first line"
            listing = only_text(await client.call_tool("list_directory", {"path": str(workspace)}))
            outside = await client.call_tool("read_text_file", {"path": str(tmp_path / "elsewhere.txt")})
    assert target.read_text() == "written via MRTR"
    assert set(listing.splitlines()) == {"[FILE] from-the-client.txt", "[FILE] notes.txt"}
    # The server's own access check still applies behind the gateway: a tool error, not a crash.
    assert outside.is_error
    assert "outside allowed directories" in str(outside.content[0])


async def test_memory_server_keeps_a_knowledge_graph_in_its_file_through_stdio(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    route_ = published_stdio_route([npm_server("memory")], env={"MEMORY_FILE_PATH": str(memory_file)})
    entity = {"name": "mrtr-gateway", "entityType": "project", "observations": ["fronts legacy MCP servers"]}
    with anyio.fail_after(FLOW_TIMEOUT):
        async with running_gateway([route_]) as gateway, modern_client(gateway) as client:
            _, tools = await first_contact(client, "memory-server")
            assert {"create_entities", "create_relations", "read_graph", "search_nodes"} <= tools
            created = await client.call_tool("create_entities", {"entities": [entity]})
            found = await client.call_tool("search_nodes", {"query": "legacy MCP"})
            resources = (await client.list_resources()).resources
    assert not created.is_error
    assert created.structured_content == {"entities": [entity]}
    assert found.structured_content == {"entities": [entity], "relations": []}
    assert resources  # the graph is also published as a resource
    (line,) = memory_file.read_text().splitlines()
    assert json.loads(line) == {"type": "entity", **entity}


async def test_sequential_thinking_server_answers_with_structured_content_through_stdio() -> None:
    route_ = published_stdio_route([npm_server("sequential-thinking")], env={"DISABLE_THOUGHT_LOGGING": "true"})
    with anyio.fail_after(FLOW_TIMEOUT):
        async with running_gateway([route_]) as gateway, modern_client(gateway) as client:
            _, tools = await first_contact(client, "sequential-thinking-server")
            assert tools == {"sequentialthinking"}
            first = await client.call_tool(
                "sequentialthinking",
                {"thought": "Hold the call.", "thoughtNumber": 1, "totalThoughts": 2, "nextThoughtNeeded": True},
            )
            second = await client.call_tool(
                "sequentialthinking",
                {"thought": "Resume it.", "thoughtNumber": 2, "totalThoughts": 2, "nextThoughtNeeded": False},
            )
    assert first.structured_content == {
        "thoughtNumber": 1,
        "totalThoughts": 2,
        "nextThoughtNeeded": True,
        "branches": [],
        "thoughtHistoryLength": 1,
    }
    # One process behind both calls: the server's history carries over from the first call.
    assert second.structured_content is not None
    assert second.structured_content["thoughtHistoryLength"] == 2


# --- stdio, PyPI --------------------------------------------------------------------------------


async def test_time_server_converts_between_time_zones_through_stdio() -> None:
    route_ = published_stdio_route([pypi_server("mcp-server-time"), "--local-timezone", "Etc/UTC"])
    with anyio.fail_after(FLOW_TIMEOUT):
        async with running_gateway([route_]) as gateway, modern_client(gateway) as client:
            _, tools = await first_contact(client, "mcp-time")
            assert tools == {"get_current_time", "convert_time"}
            now = json.loads(only_text(await client.call_tool("get_current_time", {"timezone": "Asia/Tokyo"})))
            converted = await client.call_tool(
                "convert_time", {"source_timezone": "Etc/UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
            )
    assert now["timezone"] == "Asia/Tokyo"
    assert now["datetime"].endswith("+09:00")
    answer = json.loads(only_text(converted))
    assert answer["source"]["timezone"] == "Etc/UTC"
    assert answer["target"]["datetime"].endswith("T21:00:00+09:00")
    assert answer["time_difference"] == "+9.0h"


async def test_a_server_on_an_old_sdk_starts_twenty_times_through_stdio() -> None:
    """Nothing is written to a stdio server before ``initialize``: a server on ``mcp`` 1.8 exits on
    any earlier request. Spares started ahead of need stay alive; then 20 times in a row, two
    clients at once call a tool (each on a spare or a process of its own) and every process is
    stopped before the next pair, so every pair starts new ones."""
    command = [pypi_server("mcp-server-time", OLD_SDK_BIN), "--local-timezone", "Etc/UTC"]
    route_ = published_stdio_route(command, prewarm=2, max_opening=2)
    rounds, zones = 20, ("Asia/Tokyo", "Europe/Paris")
    answers: list[str] = []
    with anyio.fail_after(4 * FLOW_TIMEOUT):
        async with running_gateway([route_]) as gateway:
            pool = gateway.app[keys.ROUTES]["/mcp"].pool
            await eventually(lambda: pool.spare_count >= 2, what="two spares", timeout=SERVER_START_TIMEOUT)
            await anyio.sleep(1.0)  # deliberate: a server sent a request before the handshake is gone by now
            assert pool.health.failures == 0, "no spare exited"
            assert pool.spare_count == 2

            async def one_client(zone: str) -> None:
                async with modern_client(gateway) as client:
                    answer = json.loads(only_text(await client.call_tool("get_current_time", {"timezone": zone})))
                    answers.append(answer["timezone"])

            for _ in range(rounds):
                async with anyio.create_task_group() as group:
                    for zone in zones:
                        group.start_soon(one_client, zone)
                pool.reap(now=time.monotonic() + 10**6)  # every idle process and spare stopped
            started, failures = pool.initializations, pool.health.failures
    assert sorted(answers) == sorted(zones * rounds)
    assert started >= rounds, f"{started} processes started for {rounds} rounds"
    assert failures == 0, "no process exited before it was used"


@contextmanager
def git_repository(path: Path) -> Iterator[Path]:
    """A throwaway repository with one commit, built with the real ``git``."""
    path.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True, timeout=30)

    git("init", "--quiet", "--initial-branch=main")
    git("config", "user.email", "tests@example.invalid")
    git("config", "user.name", "Interop Tests")
    (path / "README.md").write_text("hello\n")
    git("add", "README.md")
    git("commit", "--quiet", "-m", "First commit, read through the gateway")
    (path / "README.md").write_text("hello\nchanged\n")
    yield path


async def test_git_server_reads_a_repository_through_stdio(tmp_path: Path) -> None:
    with git_repository(tmp_path / "repo") as repo:
        route_ = published_stdio_route([pypi_server("mcp-server-git"), "--repository", str(repo)])
        with anyio.fail_after(FLOW_TIMEOUT):
            async with running_gateway([route_]) as gateway, modern_client(gateway) as client:
                _, tools = await first_contact(client, "mcp-git")
                assert {"git_status", "git_log", "git_diff_unstaged", "git_add", "git_commit"} <= tools
                log = only_text(await client.call_tool("git_log", {"repo_path": str(repo), "max_count": 1}))
                diff = only_text(await client.call_tool("git_diff_unstaged", {"repo_path": str(repo)}))
                escape = await client.call_tool("git_status", {"repo_path": str(tmp_path)})
    assert "First commit, read through the gateway" in log
    assert "+changed" in diff
    assert escape.is_error  # outside the repository the server was started for


# --- HTTP ---------------------------------------------------------------------------------------


@contextmanager
def everything_server(transport: str, log_dir: Path) -> Iterator[str]:
    """server-everything in one of its HTTP modes (``streamableHttp`` or ``sse``); yields the MCP URL.

    It reads its port from ``PORT``."""
    port = free_port()
    argv = [npm_server("everything"), transport]
    with run_peer(f"everything-{transport}", argv, port, log_dir, env={"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/mcp" if transport == "streamableHttp" else f"http://127.0.0.1:{port}/sse"


ELICITED = {"name": "Ada Lovelace", "check": True, "integer": 7, "email": "ada@example.invalid"}


async def elicit_form(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    assert isinstance(params, types.ElicitRequestFormParams)
    assert params.requested_schema["required"] == ["name"]
    return types.ElicitResult(action="accept", content=ELICITED)


async def sample_haiku(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    (message,) = params.messages
    assert isinstance(message.content, types.TextContent)
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=f"sampled: {message.content.text}"),
        model="interop-model",
    )


async def drive_everything(gateway: GatewayHandle) -> None:
    """Discover, every list, plain tools, then an elicitation and a sampling round through the gateway."""
    async with modern_client(gateway, elicitation_callback=elicit_form, sampling_callback=sample_haiku) as client:
        discovered, tools = await first_contact(client, "mcp-servers/everything")
        assert discovered.instructions  # the server's instructions survive the translation
        # The conditional tools exist only because the backend session declared both capabilities.
        assert {"echo", "get-sum", "trigger-elicitation-request", "trigger-sampling-request"} <= tools
        prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
        assert {"simple-prompt", "args-prompt"} <= prompts
        assert (await client.list_resources()).resources
        assert (await client.list_resource_templates()).resource_templates

        assert only_text(await client.call_tool("echo", {"message": "through the gateway"})) == (
            "Echo: through the gateway"
        )
        assert only_text(await client.call_tool("get-sum", {"a": 20, "b": 22})) == "The sum of 20 and 22 is 42."
        prompt = await client.get_prompt("args-prompt", {"city": "Paris", "state": "TX"})
        assert "Paris" in str(prompt.messages[0].content)

        elicited = texts(await client.call_tool("trigger-elicitation-request", {}))
        assert elicited[0].startswith("✅ User provided the requested information!")
        assert "- Name: Ada Lovelace" in elicited[1]
        assert "- Favorite Integer: 7" in elicited[1]

        sampled = only_text(await client.call_tool("trigger-sampling-request", {"prompt": "a haiku", "maxTokens": 20}))
        assert sampled.startswith("LLM sampling result:")
        answer = json.loads(sampled.removeprefix("LLM sampling result:"))
        assert answer["content"]["text"] == "sampled: Resource trigger-sampling-request context: a haiku"
        assert answer["model"] == "interop-model"


async def test_everything_server_over_streamable_http_elicits_and_samples(peer_log_dir: Path) -> None:
    with everything_server("streamableHttp", peer_log_dir) as url, anyio.fail_after(FLOW_TIMEOUT):
        async with running_gateway([route("everything", "/mcp", url, backend=BACKEND)]) as gateway:
            await drive_everything(gateway)


async def test_everything_server_over_http_sse_elicits_and_samples(peer_log_dir: Path) -> None:
    with everything_server("sse", peer_log_dir) as url, anyio.fail_after(FLOW_TIMEOUT):
        async with running_gateway([route("everything", "/mcp", url, backend={**BACKEND, "transport": "sse"})]) as gw:
            await drive_everything(gw)


async def test_word_server_on_fastmcp_3_over_http_sse_writes_a_document(tmp_path: Path, peer_log_dir: Path) -> None:
    port = free_port()
    env = {**FASTMCP_OFFLINE, "MCP_TRANSPORT": "sse", "MCP_HOST": "127.0.0.1", "MCP_PORT": str(port)}
    argv = [pypi_server("word_mcp_server")]
    document = tmp_path / "report.docx"
    with (
        run_peer("word-sse", argv, port, peer_log_dir, env=env, start_timeout=SERVER_START_TIMEOUT),
        anyio.fail_after(FLOW_TIMEOUT),
    ):
        url = f"http://127.0.0.1:{port}/sse"
        async with (
            running_gateway([route("word", "/mcp", url, backend={**BACKEND, "transport": "sse"})]) as gateway,
            modern_client(gateway) as client,
        ):
            _, tools = await first_contact(client, "Word Document Server")
            assert {"create_document", "add_paragraph", "get_document_text"} <= tools
            created = await client.call_tool("create_document", {"filename": str(document), "title": "Interop"})
            added = await client.call_tool(
                "add_paragraph", {"filename": str(document), "text": "Written through the gateway."}
            )
            read = only_text(await client.call_tool("get_document_text", {"filename": str(document)}))
    assert "created successfully" in only_text(created)
    assert not added.is_error
    assert "Written through the gateway." in read
    assert document.read_bytes().startswith(b"PK")  # a real .docx (a zip) on disk


# --- servers that need the gateway's help at session start --------------------------------------


async def test_word_server_that_prints_on_stdout_before_serving_works_through_stdio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """office-word-mcp-server prints start-up lines on stdout before it serves.

    ``word_document_server/main.py`` prints "Loading configuration from .env file...", then
    ``get_transport_config()`` prints "Transport: stdio", then ``run_server()`` prints "Starting Word
    Document MCP Server with stdio transport..." and "Server running on stdio transport", all before
    FastMCP reads the first message. ``PYTHONUNBUFFERED=1`` (set by most Python container images)
    makes them reach the pipe at once instead of at exit. The gateway logs and skips the lines that
    are not JSON-RPC and serves the session.
    """
    skipped = logged(monkeypatch, stdio_process.log, "backend_stdout_skipped", "line")
    document = tmp_path / "notes.docx"
    env = {**FASTMCP_OFFLINE, "PYTHONUNBUFFERED": "1"}
    # prewarm 0: the lines counted are the one session process's (a spare would print them too)
    route_ = published_stdio_route([pypi_server("word_mcp_server")], env=env, cwd=str(tmp_path), prewarm=0)
    with anyio.fail_after(FLOW_TIMEOUT):
        async with running_gateway([route_]) as gateway, modern_client(gateway) as client:
            _, tools = await first_contact(client, "Word Document Server")
            assert {"create_document", "add_paragraph", "get_document_text"} <= tools
            created = await client.call_tool("create_document", {"filename": str(document), "title": "Printed"})
            added = await client.call_tool("add_paragraph", {"filename": str(document), "text": "Despite the banner."})
            read = only_text(await client.call_tool("get_document_text", {"filename": str(document)}))
    assert skipped == [
        "Loading configuration from .env file...",
        "Transport: stdio",
        "Starting Word Document MCP Server with stdio transport...",
        "Server running on stdio transport",
    ]
    assert "created successfully" in only_text(created)
    assert not added.is_error
    assert "Despite the banner." in read
    assert document.read_bytes().startswith(b"PK")


@dataclass
class Roots:
    """A client's roots callback over fixed directories, counting how often the server asked."""

    directories: tuple[Path, ...]
    asked: int = 0

    async def __call__(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.asked += 1
        return types.ListRootsResult(roots=[types.Root(uri=d.as_uri(), name=d.name) for d in self.directories])


EMPTY_ALLOWED = "Allowed directories:\n"
APPLY_ATTEMPTS = 20


async def allowed_directories_once_applied(client: Client) -> str:
    """What ``list_allowed_directories`` says once server-filesystem has applied a roots answer.

    The server applies a ``roots/list`` answer asynchronously after receiving it (``realpath``,
    then ``stat``, of each root: ``roots-utils.js``), so a call that arrives right behind the answer
    can still see the directories from before (with the answer asked in a call's first round, the
    call goes upstream just behind it). No message tells when it is done; each call is a full round
    trip through the server, and a few are always enough. Bounded: the last answer is returned."""
    allowed = EMPTY_ALLOWED
    for _ in range(APPLY_ATTEMPTS):
        allowed = only_text(await client.call_tool("list_allowed_directories", {}))
        if allowed != EMPTY_ALLOWED:
            break
    return allowed


async def test_filesystem_server_takes_its_directories_from_the_roots_it_asks_at_session_start(
    tmp_path: Path,
) -> None:
    """server-filesystem started with no directory: it serves only what the client's roots allow.

    In ``dist/index.js`` the server's ``oninitialized`` hook sends ``roots/list`` as soon as
    ``notifications/initialized`` arrives, when the client declared roots, and replaces its allowed
    directories with the answer; no call is in flight then. The gateway keeps that request on the
    session and asks it in the first round of the next call that leases the session, before the
    call goes upstream. A session given a client's roots serves only that call and is closed after
    it (docs/session-state.md): every call is asked once, on a session of its own.

    The server applies the answer asynchronously (``roots-utils.js``: ``realpath``, then ``stat``),
    and the call goes upstream right behind it, so a call may still find no directory allowed; what
    it finds is never anything but the client's own (the route's ``roots`` are the way to give such
    a server its directories for sure, see the static-roots test below).
    """
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "plan.md").write_text("# Plan\n")
    roots = Roots((workspace,))
    calls = 6
    with anyio.fail_after(FLOW_TIMEOUT):
        async with (
            running_gateway([published_stdio_route([npm_server("filesystem")])]) as gateway,
            modern_client(gateway, list_roots_callback=roots) as client,
        ):
            _, tools = await first_contact(client, "secure-filesystem-server")
            assert "list_allowed_directories" in tools
            listed = [only_text(await client.call_tool("list_allowed_directories", {})) for _ in range(calls // 2)]
            reads = [
                await client.call_tool("read_text_file", {"path": str(workspace / "plan.md")})
                for _ in range(calls // 2)
            ]
    assert set(listed) <= {EMPTY_ALLOWED, f"Allowed directories:\n{workspace.resolve()}"}
    for read in reads:
        if read.is_error:
            assert "outside allowed directories" in str(read.content)
        else:
            assert only_text(read) == "# Plan\n"
    assert roots.asked == calls


async def test_everything_server_over_streamable_http_lists_the_client_roots(peer_log_dir: Path) -> None:
    """server-everything asks ``roots/list`` on its standalone stream 350 ms after
    ``notifications/initialized`` (``server/index.js``: ``syncRoots``), and its ``get-roots-list``
    tool reports what it learnt (asking again from inside the tool if it has nothing yet)."""
    directories = (Path("/srv/project-a"), Path("/srv/project-b"))
    roots = Roots(directories)
    with everything_server("streamableHttp", peer_log_dir) as url, anyio.fail_after(FLOW_TIMEOUT):
        async with (
            running_gateway([route("everything", "/mcp", url, backend=BACKEND)]) as gateway,
            modern_client(gateway, list_roots_callback=roots) as client,
        ):
            _, tools = await first_contact(client, "mcp-servers/everything")
            assert "get-roots-list" in tools
            listed = only_text(await client.call_tool("get-roots-list", {}))
    assert listed.startswith("Current MCP Roots (2 total):")
    for directory in directories:
        assert f"URI: {directory.as_uri()}" in listed
    assert roots.asked >= 1


async def test_filesystem_server_gets_the_route_s_static_roots_at_session_start(tmp_path: Path) -> None:
    """A route that fronts one workspace answers the init-time ``roots/list`` itself (``routes[].roots``):
    server-filesystem serves that directory and the client is never asked."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "todo.txt").write_text("ship it\n")
    client_roots = Roots((tmp_path / "elsewhere",))
    route_ = published_stdio_route([npm_server("filesystem")])
    route_["roots"] = [{"uri": workspace.as_uri(), "name": "workspace"}]
    with anyio.fail_after(FLOW_TIMEOUT):
        async with (
            running_gateway([route_]) as gateway,
            modern_client(gateway, list_roots_callback=client_roots) as client,
        ):
            await first_contact(client, "secure-filesystem-server")
            allowed = await allowed_directories_once_applied(client)
            read = only_text(await client.call_tool("read_text_file", {"path": str(workspace / "todo.txt")}))
    assert allowed == f"Allowed directories:\n{workspace.resolve()}"
    assert read == "ship it\n"
    assert client_roots.asked == 0


SHRIMP_TOOLS = {"plan_task", "split_tasks", "list_tasks", "query_task", "get_task_detail", "research_mode"}
SHRIMP_LIST_BOUND = 20.0
"""Seconds the shrimp server's first ``tools/list`` may take through the gateway: a cold Node start
and one :data:`~gateway.legacy.session.UNCLAIMED_STALL`; before, the list waited for the route's
backend timeout (60 s here)."""


async def test_shrimp_task_manager_that_asks_roots_inside_tools_list_lists_its_tools_through_stdio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mcp-shrimp-task-manager 1.0.21 asks ``roots/list`` inside ``tools/list`` and waits for it.

    Its ``tools/list`` handler loads each tool's description (``prompts/loader.js``), and each load
    calls ``getDataDir`` (``utils/paths.js``), which sends ``roots/list`` and awaits the answer: 15
    in a row before the list is answered. A list cannot carry a question to its client, and the
    requests arrive while no interactive call holds the session (kept "unclaimed"), so the gateway
    answers them itself once the list has waited ``UNCLAIMED_STALL`` (later ones, and those of later
    lists on the session, at once): an empty list, with a ``server_request_unblocked`` line each.
    ``DATA_DIR`` (absolute) keeps its files in ``tmp_path``.
    A tool call is interactive: the server's ``roots/list`` in ``list_tasks`` are asked of the
    call's client, one round each.
    """
    unblocked = logged(monkeypatch, unclaimed.log, "server_request_unblocked", "method")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    roots = Roots((workspace,))
    data = tmp_path / "data"
    route_ = published_stdio_route([npm_program("mcp-shrimp-task-manager")], env={"DATA_DIR": str(data)})
    with anyio.fail_after(FLOW_TIMEOUT):
        async with (
            running_gateway([route_]) as gateway,
            modern_client(gateway, list_roots_callback=roots) as client,
        ):
            started = time.monotonic()
            _, tools = await first_contact(client, "Shrimp Task Manager")
            listed_in = time.monotonic() - started
            listed = only_text(await client.call_tool("list_tasks", {"status": "all"}))
    assert listed_in < SHRIMP_LIST_BOUND
    assert tools >= SHRIMP_TOOLS
    assert set(unblocked) == {"roots/list"}
    assert len(unblocked) >= 15  # the first list's; more when the tool's schema is listed again
    assert roots.asked == 3  # list_tasks reads its data directory three times, each a round of its own
    assert listed  # no task yet: the server says so in its own words
    assert (data / workspace.name / "tasks.json").exists()


async def test_sqlite_server_that_binds_a_fixed_port_serves_concurrent_calls_in_turn_through_stdio(
    tmp_path: Path,
) -> None:
    """@pollinations/mcp-server-sqlite 0.6.6 also serves its tables over HTTP on a fixed port
    (``MCP_HTTP_PORT``, default 31111, every interface): a second copy exits with ``EADDRINUSE``
    before it answers ``initialize``. With ``max_sessions: 1`` (docs/operations.md, "A server only one
    copy of which can run") the gateway runs one process (a spare taken by the first call) and
    concurrent calls take turns on it; none fails to start. Its ``engines`` asks for Node 22; it
    runs on 20."""
    database = tmp_path / "notes.sqlite"
    env = {"MCP_HTTP_PORT": str(free_port())}
    route_ = published_stdio_route(
        [npm_server("sqlite"), str(database)], env=env, max_sessions=1, prewarm=1, session_wait=FLOW_TIMEOUT
    )
    names = ("alpha", "beta", "gamma", "delta")
    inserted: list[str] = []
    with anyio.fail_after(FLOW_TIMEOUT):
        async with running_gateway([route_]) as gateway, modern_client(gateway) as client:
            _, tools = await first_contact(client, "sqlite-manager")
            assert {"execute_query", "list_tables"} <= tools
            created = await client.call_tool("execute_query", {"query": "CREATE TABLE notes (name TEXT)"})

            async def insert(name: str) -> None:
                async with modern_client(gateway) as other:
                    query = f"INSERT INTO notes (name) VALUES ('{name}')"
                    inserted.append(only_text(await other.call_tool("execute_query", {"query": query})))

            async with anyio.create_task_group() as group:
                for name in names:
                    group.start_soon(insert, name)
            rows = await client.call_tool("execute_query", {"query": "SELECT name FROM notes ORDER BY name"})
            pool = gateway.app[keys.ROUTES]["/mcp"].pool
            failures, opened = pool.health.failures, pool.initializations
    done = "Query executed successfully. No results returned or non-SELECT query."
    assert only_text(created) == done  # the server reports a failed query as text, not as an error
    assert inserted == [done] * len(names)
    assert only_text(rows) == "name\n" + "".join(f"{name}\n" for name in sorted(names))  # CSV
    assert failures == 0, "no copy failed to start"
    assert opened == 1
