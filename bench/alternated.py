"""The figures of alternated before/after runs, side by side: ``python -m bench.alternated PATTERN``.

``PATTERN`` names the reports with ``{side}`` and ``{n}`` in it, e.g.
``bench/results/issue28-alt-{side}-{n}.json``; the sides are ``before`` and ``after`` (``--sides``).
The runs are made alternately (before 1, after 1, before 2, ...) with ``python -m bench --only
passthrough,two_round,load --gateway-src DIR``, so the machine's drift falls on both sides alike.
For each figure it prints every run's value and the median per side; ratios are the report's own
(``overhead_ratio`` = (gateway - direct) / (hop - direct), ``hop_flow_ratio`` = gateway / hop flow,
``cpu_ratio`` = gateway / hop CPU per call).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

FIGURES: dict[str, Callable[[dict[str, Any]], float]] = {
    "pass-through 5 B: overhead / hop's": lambda r: r["passthrough"]["5 B"]["overhead_ratio"],
    "pass-through 64 KiB: overhead / hop's": lambda r: r["passthrough"]["64 KiB"]["overhead_ratio"],
    "pass-through 5 B: gateway median ms": lambda r: r["passthrough"]["5 B"]["gateway"]["median_ms"],
    "pass-through 5 B: gateway p99 ms": lambda r: r["passthrough"]["5 B"]["gateway"]["p99_ms"],
    "ask_city: gateway / hop flow": lambda r: r["two_round"]["hop_flow_ratio"],
    "ask_city: gateway median ms": lambda r: r["two_round"]["gateway"]["median_ms"],
    "book_table: gateway / hop flow": lambda r: r["two_round"]["book_table"]["hop_flow_ratio"],
    "book_table: (gateway - direct) / (hop - direct)": lambda r: r["two_round"]["book_table"]["hop_overhead_ratio"],
    "book_table: gateway median ms": lambda r: r["two_round"]["book_table"]["gateway"]["median_ms"],
    "book_table: gateway p99 ms": lambda r: r["two_round"]["book_table"]["gateway"]["p99_ms"],
    "book_table: hop flow median ms": lambda r: r["two_round"]["book_table"]["legacy_hop"]["median_ms"],
    "book_table: CPU ms per flow, gateway": lambda r: r["two_round"]["cpu_ms_per_flow"]["book_table"]["gateway"],
    "CPU per pass-through call, gateway / hop, c=1": lambda r: r["load_c1"]["cpu_ratio"],
    "CPU per pass-through call, gateway / hop, c=64": lambda r: r["load"]["cpu_ratio"],
}


def table(pattern: str, sides: list[str]) -> list[str]:
    runs: dict[str, list[dict[str, Any]]] = {}
    for side in sides:
        found = []
        n = 1
        while (path := Path(pattern.format(side=side, n=n))).exists():
            found.append(json.loads(path.read_text()))
            n += 1
        runs[side] = found
    lines = [f"| figure | {' | '.join(f'{side} (runs; median)' for side in sides)} |", "|---|" + "---|" * len(sides)]
    for name, pick in FIGURES.items():
        cells = []
        for side in sides:
            values = []
            for report in runs[side]:
                try:
                    values.append(float(pick(report)))
                except (KeyError, TypeError):
                    continue
            shown = ", ".join(f"{v:g}" for v in values)
            cells.append(f"{shown}; **{statistics.median(values):g}**" if values else "-")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pattern")
    parser.add_argument("--sides", nargs="+", default=["before", "after"])
    args = parser.parse_args()
    print("\n".join(table(args.pattern, args.sides)))


if __name__ == "__main__":
    main()
