"""Turn a benchmark report (JSON from ``python -m bench``) into a chart and the README's section.

    python -m bench.report [--json bench/results/latest.json] [--before bench/results/before.json]
        [--profile bench/results/profile.json] --readme

``--readme`` rewrites the part of README.md between the ``bench:begin`` and ``bench:end`` markers
from the report (and, given ``--before``, a before column), so the figures there are always the
last run's. The chart needs matplotlib, a bench-only extra (``pip install -e '.[bench]'``): the
gateway never imports it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"

Getter = Callable[[dict[str, Any]], Any]


def _hold_figure(report: dict[str, Any]) -> Any:
    counts = report["holds"]["holds"]
    return counts[max(counts, key=int)]["kib_per_hold"]


def _hold_label(report: dict[str, Any]) -> str:
    return str(max(report["holds"]["holds"], key=int))


# name, how to read it, target, is it met, unit
TARGETS: list[tuple[str, Getter, str, Callable[[Any], bool], str]] = [
    *[
        (
            f"pass-through overhead ratio, {size} argument (c=1)",
            lambda r, s=size: r["passthrough"][s]["overhead_ratio"],
            "≤ 1.2x",
            lambda v: v is not None and v <= 1.2,
            "x",
        )
        for size in ("5 B", "64 KiB", "1 MiB")
    ],
    (
        "gateway CPU per request / hop's (64 concurrent)",
        lambda r: r["load"].get("cpu_ratio"),
        "≤ 1.2x",
        lambda v: v is not None and v <= 1.2,
        "x",
    ),
    (
        "two-round flow / native mcp 2.3.0, default settings",
        lambda r: r["two_round"]["ratio"],
        "≤ 1.5x",
        lambda v: v <= 1.5,
        "x",
    ),
    ("4 MiB result / direct", lambda r: r["large"]["ratio"], "≤ 1.5x", lambda v: v <= 1.5, "x"),
    (
        "slowest /healthz during the 4 MiB result",
        lambda r: r["large"]["healthz_worst_ms"],
        "≤ 20 ms",
        lambda v: v <= 20,
        " ms",
    ),
    ("RSS per held call", _hold_figure, "≤ 40 KiB", lambda v: v <= 40, " KiB"),
    ("requestState seal + unseal", lambda r: r["codec"]["seal_plus_unseal_us"], "≤ 15 µs", lambda v: v <= 15, " µs"),
    ("300 concurrent interactive flows: refused", lambda r: r["burst"]["refused"], "0", lambda v: v == 0, ""),
    ("stdio route, 64 concurrent cold calls", lambda r: r["stdio_burst"]["seconds"], "≤ 2 s", lambda v: v <= 2, " s"),
]


def _fmt(value: Any, unit: str) -> str:
    return "—" if value is None else f"{value}{unit}"


def targets_table(report: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    head = "| figure | " + ("before | " if before else "") + "now | target | met |"
    rows = [head, "|---|" + ("---|" if before else "") + "---|---|---|"]
    for name, get, target, met, unit in TARGETS:
        value = get(report)
        cells = [f"{name} at {_hold_label(report)} holds" if name == "RSS per held call" else name]
        if before:
            try:
                cells.append(_fmt(get(before), unit))
            except (KeyError, TypeError):
                cells.append("—")
        cells += [_fmt(value, unit), target, "yes" if value is not None and met(value) else "**no**"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def latency_table(report: dict[str, Any]) -> str:
    rows = ["| argument | direct median / p99 | hop median / p99 | gateway median / p99 | overhead ratio |"]
    rows.append("|---|---|---|---|---|")
    for size, stats in report["passthrough"].items():
        cells = [f"{stats[p]['median_ms']:.2f} / {stats[p]['p99_ms']:.2f} ms" for p in ("direct", "hop", "gateway")]
        rows.append(f"| {size} | " + " | ".join(cells) + f" | {stats['overhead_ratio']}x |")
    load = report["load"]
    rows += [
        "",
        f"At {load['concurrency']} concurrent ({load['generator']}, {load['seconds']:g} s per path, `add`): "
        + ", ".join(
            f"{p} {load[p]['rps']:.0f} req/s"
            + (f" ({load[p]['cpu_ms_per_request']:.2f} ms CPU/request)" if "cpu_ms_per_request" in load[p] else "")
            for p in ("direct", "hop", "gateway")
        )
        + ".",
    ]
    if "load_c1" in report:
        rows[-1] += " " + cpu_line(report)
    return "\n".join(rows)


def cpu_line(report: dict[str, Any]) -> str:
    """CPU per pass-through call of the hop and the gateway at c=1 and c=64 (``load_c1``, ``load``)."""
    parts = []
    for key in ("load_c1", "load"):
        load = report[key]
        hop, gateway = (load[p].get("cpu_ms_per_request") for p in ("hop", "gateway"))
        parts.append(
            f"c={load['concurrency']}: hop {hop:.2f} ms, gateway {gateway:.2f} ms ({load.get('cpu_ratio')}x;"
            f" {load['hop']['rps']:.0f} / {load['gateway']['rps']:.0f} req/s)"
        )
    return "CPU per pass-through call (process user+system time / calls, `add`): " + "; ".join(parts) + "."


FLOW_PATHS = (
    ("native", "native mcp 2.3.0"),
    ("legacy_direct", "legacy inline, direct"),
    ("legacy_hop", "legacy inline, bare hop"),
    ("gateway", "gateway"),
)


def flows_table(rounds: dict[str, Any]) -> str:
    """The interactive flows (``ask_city``: one round, ``book_table``: two) on every path, the
    floor ratios, and CPU per flow (reports with ``book_table``)."""
    flows = {"ask_city": rounds, "book_table": rounds["book_table"]}
    rows = [
        "| flow | "
        + " | ".join(f"{label} median / p99" for _, label in FLOW_PATHS)
        + " | (gateway - direct) / (hop - direct) | gateway / hop | gateway / native |",
        "|---" * (len(FLOW_PATHS) + 4) + "|",
    ]
    for name, figures in flows.items():
        cells = [f"{figures[p]['median_ms']:.2f} / {figures[p]['p99_ms']:.2f} ms" for p, _ in FLOW_PATHS]
        rows.append(
            f"| `{name}` | "
            + " | ".join(cells)
            + f" | {figures.get('hop_overhead_ratio')}x | {figures.get('hop_flow_ratio')}x | {figures['ratio']}x |"
        )
    cpu = rounds.get("cpu_ms_per_flow")
    if cpu:
        rows += [
            "",
            f"CPU per flow ({cpu['flows']} sequential flows of each kind per proxy): "
            + "; ".join(
                f"`{name}` hop {cpu[name]['legacy_hop']:.2f} ms, gateway {cpu[name]['gateway']:.2f} ms"
                f" ({cpu[name].get('ratio')}x)"
                for name in flows
            )
            + ".",
        ]
    return "\n".join(rows)


def profile_table(profile: dict[str, Any], rows: int = 12) -> str:
    """The CPU of one pass-through call by component, gateway and hop side by side (bench.profile)."""
    hop, gateway = profile["hop"], profile["gateway"]

    def us(side: dict[str, Any], name: str) -> float:
        return float(side.get("self_by_component", {}).get(name, {}).get("us_per_request", 0.0))

    lines = [
        f"Where a pass-through call's CPU goes (`python -m bench.profile --concurrency {profile['concurrency']}`, "
        f"{profile['argument_bytes']} B argument, py-spy samples of each process under the same wrk load; load "
        f"average at start {', '.join(str(x) for x in profile['loadavg_at_start'])}): the hop "
        f"{hop['cpu_us_per_request']:.0f} µs of CPU per call, the gateway {gateway['cpu_us_per_request']:.0f} µs "
        f"({profile['cpu_ratio']}x). Self time by component, in µs per call, largest difference first:",
        "",
        "| component | hop | gateway | gateway - hop |",
        "|---|---|---|---|",
    ]
    for name, extra in list(profile["gateway_minus_hop_us"].items())[:rows]:
        lines.append(f"| {name} | {us(hop, name):.0f} | {us(gateway, name):.0f} | {extra:+.0f} |")
    less = [(name, extra) for name, extra in profile["gateway_minus_hop_us"].items() if extra < 0]
    if less:
        lines += [
            "",
            "The hop spends more than the gateway on "
            + ", ".join(f"{name} ({extra:+.0f} µs)" for name, extra in less)
            + ". With the sampler running beside them on the same cores, both processes' CPU per call"
            " reads higher here, and the ratio lower, than in the load section, whose figure is the one"
            " in the table of targets.",
        ]
    return "\n".join(lines)


def tasks_line(tasks: dict[str, Any]) -> str:
    """The tasks section (:mod:`bench.tasks`) in one paragraph."""

    def get(figures: dict[str, Any], path: str) -> str:
        got = figures.get(path)
        return f"{got['median_ms']:.2f} ms (p99 {got['p99_ms']:.2f})" if got else "not available"

    latency = tasks["get_latency"]
    return (
        f"Tasks ({tasks['tasks']} retained, then {tasks['tasks']} running, on one replica): "
        f"{tasks['retained']['kib_per_task']} KiB per retained result ({tasks['result_text_bytes']} B of text), "
        f"{tasks['running']['kib_per_task']} KiB per running task (its backend session and connection included). "
        f"`tasks/get` with {latency['tasks_kept_by_owner']} tasks kept, c=1: a working task on the owner "
        f"{get(latency['working'], 'owner')}, through a second replica that forwards it "
        f"{get(latency['working'], 'forward')}; a completed one {get(latency['completed'], 'owner')} and "
        f"{get(latency['completed'], 'forward')}."
    )


def section(report: dict[str, Any], before: dict[str, Any] | None, profile: dict[str, Any] | None = None) -> str:
    machine = report["machine"]
    rounds = report["two_round"]
    holds = report["holds"]
    lines = [
        BEGIN,
        "```sh",
        "bash bench/run.sh            # the whole run (about 8-11 minutes); --quick: about 3-4",
        "```",
        "",
        f"Last run: {report['profile']} profile, {report['seconds']:.0f} s, Python {machine['python']} on "
        f"{machine['cpus']} CPUs ({machine['platform']}): {machine['note']}. Load average at start: "
        f"{', '.join(str(x) for x in machine['loadavg_at_start'])}. Report: `bench/results/latest.json`, "
        "chart: `bench/results/latest.png`.",
        "",
        targets_table(report, before),
        "",
        *(
            [
                f"Before: {before.get('label') or before.get('gateway_src')}, the same bench in its own run "
                f"(load average at start {', '.join(str(x) for x in before['machine']['loadavg_at_start'])}; "
                "c=1 ratios of two runs under different load are not comparable).",
                "",
            ]
            if before
            else []
        ),
        "Pass-through `tools/call` at c=1 (interleaved; overhead ratio = (gateway - direct) / (hop - direct)):",
        "",
        latency_table(report),
        "",
        *(
            [
                "Interactive flows (interleaved; `ask_city` one question, 2 requests to the gateway; `book_table`"
                " two dependent questions, 3 requests; the native server's `ask_two` is the same shape; legacy"
                " inline = a handshake-era client answering on the call's SSE stream):",
                "",
                flows_table(rounds),
                "",
            ]
            if "book_table" in rounds
            else []
        ),
        f"Two-round flow (`ask_city`): gateway {rounds['gateway']['median_ms']:.2f} ms (p99 "
        f"{rounds['gateway']['p99_ms']:.2f}), native mcp 2.3.0 {rounds['native']['median_ms']:.2f} ms (p99 "
        f"{rounds['native']['p99_ms']:.2f})"
        + (
            f"; the same flow spoken directly to the legacy backend (FastMCP 1.30, no gateway) "
            f"{rounds['legacy_direct']['median_ms']:.2f} ms (p99 {rounds['legacy_direct']['p99_ms']:.2f}), "
            f"{rounds['legacy_direct_ratio']}x native"
            if "legacy_direct" in rounds
            else ""
        )
        + (
            f"; the same through the bare hop {rounds['legacy_hop']['median_ms']:.2f} ms (p99 "
            f"{rounds['legacy_hop']['p99_ms']:.2f}), {rounds['legacy_hop_ratio']}x native: the floor any "
            f"Python proxy in front of this backend sets. The gateway's overhead over the legacy flow is "
            f"{rounds['hop_overhead_ratio']}x the hop's"
            if "legacy_hop" in rounds
            else ""
        )
        + ". Held calls: "
        + ", ".join(f"{c} holds {v['kib_per_hold']} KiB each" for c, v in holds["holds"].items())
        + f" (baseline RSS {holds['baseline_rss_kib'] / 1024:.0f} MiB; light backend without a GET stream)"
        + "".join(
            f"; with a standalone GET stream per session, as FastMCP keeps: {c} holds {v['kib_per_hold']} KiB each"
            for c, v in report.get("holds_get_stream", {}).get("holds", {}).items()
        )
        + ".",
        *(["", tasks_line(report["tasks"])] if "tasks" in report else []),
        *(["", profile_table(profile)] if profile else []),
        END,
    ]
    return "\n".join(lines)


def write_readme(
    report: dict[str, Any], before: dict[str, Any] | None, readme: Path, profile: dict[str, Any] | None = None
) -> None:
    text = readme.read_text()
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    readme.write_text(text[:start] + section(report, before, profile) + text[stop:])


def chart(report: dict[str, Any], path: Path) -> None:
    """Latency per path and size, and the two-round flow, as one PNG (skipped without matplotlib)."""
    try:
        import matplotlib  # type: ignore[import-not-found,unused-ignore]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        print("chart skipped: matplotlib is not installed (pip install -e '.[bench]')")
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 1]})
    sizes = list(report["passthrough"])
    paths = ("direct", "hop", "gateway")
    width = 0.27
    for i, p in enumerate(paths):
        xs = [j + (i - 1) * width for j in range(len(sizes))]
        medians = [report["passthrough"][s][p]["median_ms"] for s in sizes]
        p99 = [report["passthrough"][s][p]["p99_ms"] - m for s, m in zip(sizes, medians, strict=True)]
        left.bar(xs, medians, width, yerr=[[0] * len(sizes), p99], label=p, capsize=3)
    left.set_xticks(range(len(sizes)), [f"{s} argument" for s in sizes])
    left.set_yscale("log")
    left.set_ylabel("ms (median, whisker: p99)")
    left.set_title("pass-through tools/call, c=1")
    left.legend()
    rounds = report["two_round"]
    right.bar(
        ["gateway", "native"], [rounds["gateway"]["median_ms"], rounds["native"]["median_ms"]], color=["C2", "C3"]
    )
    right.set_title("two-round flow (median ms)")
    fig.suptitle(f"mrtr-gateway bench ({report['profile']}, {report['machine']['cpus']} CPUs, shared and noisy)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(f"chart: {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=ROOT / "bench/results/latest.json")
    parser.add_argument("--before", type=Path, default=None)
    parser.add_argument("--readme", action="store_true")
    parser.add_argument("--chart", type=Path, default=None)
    parser.add_argument("--profile", type=Path, default=None, help="a report of python -m bench.profile")
    args = parser.parse_args()
    report = json.loads(args.json.read_text())
    before = json.loads(args.before.read_text()) if args.before else None
    profile = json.loads(args.profile.read_text()) if args.profile else None
    print(targets_table(report, before))
    if args.chart:
        chart(report, args.chart)
    if args.readme:
        write_readme(report, before, ROOT / "README.md", profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
