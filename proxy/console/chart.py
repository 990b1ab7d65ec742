"""A bar chart as inline SVG (no script, no external asset): the datamap page's hits and
time saved per time bucket."""
from __future__ import annotations

import html
import time
from typing import Sequence

WIDTH, HEIGHT, PAD_L, PAD_B, PAD_T = 640, 150, 48, 22, 18


def bars(points: Sequence[tuple[float, float]], *, title: str, unit: str = "",
         colour: str = "#1f5fa8", label_every: int = 6) -> str:
    """`points` = (bucket start, value), in time order, every bucket present (zeros too),
    so that an empty stretch shows as one."""
    top = max((v for _, v in points), default=0.0) or 1.0
    n = max(len(points), 1)
    inner_w = WIDTH - PAD_L - 8
    inner_h = HEIGHT - PAD_B - PAD_T
    step = inner_w / n
    out = [f'<svg class="chart" role="img" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg">',
           f"<title>{html.escape(title)}</title>",
           f'<text x="{PAD_L}" y="12">{html.escape(title)}</text>',
           f'<text x="{PAD_L - 4}" y="{PAD_T + 8}" text-anchor="end">{_num(top)}{unit}</text>',
           f'<text x="{PAD_L - 4}" y="{HEIGHT - PAD_B}" text-anchor="end">0</text>',
           f'<line x1="{PAD_L}" y1="{HEIGHT - PAD_B}" x2="{WIDTH - 8}" y2="{HEIGHT - PAD_B}" '
           'stroke="#d9dee5"/>']
    for i, (at, value) in enumerate(points):
        h = inner_h * value / top
        x = PAD_L + i * step
        out.append(f'<rect x="{x + 1:.1f}" y="{HEIGHT - PAD_B - h:.1f}" '
                   f'width="{max(step - 2, 1):.1f}" height="{h:.1f}" fill="{colour}">'
                   f"<title>{_clock(at)} UTC: {_num(value)}{unit}</title></rect>")
        if i % label_every == 0:
            out.append(f'<text x="{x:.1f}" y="{HEIGHT - 6}">{_clock(at)}</text>')
    out.append("</svg>")
    return "".join(out)


def _num(v: float) -> str:
    return f"{v:.0f}" if v >= 10 or float(v).is_integer() else f"{v:.2f}"


def _clock(at: float) -> str:
    return time.strftime("%H:%M", time.gmtime(at))
