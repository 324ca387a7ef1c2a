r"""Small inline SVG plots for the researcher's page (no plotting library,
no script): answers over time, and the utility along each variable through
the population's favourite with a ±2 sd band."""

from __future__ import annotations

from html import escape
from typing import Any

WIDTH, HEIGHT, PAD = 360, 180, 32


def _scale(values: list[float], lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or 1.0
    return [a + (v - lo) / span * (b - a) for v in values]


def _frame(title: str, body: str, xlabel: str, ylabel: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{HEIGHT}" role="img" aria-label="{escape(title)}">'
        f'<rect x="{PAD}" y="8" width="{WIDTH - PAD - 8}" '
        f'height="{HEIGHT - PAD - 8}" fill="none" stroke="#999"/>'
        f"{body}"
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 6}" text-anchor="middle" '
        f'font-size="11">{escape(xlabel)}</text>'
        f'<text x="10" y="{HEIGHT / 2}" font-size="11" '
        f'transform="rotate(-90 10 {HEIGHT / 2})" text-anchor="middle">'
        f"{escape(ylabel)}</text></svg>"
    )


def answers_over_time(times: list[float]) -> str:
    r"""Cumulative answers against minutes since the first one."""
    if not times:
        return "<p>No answers yet.</p>"
    t0 = min(times)
    xs = sorted((t - t0) / 60 for t in times)
    ys = list(range(1, len(xs) + 1))
    px = _scale(xs, 0, max(xs[-1], 1e-9), PAD, WIDTH - 8)
    py = _scale(ys, 0, ys[-1], HEIGHT - PAD, 8)
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(px, py, strict=True))
    body = (
        f'<polyline points="{points}" fill="none" stroke="#2a6fdb" '
        f'stroke-width="2"/><text x="{PAD + 4}" y="22" font-size="11">'
        f"{len(xs)} answers in {xs[-1]:.1f} min</text>"
    )
    return _frame("answers over time", body, "minutes", "answers")


def utility_slice(entry: dict[str, Any]) -> str:
    r"""One variable's slice: ``entry`` has ``name``, ``labels`` (the
    variable's values), ``mean`` and ``sd`` lists."""
    labels, mean, sd = entry["labels"], entry["mean"], entry["sd"]
    lower = [m - 2 * s for m, s in zip(mean, sd, strict=True)]
    upper = [m + 2 * s for m, s in zip(mean, sd, strict=True)]
    lo, hi = min(lower), max(upper)
    n = len(mean)
    px = _scale(list(range(n)), 0, max(n - 1, 1), PAD + 6, WIDTH - 14)
    pm = _scale(mean, lo, hi, HEIGHT - PAD, 8)
    pl = _scale(lower, lo, hi, HEIGHT - PAD, 8)
    pu = _scale(upper, lo, hi, HEIGHT - PAD, 8)
    if entry.get("discrete"):
        body = "".join(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{a:.1f}" y2="{b:.1f}" '
            f'stroke="#9bbcf0" stroke-width="3"/><circle cx="{x:.1f}" '
            f'cy="{m:.1f}" r="3" fill="#2a6fdb"/>'
            for x, a, b, m in zip(px, pl, pu, pm, strict=True)
        )
    else:
        band = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(px, pu, strict=True))
        band += " " + " ".join(
            f"{x:.1f},{y:.1f}" for x, y in zip(px[::-1], pl[::-1], strict=True)
        )
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(px, pm, strict=True))
        body = (
            f'<polygon points="{band}" fill="#dbe7fb"/>'
            f'<polyline points="{line}" fill="none" stroke="#2a6fdb" '
            f'stroke-width="2"/>'
        )
    ticks = "".join(
        f'<text x="{px[i]:.1f}" y="{HEIGHT - PAD + 12}" font-size="9" '
        f'text-anchor="middle">{escape(str(labels[i]))[:10]}</text>'
        for i in sorted({0, n // 2, n - 1})
    )
    return _frame(
        f"utility along {entry['name']}", body + ticks, entry["name"], "utility"
    )
