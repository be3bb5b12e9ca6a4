"""The README's speed table and throughput plot from a results file of bench/results/:
`python -m bench.report bench/results/h200-calls.json docs/throughput.svg`.

A results file holds device calls ("calls": {"A": {"what": ..., "dragoman_600M": {...}, "ct2_600M": ...}}).
For each size the table takes the last call that ran Dragoman and CTranslate2 together, and the
last that ran transformers; ratios are only taken between engines of one call.
"""

from __future__ import annotations

import json
import re
import sys

SIZES = ["600M", "1.3B", "3.3B"]
ENGINES = {"dragoman": "Dragoman", "ct2": "CTranslate2", "hf": "transformers"}
WORKLOADS = [  # (key prefix, row label, unit, higher is better)
    ("interactive_beam4_ms_median", "interactive, beam 4, 32 tokens", "ms", False),
    ("document_beam4", "document, beam 4, 40 tokens", "sent/s", True),
    ("document_beam1", "document, greedy, 40 tokens", "sent/s", True),
]
GOALS = {("600M", 0): "≤ 15", ("600M", 1): "≥ 2,500", ("600M", 2): "≥ 8,000", ("1.3B", 0): "≤ 25",
         ("1.3B", 1): "≥ 1,250", ("3.3B", 0): "≤ 60", ("3.3B", 1): "≥ 500"}
FLOORS = {("600M", 0): "~7", ("600M", 1): "~5,000", ("600M", 2): "~16,500", ("1.3B", 0): "~13",
          ("1.3B", 1): "~2,500", ("3.3B", 0): "~33", ("3.3B", 1): "~1,000"}


def by_batch(result: dict, workload: str) -> dict[int, float]:
    """{batch size: sentences/s}; Dragoman's unsuffixed figure decodes the whole 512-sentence document."""
    points = {}
    for key, value in result.items():
        match = re.fullmatch(rf"{workload}(?:_bs(\d+))?_sent_per_s", key)
        if match:
            points[int(match.group(1) or 512)] = value
    return points


def best(result: dict | None, workload: str, higher: bool) -> float | None:
    if result is None:
        return None
    if not higher:
        return result.get(workload)
    points = by_batch(result, workload)
    return max(points.values()) if points else None


def latest(calls: dict, *names: str) -> tuple[str, dict] | tuple[None, None]:
    for label, call in reversed(list(calls.items())):
        if all(name in call for name in names):
            return label, call
    return None, None


def table(results: dict) -> str:
    calls = results["calls"]
    lines = [
        "| shape | workload | Dragoman | CTranslate2 | Dragoman vs CT2 | transformers | floor | goal |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for size in SIZES:
        pair_label, pair = latest(calls, f"dragoman_{size}", f"ct2_{size}")
        hf_label, hf = latest(calls, f"hf_{size}")
        for i, (workload, name, unit, higher) in enumerate(WORKLOADS):
            ours = best(pair and pair[f"dragoman_{size}"], workload, higher)
            ct2 = best(pair and pair[f"ct2_{size}"], workload, higher)
            theirs = best(hf and hf[f"hf_{size}"], workload, higher)
            if ours is None:
                continue
            ratio = (ours / ct2 if higher else ct2 / ours) if ct2 else None
            cells = [
                size, f"{name} ({unit})", f"**{ours:,.{0 if higher else 1}f}** ({pair_label})", f"{ct2:,.0f}" if ct2 else "–",
                f"{ratio:.1f}× {'faster' if ratio >= 1 else 'slower'}" if ratio else "–",
                f"{theirs:,.0f} ({hf_label})" if theirs else "–",
                FLOORS.get((size, i), "–"), GOALS.get((size, i), "–"),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def svg(results: dict) -> str:
    """Sentences/s against batch size, a panel per shape and workload, a line per engine."""
    calls = results["calls"]
    colours = {"dragoman": "#2f6fdf", "ct2": "#d9822b", "hf": "#7a7a7a"}
    width, height, pad = 300, 210, 46
    panels = [(size, w) for w in WORKLOADS[1:] for size in SIZES]
    parts = []
    for index, (size, (workload, name, _, _)) in enumerate(panels):
        x0, y0 = (index % 3) * width, (index // 3) * height + 24
        series = {}
        for engine in ENGINES:
            _, call = latest(calls, f"{engine}_{size}", *(["ct2_" + size] if engine == "dragoman" else []))
            points = by_batch(call[f"{engine}_{size}"], workload) if call else {}
            if points:
                series[engine] = sorted(points.items())
        top = max((v for pts in series.values() for _, v in pts), default=1) * 1.1
        batches = [64, 256, 512]

        def x(batch):
            return x0 + pad + (batches.index(batch) if batch in batches else 0) * (width - pad - 20) / 2

        def y(value):
            return y0 + height - pad - value / top * (height - pad - 30)

        parts.append(f'<text x="{x0 + width / 2}" y="{y0 + 16}" text-anchor="middle" font-size="12">{size}: {name}</text>')
        parts.append(f'<line x1="{x0 + pad}" y1="{y(0)}" x2="{x0 + width - 20}" y2="{y(0)}" stroke="#444"/>')
        parts.append(f'<line x1="{x0 + pad}" y1="{y(0)}" x2="{x0 + pad}" y2="{y(top)}" stroke="#444"/>')
        for batch in batches:
            parts.append(f'<text x="{x(batch)}" y="{y(0) + 14}" text-anchor="middle" font-size="10">{batch}</text>')
        for tick in (0, top / 2 / 1.1, top / 1.1):
            parts.append(f'<text x="{x0 + pad - 4}" y="{y(tick) + 3}" text-anchor="end" font-size="10">{tick:,.0f}</text>')
        for engine, points in series.items():
            path = " ".join(f"{x(b):.1f},{y(v):.1f}" for b, v in points if b in batches)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colours[engine]}" stroke-width="2"/>')
            for b, v in points:
                if b in batches:
                    parts.append(f'<circle cx="{x(b):.1f}" cy="{y(v):.1f}" r="3" fill="{colours[engine]}"/>')
    legend = " ".join(
        f'<tspan fill="{colours[e]}">■ {label}</tspan>' for e, label in ENGINES.items()
    )
    total_height = 2 * height + 50
    title = f"Sentences/s against sentences per batch — {results['hardware']}, {results['date']}"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{3 * width}" height="{total_height}" '
        f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>'
        f'<text x="10" y="16" font-size="12">{title}</text>'
        f'<text x="10" y="{total_height - 8}" font-size="12">{legend}</text>' + "".join(parts) + "</svg>\n"
    )


def main() -> None:
    results = json.load(open(sys.argv[1]))
    print(table(results))
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            f.write(svg(results))


if __name__ == "__main__":
    main()
