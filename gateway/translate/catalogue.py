"""Whether a name the client sent exists in the backend's own listings (pure functions).

Legacy servers do not all say "unknown" the way the 2026-07-28 spec asks: FastMCP answers an
unknown resource or prompt with JSON-RPC code ``0`` (which :func:`gateway.translate.results.modern_error`
turns into -32603) and an unknown tool with an ``isError`` tool result. The spec wants -32602
for all of them (server/tools.mdx, server/prompts.mdx and server/resources.mdx §Error Handling).
The backend's listings decide, not its wording: a tool or prompt name it does not list, a URI
that is neither a listed resource nor matches a listed template, or a prompt called without an
argument its listing marks ``required`` is the client's invalid params. The call core asks for the
listings only after the backend has already failed the call (:mod:`gateway.calls.catalogue`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

_EXPRESSION = re.compile(r"\{([^{}]*)\}")
MAX_ECHO = 200
"""Characters of a client-chosen name echoed back in an error message."""


def _names(entries: Iterable[Any], field: str) -> set[str]:
    return {e[field] for e in entries if isinstance(e, Mapping) and isinstance(e.get(field), str)}


def unknown_tool(tools: Iterable[Any], name: str) -> str | None:
    """The error message when ``name`` is not among ``tools``, else None."""
    return None if name in _names(tools, "name") else f"Unknown tool: {name[:MAX_ECHO]}"


def prompt_problem(prompts: Iterable[Any], name: str, arguments: Any) -> str | None:
    """Why ``prompts/get`` of ``name`` with ``arguments`` is invalid per the listing, or None."""
    prompt = next((p for p in prompts if isinstance(p, Mapping) and p.get("name") == name), None)
    if prompt is None:
        return f"Unknown prompt: {name[:MAX_ECHO]}"
    given = arguments if isinstance(arguments, Mapping) else {}
    declared = prompt.get("arguments")
    required = [
        a["name"]
        for a in (declared if isinstance(declared, list) else [])
        if isinstance(a, Mapping) and a.get("required") is True and isinstance(a.get("name"), str)
    ]
    missing = [a for a in required if a not in given]
    return f"Missing required arguments: {', '.join(missing)[:MAX_ECHO]}" if missing else None


def template_pattern(template: str) -> re.Pattern[str]:
    """A URI template (RFC 6570) as a regex that matches every URI it can expand to.

    ``{var}`` matches one path segment; every other operator (``{+var}``, ``{#var}``, ``{/var}``,
    ``{?var}`` …) may expand to anything, so it matches anything: a wrong "unknown" would blame the
    client for the backend's failure, a wrong "known" only keeps -32603.
    """
    out, last = [], 0
    for match in _EXPRESSION.finditer(template):
        out.append(re.escape(template[last : match.start()]))
        out.append("[^/?#]*" if match.group(1)[:1].isalnum() or match.group(1)[:1] == "_" else ".*")
        last = match.end()
    out.append(re.escape(template[last:]))
    return re.compile("".join(out), re.DOTALL)


def unknown_resource(resources: Iterable[Any], templates: Iterable[Any], uri: str) -> str | None:
    """The error message when ``uri`` is neither listed nor matches a listed template, else None."""
    if uri in _names(resources, "uri"):
        return None
    for template in _names(templates, "uriTemplate"):
        if template_pattern(template).fullmatch(uri):
            return None
    return f"Unknown resource: {uri[:MAX_ECHO]}"
