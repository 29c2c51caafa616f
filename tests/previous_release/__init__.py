"""The requestState codec of the release before version 2, for proving that this one still speaks it.

``encoding.py.txt``, ``claims.py.txt`` and ``codec.py.txt`` are that release's ``gateway/state``
modules, verbatim (:data:`COMMIT`; ``test_state_seal_version.py`` checks them against the history
when it is there). Kept as text so that lint and type checks of today's code leave them alone, and
so that the tests need no git history. :func:`load_codec` builds them into modules of their own,
wired to one another as they were in that release, without touching today's ``gateway.state``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

COMMIT = "b8088df00c98be6d721c4869a347ae1b4601da7a"
"""The last commit that sealed only version 1 (read only version 1)."""

SOURCES = Path(__file__).resolve().parent
MODULES = ("encoding", "claims", "codec")
"""In import order: claims imports encoding, codec imports both (and nothing else of the gateway)."""


def source_of(name: str) -> str:
    return (SOURCES / f"{name}.py.txt").read_text(encoding="utf-8")


def load_codec() -> ModuleType:
    """That release's ``gateway.state.codec``, its ``KeyRing`` unsealing exactly as it did.

    Each module runs under its real name (its imports of ``gateway.state.encoding`` and
    ``gateway.state.claims`` resolve to that release's modules, and dataclasses find their module),
    registered only while it runs; afterwards ``sys.modules`` and the ``gateway.state`` package are
    as they were.
    """
    package = importlib.import_module("gateway.state")
    full = [f"gateway.state.{name}" for name in MODULES]
    saved_modules = {name: sys.modules.get(name) for name in full}
    saved_attrs = {name: package.__dict__.get(name) for name in MODULES}
    built: dict[str, ModuleType] = {}
    try:
        for name, qualified in zip(MODULES, full, strict=True):
            module = ModuleType(qualified)
            module.__file__ = str(SOURCES / f"{name}.py.txt")
            sys.modules[qualified] = module
            exec(compile(source_of(name), module.__file__, "exec"), module.__dict__)
            built[name] = module
    finally:
        for qualified, previous in saved_modules.items():
            if previous is None:
                sys.modules.pop(qualified, None)
            else:
                sys.modules[qualified] = previous
        for name, attr in saved_attrs.items():
            if attr is None:
                package.__dict__.pop(name, None)
            else:
                setattr(package, name, attr)
    return built["codec"]
