r"""The ready-made study of ``prefbo serve --demo``: choosing a colour.

Each option is a swatch (an SVG rendered by :func:`swatch`) of a colour in
hue, saturation and lightness; the collaborative model (the default kind)
learns which colours the participants like. The hue is circular
(:class:`~prefbo.space.Circular`): 0° and 360° are the same red, so the
model sees 359° beside 1° and the questions do not pile up at either end of
a line. One command shows the
whole path: the join link, the participant's page, the researcher's page.
"""

from __future__ import annotations

import colorsys
from typing import Any

DEMO_STUDY: dict[str, Any] = {
    "title": "Which colour do you like better?",
    "instructions": (
        "Click the colour you like better, or press 1 or 2. If you cannot "
        "choose, press 'No preference'."
    ),
    "q": 2,
    "answers_per_participant": 12,
    "no_preference": True,
    "seed": 0,
    "model": {"kind": "collaborative", "strategy": "eubo"},
    "space": [
        {"name": "hue", "type": "circular", "lower": 0.0, "upper": 360.0},
        {"name": "saturation", "type": "continuous", "lower": 0.2, "upper": 1.0},
        {"name": "lightness", "type": "continuous", "lower": 0.25, "upper": 0.75},
    ],
    "display": {"kind": "callable", "function": "prefbo.serve.demo:swatch"},
}


def swatch(values: dict[str, Any]) -> tuple[bytes, str]:
    r"""An SVG swatch of the colour ``values`` (hue in degrees, saturation
    and lightness in ``[0, 1]``)."""
    r, g, b = colorsys.hls_to_rgb(
        values["hue"] / 360.0, values["lightness"], values["saturation"]
    )
    colour = f"#{round(255 * r):02x}{round(255 * g):02x}{round(255 * b):02x}"
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" width="240" height="160" '
        'viewBox="0 0 240 160">'
        f'<rect width="240" height="160" rx="12" fill="{colour}"/></svg>'
    )
    return svg.encode(), "image/svg+xml"
