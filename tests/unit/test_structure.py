"""The package's shape, checked from its source: no import cycles, small modules and functions, floors.

Read with :mod:`ast` (nothing is imported or run), over every module of ``gateway`` except the demo.
An import inside a function counts as much as one at the top of a module: a cycle hidden in a function
still ties the two modules together. So does one through a package's ``__init__``: importing
``gateway.x.y`` runs ``gateway.x`` first, so ``from gateway.x import y`` and ``import gateway.x.y``
both import the package ``gateway.x`` as well as ``gateway.x.y``, and a package face that re-exports
a module importing back into its package is a cycle (it works only by import order). So a face
re-exports nothing that imports its own package (the gateway's faces import nothing: callers import
from the submodule).

The floors, top to bottom (each module of the package is on one, found by prefix; a room listed on
two keeps both rules):

* :data:`TOP_FLOOR` — composes the app; only the top floor imports it;
* :data:`FRONT_DOOR` — HTTP in: everything below it may be imported, nothing below imports it;
* :data:`BELOW_FRONTDOOR` — the rooms the front door (and the top floor) use; never the front door;
* :data:`BOTTOM_FLOOR` — imported by every room; imports nothing of the gateway but the bottom floor.

:data:`WITHOUT_AIOHTTP` is no floor but a trait some rooms keep on their floor (no HTTP framework).
``docs/architecture.md`` says why each rule exists.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "gateway"
EXCLUDED = ("gateway.demo",)
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60

# The top floor composes the app: it builds every room, and its AppKeys (gateway.keys) name the types
# of nearly all of them. Only the top floor imports it; a room that needs a service is handed it.
TOP_FLOOR = (
    "gateway.app",
    "gateway.app_contexts",
    "gateway.keys",
    "gateway.server",
    "gateway.cli",
    "gateway.ops",
    "gateway.__main__",
)
# The front door: HTTP in, every room below it at hand. Only the top floor imports it (nothing below
# reaches up into it: the rules of BELOW_FRONTDOOR and BOTTOM_FLOOR).
FRONT_DOOR = ("gateway.frontdoor",)
# The rooms the front door and the top floor use; they never reach up into the front door (it depends
# on them, not the other way round).
BELOW_FRONTDOOR = (
    "gateway.auth",
    "gateway.drain",
    "gateway.relay",
    "gateway.connections",
    "gateway.key_reload",
    "gateway.listen",
    "gateway.calls",
    "gateway.mcptasks",
    "gateway.legacy",
    "gateway.holds",
    "gateway.state",
    "gateway.translate",
    "gateway.config",
    "gateway.replicas",
    "gateway.backend_auth",
)
# The bottom floor: every room may import it, and it imports nothing of the gateway above it.
BOTTOM_FLOOR = (
    "gateway.errors",
    "gateway.http_errors",
    "gateway.event_stream",
    "gateway.owned",
    "gateway.bounded",
    "gateway.envelopes",
    "gateway.fastjson",
    "gateway.keyset",
    "gateway.turns",
    "gateway.translate",
    "gateway.config",
    "gateway.observability",
)
FLOORS = (TOP_FLOOR, FRONT_DOOR, BELOW_FRONTDOOR, BOTTOM_FLOOR)
# Pure rooms, on their floors: no HTTP framework, so they can be tested and reused without a server.
WITHOUT_AIOHTTP = (
    "gateway.state",
    "gateway.translate",
    "gateway.config",
    "gateway.frontdoor.classify",
    "gateway.frontdoor.outcomes",
)


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    tree: ast.Module
    lines: int


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def load_modules(root: Path = PACKAGE_ROOT) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in sorted(root.rglob("*.py")):
        name = _module_name(path, root)
        if _within(name, EXCLUDED):
            continue
        text = path.read_text(encoding="utf-8")
        modules[name] = Module(name, path, ast.parse(text, filename=str(path)), len(text.splitlines()))
    return modules


def _imports(module: Module) -> Iterator[tuple[str, list[str], int]]:
    """Every import statement anywhere in ``module``: (module imported from, names taken, line).

    ``import a.b`` gives ``("a.b", [], line)``; ``from a.b import c, d`` gives ``("a.b", ["c", "d"],
    line)``; relative imports are resolved against ``module``."""
    is_package = module.path.name == "__init__.py"
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                parts = module.name.split(".")
                drop = node.level - 1 if is_package else node.level
                base = ".".join(parts[: len(parts) - drop])
                target = f"{base}.{node.module}" if node.module else base
            yield target, [alias.name for alias in node.names], node.lineno


def _imported(target: str, names: list[str], modules: dict[str, Module]) -> list[str]:
    """The modules one import statement reaches: ``from pkg import sub`` where ``sub`` is a module
    reaches ``pkg.sub`` only; the package itself counts when a name taken from it is not a
    submodule (so it runs its ``__init__``)."""
    submodules = [f"{target}.{name}" for name in names if f"{target}.{name}" in modules]
    if len(submodules) < len(names) or not names:
        submodules.append(target)
    return submodules


def _run(target: str, names: list[str], modules: dict[str, Module]) -> list[str]:
    """The modules one import statement runs: those it names (:func:`_imported`) and every package
    above each, whose ``__init__`` runs first: ``import a.b.c`` runs ``a``, ``a.b`` and ``a.b.c``;
    ``from a.b import c`` runs ``a`` and ``a.b``, and ``a.b.c`` too when ``c`` is a submodule."""
    run: dict[str, None] = {}
    for named in _imported(target, names, modules):
        parts = named.split(".")
        run.update(dict.fromkeys(".".join(parts[:depth]) for depth in range(1, len(parts) + 1)))
    return list(run)


def import_graph(modules: dict[str, Module]) -> dict[str, dict[str, int]]:
    """module -> {module of the package it runs: line of the first import} (:func:`_run`): a package's
    ``__init__`` counts as imported by every import of one of its modules."""
    graph: dict[str, dict[str, int]] = {}
    for module in modules.values():
        edges: dict[str, int] = {}
        for target, names, line in _imports(module):
            for imported in _run(target, names, modules):
                if imported in modules and imported != module.name:
                    edges.setdefault(imported, line)
        graph[module.name] = edges
    return graph


def find_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, {}):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def long_functions(module: Module, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    found = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - first + 1
            if length > limit:
                found.append(f"{module.name}:{node.name} ({length} lines, line {node.lineno})")
    return found


def floorless(modules: dict[str, Module]) -> list[str]:
    """The modules on no floor (:data:`FLOORS`), but the package's own root, which holds them all."""
    return sorted(name for name in modules if "." in name and not any(_within(name, floor) for floor in FLOORS))


def layer_violations(modules: dict[str, Module]) -> list[str]:
    """Imports that break a layer rule; ``from gateway import keys`` counts as importing ``gateway.keys``."""
    found = []
    for module in modules.values():
        for statement, names, line in _imports(module):
            for target in _imported(statement, names, modules):
                found.extend(_broken_rules(module.name, target, line))
    return sorted(set(found))


def _broken_rules(name: str, target: str, line: int) -> list[str]:
    """The layer rules that ``name`` importing ``target`` (at ``line``) breaks, as one finding each."""
    broken = [
        _within(name, BELOW_FRONTDOOR) and _within(target, ("gateway.frontdoor",)),
        not _within(name, TOP_FLOOR) and _within(target, TOP_FLOOR),
        _within(name, BOTTOM_FLOOR) and target.startswith("gateway.") and not _within(target, BOTTOM_FLOOR),
        _within(name, WITHOUT_AIOHTTP) and _within(target, ("aiohttp",)),
        # The core is handed its task maker (calls.core.TaskMaker); it never reaches for the tasks room.
        _within(name, ("gateway.calls",)) and _within(target, ("gateway.mcptasks",)),
    ]
    return [f"{name}:{line} imports {target}"] if any(broken) else []


# Task ownership and catch-alls, read from every file of the package (the demo included): a task is
# started only by gateway.owned.TaskGroup, whose owner ends it; a cancellation is never taken back;
# a catch-all that also catches cancellation says why it must.
TASK_STARTERS = frozenset({"create_task", "ensure_future"})
TASK_GROUP_MODULE = Path("owned.py")
CORE = Path("calls")
MAX_CORE_CATCH_ALLS = 1


def _sources(root: Path = PACKAGE_ROOT) -> Iterator[tuple[Path, str, ast.Module]]:
    """(path relative to the package root, text, tree) of every file of the package, the demo included."""
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        yield path.relative_to(root), text, ast.parse(text, filename=str(path))


def _named(node: ast.AST) -> str | None:
    """The name an attribute, a name or an imported name refers to (a call, a reference or an import alike)."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return node.name.rpartition(".")[2] if isinstance(node, ast.alias) else None


def references_to(names: frozenset[str], root: Path = PACKAGE_ROOT) -> list[str]:
    """``path:line name`` of every line that calls, passes on or imports something named one of ``names``."""
    found = {
        (str(path), node.lineno, named)
        for path, _, tree in _sources(root)
        for node in ast.walk(tree)
        if (named := _named(node)) in names and hasattr(node, "lineno")
    }
    return [f"{path}:{line} {name}" for path, line, name in sorted(found)]


def catch_alls(root: Path = PACKAGE_ROOT) -> list[tuple[Path, int, bool]]:
    """(path, line, explained) of every ``except BaseException``; explained: a comment on its line or the next."""
    found = []
    for path, text, tree in _sources(root):
        lines = text.splitlines()
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and ast.unparse(node.type or ast.Pass()) == "BaseException":
                same, after = lines[node.lineno - 1], lines[node.lineno] if node.lineno < len(lines) else ""
                found.append((path, node.lineno, "#" in same or after.lstrip().startswith("#")))
    return found


@pytest.fixture(scope="module")
def modules() -> dict[str, Module]:
    return load_modules()


def test_the_package_is_read(modules: dict[str, Module]) -> None:
    # Guards the checks below against passing vacuously (a wrong root would find no module at all).
    assert "gateway.app" in modules
    assert "gateway.calls" in modules
    assert not any(_within(name, EXCLUDED) for name in modules)


def test_no_import_cycles(modules: dict[str, Module]) -> None:
    graph = import_graph(modules)
    cycles = find_cycles(graph)
    described = [
        ", ".join(f"{a} -> {b} (line {graph[a][b]})" for a in cycle for b in cycle if b in graph[a]) for cycle in cycles
    ]
    assert not described, "import cycles:\n" + "\n".join(described)


def test_no_module_over_the_line_limit(modules: dict[str, Module]) -> None:
    too_long = sorted(f"{m.name} ({m.lines} lines)" for m in modules.values() if m.lines > MAX_MODULE_LINES)
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines: {too_long}"


def test_no_function_over_the_line_limit(modules: dict[str, Module]) -> None:
    too_long = sorted(found for m in modules.values() for found in long_functions(m))
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines: {too_long}"


def test_layers(modules: dict[str, Module]) -> None:
    violations = layer_violations(modules)
    assert not violations, "layer rules broken:\n" + "\n".join(violations)


def test_every_module_is_on_a_floor(modules: dict[str, Module]) -> None:
    # A module on no floor keeps no layer rule: put it on the floor whose rule holds for it.
    missing = floorless(modules)
    lists = "TOP_FLOOR, FRONT_DOOR, BELOW_FRONTDOOR or BOTTOM_FLOOR"
    assert not missing, f"modules on no floor (add each to {lists}):\n" + "\n".join(missing)


# The checks themselves, on small trees written for them: each one can fail.


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Module]:
    root = tmp_path / "gateway"
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for directory in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    return load_modules(root)


def test_a_cycle_through_a_function_level_import_is_found(tmp_path: Path) -> None:
    modules = _tree(
        tmp_path,
        {
            "calls/a.py": "from gateway.frontdoor import b\n",
            "frontdoor/b.py": "def late() -> None:\n    from gateway.calls.a import thing\n",
        },
    )
    assert find_cycles(import_graph(modules)) == [["gateway.calls.a", "gateway.frontdoor.b"]]
    assert layer_violations(modules) == ["gateway.calls.a:1 imports gateway.frontdoor.b"]


def test_a_cycle_through_a_package_face_is_found(tmp_path: Path) -> None:
    # The face re-exports core; core and replayer import siblings through the package, which runs the
    # face: a cycle, however the import is spelled. A face re-exporting a module that imports nothing
    # of its package (listen) is none.
    modules = _tree(
        tmp_path,
        {
            "calls/__init__.py": "from gateway.calls.core import CallCore\n",
            "calls/core.py": "from gateway.calls import replayer\n",
            "calls/replayer.py": "from gateway.calls import transcript\n",
            "calls/transcript.py": "",
            "mcptasks/__init__.py": "from gateway.mcptasks.service import TaskService\n",
            "mcptasks/service.py": "def late() -> None:\n    import gateway.mcptasks.wire\n",
            "mcptasks/wire.py": "",
            "listen/__init__.py": "from gateway.listen.translate import Listener\n",
            "listen/translate.py": "import json\n",
        },
    )
    graph = import_graph(modules)
    assert sorted(find_cycles(graph)) == [
        ["gateway.calls", "gateway.calls.core", "gateway.calls.replayer"],
        ["gateway.mcptasks", "gateway.mcptasks.service"],
    ]
    assert graph["gateway.mcptasks.service"] == {"gateway": 2, "gateway.mcptasks": 2, "gateway.mcptasks.wire": 2}


def test_a_module_on_no_floor_is_found(tmp_path: Path) -> None:
    modules = _tree(
        tmp_path,
        {
            "app.py": "",
            "frontdoor/door.py": "",
            "calls/core.py": "",
            "errors.py": "",
            "observability/tracing.py": "",
            "stray.py": "",
            "newroom/part.py": "",
        },
    )
    assert floorless(modules) == ["gateway.newroom", "gateway.newroom.part", "gateway.stray"]


def test_imports_back_up_the_floors_are_found_however_they_are_spelled(tmp_path: Path) -> None:
    modules = _tree(
        tmp_path,
        {
            "keys.py": "",
            "errors.py": "",
            "frontdoor/stream.py": "",
            "observability/loop_lag.py": "from gateway import keys\nfrom gateway import errors\n",
            "listen/serve.py": "from gateway.frontdoor.stream import open_sse\n",
            "owned.py": "def late() -> None:\n    from gateway.listen import serve\n",
            "app.py": "from gateway import keys\n",
        },
    )
    assert layer_violations(modules) == [
        "gateway.listen.serve:1 imports gateway.frontdoor.stream",
        "gateway.observability.loop_lag:1 imports gateway.keys",
        "gateway.owned:2 imports gateway.listen.serve",
    ]


def test_the_core_reaching_for_the_tasks_room_is_found(tmp_path: Path) -> None:
    modules = _tree(
        tmp_path,
        {
            "mcptasks/service.py": "from gateway.calls import core\n",
            "calls/core.py": "def late() -> None:\n    from gateway.mcptasks import service\n",
        },
    )
    assert layer_violations(modules) == ["gateway.calls.core:2 imports gateway.mcptasks.service"]


def test_relative_imports_and_aiohttp_in_a_pure_layer_are_found(tmp_path: Path) -> None:
    modules = _tree(
        tmp_path,
        {"state/x.py": "from . import y\nimport aiohttp.web\n", "state/y.py": "from .x import z\n"},
    )
    assert find_cycles(import_graph(modules)) == [["gateway.state.x", "gateway.state.y"]]
    assert layer_violations(modules) == ["gateway.state.x:2 imports aiohttp.web"]


def test_long_functions_and_modules_are_found(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(100))
    modules = _tree(tmp_path, {"big.py": "def f() -> None:\n" + body + "\n" * 400})
    assert long_functions(modules["gateway.big"]) == ["gateway.big:f (101 lines, line 1)"]
    assert modules["gateway.big"].lines > MAX_MODULE_LINES


def test_tasks_are_started_only_by_the_task_group() -> None:
    started = [site for site in references_to(TASK_STARTERS) if not site.startswith(f"{TASK_GROUP_MODULE}:")]
    assert not started, "tasks started outside gateway/owned.py (spawn them into a TaskGroup):\n" + "\n".join(started)


def test_no_cancellation_is_taken_back() -> None:
    taken_back = references_to(frozenset({"uncancel"}))
    assert not taken_back, "uncancel() in the package:\n" + "\n".join(taken_back)


def test_the_core_catches_everything_at_most_once() -> None:
    core = [f"{path}:{line}" for path, line, _ in catch_alls() if path.parts[0] == CORE.name]
    assert len(core) <= MAX_CORE_CATCH_ALLS, f"except BaseException in gateway/{CORE}/ ({len(core)}):\n" + "\n".join(
        core
    )


def test_every_other_catch_all_says_why() -> None:
    silent = [
        f"{path}:{line}" for path, line, explained in catch_alls() if path.parts[0] != CORE.name and not explained
    ]
    assert not silent, "except BaseException without a comment on its line or the next:\n" + "\n".join(silent)


def test_task_starts_uncancels_and_catch_alls_are_found(tmp_path: Path) -> None:
    root = tmp_path / "gateway"
    files = {
        "owned.py": "import asyncio\nasyncio.get_running_loop().create_task(f())\n",
        "a.py": (
            "import asyncio\nfrom asyncio import ensure_future\nensure_future(f())\nt = asyncio.create_task(f())\n"
            "loop.call_soon(asyncio.ensure_future, f())\n"
        ),
        "b.py": "t.uncancel()\n# create_task( in a comment is no call\n",
        "calls/c.py": (
            "try:\n    pass\nexcept BaseException:\n    raise\n"
            "try:\n    pass\nexcept BaseException:  # why\n    raise\n"
        ),
        "d.py": (
            "try:\n    pass\nexcept BaseException:\n    # why, on the next line\n    raise\n"
            "try:\n    pass\nexcept BaseException as exc:\n    raise\n"
            "try:\n    pass\nexcept (BaseException, ValueError):\n    raise\n"
        ),
    }
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="utf-8")
    assert references_to(TASK_STARTERS, root) == [
        "a.py:2 ensure_future",
        "a.py:3 ensure_future",
        "a.py:4 create_task",
        "a.py:5 ensure_future",
        "owned.py:2 create_task",
    ]
    assert references_to(frozenset({"uncancel"}), root) == ["b.py:1 uncancel"]
    assert catch_alls(root) == [
        (Path("calls/c.py"), 3, False),
        (Path("calls/c.py"), 7, True),
        (Path("d.py"), 3, True),
        (Path("d.py"), 8, False),
    ]
