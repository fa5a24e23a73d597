"""A small line-chart writer that emits SVG text (no plotting library on the machine).

    chart = Chart("title", "x label", "y label", x_log=True, y_log=True)
    chart.add("ring", [(x, y, y_min, y_max), ...], color="#d62728")           # measured
    chart.add("ring predicted", [(x, y), ...], color="#d62728", dashed=True)  # model
    open("plot.svg", "w").write(chart.svg())
"""
import math
from html import escape

PALETTE = {
    "flexreduce": "#1f77b4", "ring": "#d62728", "blueconnect": "#2ca02c",
    "hierarchical": "#9467bd", "mpi": "#7f7f7f", "default": "#ff7f0e", "floor": "#000000",
}


def _nice_step(span, target_ticks):
    raw = span / max(1, target_ticks)
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * power >= raw:
            return m * power
    return 10 * power


class Chart:
    def __init__(self, title, x_label, y_label, x_log=False, y_log=False, x_format=str,
                 y_format=None, width=720, height=420, y_zero=True):
        self.title, self.x_label, self.y_label = title, x_label, y_label
        self.x_log, self.y_log, self.x_format = x_log, y_log, x_format
        self.y_format = y_format or (lambda v: f"{v:g}")
        self.width, self.height, self.y_zero = width, height, y_zero
        self.series = []
        self.left, self.right, self.top, self.bottom = 70, 190, 36, 50

    def add(self, name, points, color="#000", dashed=False):
        points = [p for p in points if p[1] is not None and p[1] > 0]
        if points:
            self.series.append((name, sorted(points), color, dashed))

    # ---- scales
    def _range(self, axis):
        values = []
        for _, points, _, _ in self.series:
            for p in points:
                values.append(p[0] if axis == 0 else p[1])
                if axis == 1 and len(p) >= 4:
                    values += [p[2], p[3]]
        lo, hi = min(values), max(values)
        log = self.x_log if axis == 0 else self.y_log
        if log:
            return (lo / 1.25, hi * 1.25) if lo == hi else (lo / 1.1, hi * 1.1)
        if axis == 1 and self.y_zero:
            lo = 0.0
        pad = (hi - lo) * 0.05 or abs(hi) * 0.1 or 1
        return (lo if axis == 1 and self.y_zero else lo - pad, hi + pad)

    def _scale(self, value, lo, hi, log, a, b):
        if log:
            value, lo, hi = math.log(value), math.log(lo), math.log(hi)
        return a + (value - lo) / (hi - lo) * (b - a)

    def _ticks(self, lo, hi, log, base):
        if log:
            first = math.ceil(math.log(lo, base) - 1e-9)
            last = math.floor(math.log(hi, base) + 1e-9)
            ticks = [base ** k for k in range(first, last + 1)]
            if len(ticks) > 12:
                ticks = ticks[:: math.ceil(len(ticks) / 10)]
            return ticks
        step = _nice_step(hi - lo, 6)
        start = math.ceil(lo / step) * step
        return [start + i * step for i in range(int((hi - start) / step + 1e-9) + 1)]

    def svg(self):
        w, h = self.width, self.height
        x0, x1 = self.left, w - self.right
        y0, y1 = h - self.bottom, self.top
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
               f'viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">',
               f'<rect width="{w}" height="{h}" fill="white"/>',
               f'<text x="{(x0 + x1) / 2}" y="20" text-anchor="middle" font-size="14" '
               f'font-weight="bold">{escape(self.title)}</text>']
        if not self.series:
            out.append(f'<text x="{w / 2}" y="{h / 2}" text-anchor="middle">no data</text></svg>')
            return "\n".join(out)
        (xlo, xhi), (ylo, yhi) = self._range(0), self._range(1)
        sx = lambda v: self._scale(v, xlo, xhi, self.x_log, x0, x1)
        sy = lambda v: self._scale(v, ylo, yhi, self.y_log, y0, y1)
        # grid and ticks
        xs = sorted({p[0] for _, pts, _, _ in self.series for p in pts}) if not self.x_log or \
            len({p[0] for _, pts, _, _ in self.series for p in pts}) <= 12 else \
            self._ticks(xlo, xhi, True, 2)
        for v in xs:
            X = sx(v)
            out.append(f'<line x1="{X:.1f}" y1="{y0}" x2="{X:.1f}" y2="{y1}" stroke="#eee"/>')
            out.append(f'<text x="{X:.1f}" y="{y0 + 16}" text-anchor="middle">'
                       f'{escape(self.x_format(v))}</text>')
        for v in self._ticks(ylo, yhi, self.y_log, 10):
            Y = sy(v)
            out.append(f'<line x1="{x0}" y1="{Y:.1f}" x2="{x1}" y2="{Y:.1f}" stroke="#eee"/>')
            out.append(f'<text x="{x0 - 6}" y="{Y + 4:.1f}" text-anchor="end">'
                       f'{escape(self.y_format(v))}</text>')
        out.append(f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" fill="none" '
                   f'stroke="#444"/>')
        out.append(f'<text x="{(x0 + x1) / 2}" y="{h - 12}" text-anchor="middle">'
                   f'{escape(self.x_label)}</text>')
        out.append(f'<text x="16" y="{(y0 + y1) / 2}" text-anchor="middle" '
                   f'transform="rotate(-90 16 {(y0 + y1) / 2})">{escape(self.y_label)}</text>')
        # series: measured ones solid with markers and min-max bars, predicted ones dashed
        for i, (name, points, color, dashed) in enumerate(self.series):
            path = " ".join(f"{'M' if k == 0 else 'L'}{sx(p[0]):.1f},{sy(p[1]):.1f}"
                            for k, p in enumerate(points))
            dash = ' stroke-dasharray="6,4"' if dashed else ""
            out.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="1.8"{dash}/>')
            for p in points:
                X, Y = sx(p[0]), sy(p[1])
                if len(p) >= 4 and p[2] and p[3]:
                    out.append(f'<line x1="{X:.1f}" y1="{sy(p[2]):.1f}" x2="{X:.1f}" '
                               f'y2="{sy(p[3]):.1f}" stroke="{color}"/>')
                if dashed:  # predictions: hollow diamonds, so that a lone point shows too
                    out.append(f'<path d="M{X:.1f},{Y - 4:.1f} l4,4 l-4,4 l-4,-4 z" fill="white" '
                               f'stroke="{color}" stroke-width="1.3"/>')
                else:
                    out.append(f'<circle cx="{X:.1f}" cy="{Y:.1f}" r="3" fill="{color}"/>')
            ly = self.top + 8 + i * 18
            lx = x1 + 12
            out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" stroke="{color}" '
                       f'stroke-width="1.8"{dash}/>')
            out.append(f'<text x="{lx + 30}" y="{ly + 4}">{escape(name)}</text>')
        out.append("</svg>")
        return "\n".join(out)


def size_label(n):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)
