r"""Small inline SVG plots for the researcher's page (no plotting library,
no script): answers over time, and the utility along each variable through
the population's favourite with a ±2 sd band."""

from __future__ import annotations

import math
from html import escape
from typing import Any

WIDTH, HEIGHT, PAD = 360, 180, 32
LABEL_CHARS = 12  # a discrete slice's tick label, longer ones end in "…"


def _scale(values: list[float], lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or 1.0
    return [a + (v - lo) / span * (b - a) for v in values]


def _frame(
    title: str,
    body: str,
    xlabel: str,
    ylabel: str,
    bottom: float = PAD,
    left: float = 0.0,
) -> str:
    r"""An SVG with the plot area ``[PAD, WIDTH - 8] x [8, HEIGHT - PAD]``,
    ``bottom`` pixels below it for ticks and the x label, and ``left``
    more pixels left of the y label (for slanted tick labels)."""
    height = HEIGHT - PAD + bottom
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH + left:.0f}" '
        f'height="{height:.0f}" viewBox="{-left:.0f} 0 {WIDTH + left:.0f} '
        f'{height:.0f}" role="img" aria-label="{escape(title)}">'
        f'<rect x="{PAD}" y="8" width="{WIDTH - PAD - 8}" '
        f'height="{HEIGHT - PAD - 8}" fill="none" stroke="#999"/>'
        f"{body}"
        f'<text x="{WIDTH / 2}" y="{height - 6:.0f}" text-anchor="middle" '
        f'font-size="11">{escape(xlabel)}</text>'
        f'<text x="10" y="{HEIGHT / 2}" font-size="11" '
        f'transform="rotate(-90 10 {HEIGHT / 2})" text-anchor="middle">'
        f"{escape(ylabel)}</text></svg>"
    )


def _ticks(lo: float, hi: float, count: int = 4) -> list[float]:
    r"""About ``count`` round values from ``lo`` to ``hi`` (1, 2 or 5 times
    a power of ten apart)."""
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _tick_label(value: float) -> str:
    return f"{value:g}" if abs(value) >= 1e-9 else "0"


def _x_ticks(values: list[float], lo: float, hi: float) -> str:
    positions = _scale(values, lo, hi, PAD, WIDTH - 8)
    return "".join(
        f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{HEIGHT - PAD}" '
        f'y2="{HEIGHT - PAD + 4}" stroke="#999"/>'
        f'<text x="{x:.1f}" y="{HEIGHT - PAD + 14}" font-size="9" '
        f'text-anchor="middle">{_tick_label(v)}</text>'
        for x, v in zip(positions, values, strict=True)
    )


def _y_ticks(values: list[float], lo: float, hi: float) -> str:
    positions = _scale(values, lo, hi, HEIGHT - PAD, 8)
    return "".join(
        f'<line x1="{PAD - 4}" x2="{PAD}" y1="{y:.1f}" y2="{y:.1f}" stroke="#999"/>'
        f'<text x="{PAD - 6}" y="{y + 3:.1f}" font-size="9" '
        f'text-anchor="end">{_tick_label(round(v, 10))}</text>'
        for y, v in zip(positions, values, strict=True)
    )


def answers_over_time(times: list[float]) -> str:
    r"""Cumulative answers against minutes since the first one, with ticks
    on both axes."""
    if not times:
        return "<p>No answers yet.</p>"
    t0 = min(times)
    xs = sorted((t - t0) / 60 for t in times)
    ys = list(range(1, len(xs) + 1))
    right = max(xs[-1], 1e-9)
    px = _scale(xs, 0, right, PAD, WIDTH - 8)
    py = _scale(ys, 0, ys[-1], HEIGHT - PAD, 8)
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(px, py, strict=True))
    body = (
        f'<polyline points="{points}" fill="none" stroke="#2a6fdb" '
        f'stroke-width="2"/><text x="{PAD + 4}" y="22" font-size="11">'
        f"{len(xs)} answers in {xs[-1]:.1f} min</text>"
        + _x_ticks(_ticks(0, right), 0, right)
        + _y_ticks([int(v) for v in _ticks(0, ys[-1], 3) if v == int(v)], 0, ys[-1])
    )
    return _frame("answers over time", body, "minutes", "answers", bottom=PAD + 4)


def utility_slice(entry: dict[str, Any]) -> str:
    r"""One variable's slice: ``entry`` has ``name``, ``labels`` (the
    variable's values), ``mean`` and ``sd`` lists, and ``discrete``. A
    discrete slice names every value below the axis (slanted, shortened to
    :data:`LABEL_CHARS` with the whole label as its tooltip); a continuous
    one has ticks at its first, middle and last value."""
    labels, mean, sd = entry["labels"], entry["mean"], entry["sd"]
    lower = [m - 2 * s for m, s in zip(mean, sd, strict=True)]
    upper = [m + 2 * s for m, s in zip(mean, sd, strict=True)]
    lo, hi = min(lower), max(upper)
    margin = 0.05 * (hi - lo)  # the band and the bars clear the frame
    lo, hi = lo - margin, hi + margin
    n = len(mean)
    px = _scale(list(range(n)), 0, max(n - 1, 1), PAD + 8, WIDTH - 16)
    pm = _scale(mean, lo, hi, HEIGHT - PAD, 8)
    pl = _scale(lower, lo, hi, HEIGHT - PAD, 8)
    pu = _scale(upper, lo, hi, HEIGHT - PAD, 8)
    bottom, left = PAD, 0.0
    if entry.get("discrete"):
        body = "".join(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{a:.1f}" y2="{b:.1f}" '
            f'stroke="#9bbcf0" stroke-width="3"/><circle cx="{x:.1f}" '
            f'cy="{m:.1f}" r="3" fill="#2a6fdb"/>'
            for x, a, b, m in zip(px, pl, pu, pm, strict=True)
        )
        texts = [str(label) for label in labels]
        shown = [_shorten(t) for t in texts]
        longest = max(len(t) for t in shown)
        bottom = PAD + 5.5 * longest  # room for the slanted labels
        # the first label runs left of its tick by about cos 50° of its length
        left = max(0.0, 3.6 * longest - px[0] + 4)
        y = HEIGHT - PAD + 10
        body += "".join(
            f'<text x="{x:.1f}" y="{y}" font-size="9" text-anchor="end" '
            f'transform="rotate(-50 {x:.1f} {y})"><title>{escape(full)}</title>'
            f"{escape(short)}</text>"
            for x, full, short in zip(px, texts, shown, strict=True)
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
        anchors = {0: "start", n // 2: "middle", n - 1: "end"}  # inside the box
        body += "".join(
            f'<text x="{px[i]:.1f}" y="{HEIGHT - PAD + 12}" font-size="9" '
            f'text-anchor="{anchor}">{escape(_shorten(str(labels[i])))}</text>'
            for i, anchor in sorted(anchors.items())
        )
    body += _y_ticks(_ticks(lo, hi, 3), lo, hi)
    return _frame(
        f"utility along {entry['name']}", body, entry["name"], "utility", bottom, left
    )


def _shorten(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"
