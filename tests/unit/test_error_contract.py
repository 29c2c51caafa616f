"""One error contract: every gateway error raised is a class of the tree, its status from the one table.

Read with :mod:`ast` from the source of ``gateway`` (as ``test_structure.py`` reads it): each
``raise`` of a :class:`~gateway.errors.GatewayError` names a class drawn in ``gateway/errors.py``,
never the bare base (a condition with no class has no ``data.reason`` and no status of its own),
no module outside ``errors.py`` grows the tree, and each raised class takes its HTTP status from
:func:`~gateway.errors.http_status_for` (its ``data.reason`` in the table, or a code the table knows);
and no module but :mod:`gateway.http_errors` names an aiohttp exception (the one mapping of them).
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp_types.jsonrpc import INTERNAL_ERROR

from gateway import errors
from gateway.errors import HTTP_STATUS_FOR_CODE, GatewayError, UpstreamError, http_status_for

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "gateway"
_REASON_STATUS = errors._REASON_STATUS


def _tree() -> dict[str, type[GatewayError]]:
    found: dict[str, type[GatewayError]] = {"GatewayError": GatewayError}
    todo = [GatewayError]
    while todo:
        for sub in todo.pop().__subclasses__():
            found[sub.__name__] = sub
            todo.append(sub)
    return found


TREE = _tree()


@dataclass(frozen=True)
class Module:
    name: str
    tree: ast.Module


def load_modules(root: Path = PACKAGE_ROOT) -> dict[str, Module]:
    """Every module of the package under ``root``, parsed (nothing is imported or run)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        modules[name] = Module(name, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return modules


@dataclass(frozen=True)
class Raise:
    where: str
    name: str
    keywords: tuple[str, ...]


def _called_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def gateway_raises(modules: dict[str, Module]) -> list[Raise]:
    """Every ``raise Name(...)`` (or ``raise module.Name(...)``) whose name is a class of the tree."""
    found = []
    for module in modules.values():
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Raise) and node.exc is not None:
                name = _called_name(node.exc)
                if name in TREE:
                    keywords = tuple(k.arg or "**" for k in node.exc.keywords) if isinstance(node.exc, ast.Call) else ()
                    found.append(Raise(f"{module.name}:{node.lineno}", name, keywords))
    return found


def classes_outside_the_tree(modules: dict[str, Module]) -> list[str]:
    """Classes deriving from a tree class anywhere but ``gateway.errors``."""
    return sorted(
        f"{module.name}:{node.lineno} {node.name}"
        for module in modules.values()
        if module.name != "gateway.errors"
        for node in ast.walk(module.tree)
        if isinstance(node, ast.ClassDef) and any(_called_name(base) in TREE for base in node.bases)
    )


def _is_client_exception(name: str) -> bool:
    return name.endswith(("Error", "Exception")) or name in {"TooManyRedirects", "InvalidURL"}


def client_exceptions_named(modules: dict[str, Module]) -> list[str]:
    """aiohttp exception classes named outside ``gateway.http_errors``, the one mapping of them."""
    found = []
    for module in modules.values():
        if module.name == "gateway.http_errors":
            continue
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "aiohttp":
                if _is_client_exception(node.attr):
                    found.append(f"{module.name}:{node.lineno} aiohttp.{node.attr}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("aiohttp"):
                found += [f"{module.name}:{node.lineno} {a.name}" for a in node.names if _is_client_exception(a.name)]
    return sorted(found)


@pytest.fixture(scope="module")
def modules() -> dict[str, Module]:
    return load_modules()


@pytest.fixture(scope="module")
def raises(modules: dict[str, Module]) -> list[Raise]:
    return gateway_raises(modules)


def test_the_raises_are_found(raises: list[Raise]) -> None:
    # Guards the checks below against passing vacuously.
    raised = {r.name for r in raises}
    assert {"BackendUnavailable", "HoldLost", "Overloaded", "InvalidParams", "UpstreamError"} <= raised


def test_no_raise_constructs_the_bare_base(raises: list[Raise]) -> None:
    bare = [r.where for r in raises if r.name == "GatewayError"]
    assert not bare, f"a condition without a class in the tree (gateway/errors.py): {bare}"


def test_the_tree_is_drawn_in_one_module(modules: dict[str, Module]) -> None:
    outside = classes_outside_the_tree(modules)
    assert not outside, f"gateway errors defined outside gateway/errors.py: {outside}"


def test_no_raise_carries_a_status_of_its_own(raises: list[Raise]) -> None:
    ad_hoc = [r.where for r in raises if any("status" in k for k in r.keywords)]
    assert not ad_hoc, f"a status passed to a gateway error instead of taken from the table: {ad_hoc}"


@pytest.mark.parametrize("name", sorted(n for n in TREE if n != "GatewayError"))
def test_every_class_takes_its_status_from_the_one_table(name: str) -> None:
    cls = TREE[name]
    assert inspect.getmodule(cls) is errors
    assert "http_status" not in vars(cls), f"{name} decides its own status"
    if name.startswith("_"):  # an inner node of the tree, never raised itself
        return
    if cls.category is not None:
        # One of the gateway's own conditions: -32603, its data.reason in the table.
        assert (cls.code, cls.category in _REASON_STATUS) == (INTERNAL_ERROR, True)
    elif cls is not UpstreamError:  # a relayed backend error's code is mapped by translate.results
        assert cls.code in HTTP_STATUS_FOR_CODE, f"{name}: code {cls.code} is not in the table"


def test_every_raised_class_answers_with_the_status_of_its_code_and_reason(raises: list[Raise]) -> None:
    for name in {r.name for r in raises}:
        assert not name.startswith("_"), f"{name} is an inner node of the tree"
        cls = TREE[name]
        assert GatewayError.http_status is cls.http_status
        expected = http_status_for(cls.code, cls.category)
        assert expected == (_REASON_STATUS[cls.category] if cls.category else HTTP_STATUS_FOR_CODE.get(cls.code, 200))


def test_the_http_clients_failures_are_read_in_one_module(modules: dict[str, Module]) -> None:
    named = client_exceptions_named(modules)
    assert not named, f"map them through gateway.http_errors instead: {named}"


# The checks themselves, on small trees written for them: each one can fail.


def _source(tmp_path: Path, text: str) -> dict[str, Module]:
    root = tmp_path / "gateway"
    root.mkdir()
    (root / "__init__.py").touch()
    (root / "x.py").write_text(text, encoding="utf-8")
    return load_modules(root)


def test_a_bare_raise_a_class_outside_the_tree_and_an_ad_hoc_status_are_found(tmp_path: Path) -> None:
    modules = _source(
        tmp_path,
        "from gateway import errors\n"
        "class Mine(errors.HoldLost):\n    pass\n"
        "def f() -> None:\n"
        "    raise errors.GatewayError('x', reason='mine')\n"
        "def g() -> None:\n"
        "    raise HoldLost('y', http_status=200)\n",
    )
    found = gateway_raises(modules)
    assert [(r.where, r.name) for r in found] == [("gateway.x:5", "GatewayError"), ("gateway.x:7", "HoldLost")]
    assert found[1].keywords == ("http_status",)
    assert classes_outside_the_tree(modules) == ["gateway.x:2 Mine"]


def test_an_aiohttp_exception_named_outside_the_mapping_is_found(tmp_path: Path) -> None:
    modules = _source(
        tmp_path,
        "import aiohttp\nfrom aiohttp import ClientPayloadError, web\n"
        "try:\n    pass\nexcept aiohttp.ClientError:\n    pass\nx = aiohttp.ClientTimeout(total=1)\n",
    )
    assert client_exceptions_named(modules) == ["gateway.x:2 ClientPayloadError", "gateway.x:5 aiohttp.ClientError"]
