"""A bar chart as inline SVG, rendered on the server: no script, no CDN, readable in light and dark.

Bars take `currentColor`-style CSS variables from the stylesheet; each bar has a <title>, which browsers
show on hover and screen readers read.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT, TOP, BOTTOM = 600, 140, 14, 22  # the drawing's units; it scales to its container


@dataclass(frozen=True)
class Bar:
    label: str  # under the bar (shown for some bars only, when there are many)
    value: float
    title: str  # the tooltip: the figures in words


def bar_chart(bars: list[Bar], caption: str) -> str:
    """An <svg> of `bars` left to right, scaled to the largest; `caption` is its accessible name."""
    peak = max((b.value for b in bars), default=0.0) or 1.0
    slot = WIDTH / max(len(bars), 1)
    every = max(1, len(bars) // 6)  # about six labels on the axis, whatever the number of bars
    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(caption)}">',
             f'<line x1="0" y1="{HEIGHT - BOTTOM}" x2="{WIDTH}" y2="{HEIGHT - BOTTOM}" class="axis"/>']
    span = HEIGHT - BOTTOM - TOP
    for i, bar in enumerate(bars):
        h = span * bar.value / peak
        x = i * slot + slot * 0.15
        parts.append(f'<rect x="{x:.1f}" y="{HEIGHT - BOTTOM - h:.1f}" width="{slot * 0.7:.1f}" height="{h:.1f}" '
                     f'class="bar"><title>{escape(bar.title)}</title></rect>')
        if i % every == 0:
            parts.append(f'<text x="{x + slot * 0.35:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
                         f'{escape(bar.label)}</text>')
    parts.append(f'<text x="2" y="{TOP - 3}" class="peak">max {escape(_short(peak))}</text></svg>')
    return "".join(parts)


def _short(value: float) -> str:
    """12345 -> "12.3k": a figure that fits above a small chart."""
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= limit:
            return f"{value / limit:.1f}{suffix}"
    return f"{value:.0f}"
