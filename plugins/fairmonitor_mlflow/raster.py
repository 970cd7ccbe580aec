"""Plots drawn straight into a PIL image: lines, steps, stairs, ticks, text, a legend.

The evaluator's figures of one run (each value's interval, a regressor's prediction CDFs and
residuals) cost ~0.1 s each with matplotlib, most of it laying out and rendering the text of
ticks, titles and legends; MLflow's own regressor evaluator takes ~0.4 s in all. Here a figure
is a few polylines drawn with Pillow (already installed with matplotlib) at twice the size
and halved (antialiasing), then its strings at their size, in a few milliseconds; the font
is matplotlib's DejaVu Sans, so the pictures read like the matplotlib ones beside them. This
is not a plotting library: only what those figures draw.

>>> r = Raster(200, 100)
>>> ax = r.axes((40, 10, 190, 80), xlim=(0.0, 1.0), ylim=(0.0, 1.0))
>>> ax.decorate(xlabel="x", ylabel="y")
>>> ax.line([0.0, 1.0], [0.0, 1.0], color=TAB10[0])
>>> r.image().size
(200, 100)
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["TAB10", "Axes", "Raster", "legend", "nice_ticks", "png_bytes"]

#: matplotlib's default colour cycle ("tab10"), so colours match the other figures
TAB10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
         "#7f7f7f", "#bcbd22", "#17becf")
_GRID = "#e3e3e3"
_INK = "#222222"
_SCALE = 2  # lines drawn at twice the size, then halved: antialiased


@functools.lru_cache(maxsize=16)
def _font(size: int) -> Any:
    """DejaVu Sans (matplotlib's default font, shipped with it) at ``size`` pixels."""
    import matplotlib
    from PIL import ImageFont

    path = os.path.join(matplotlib.get_data_path(), "fonts", "ttf", "DejaVuSans.ttf")
    return ImageFont.truetype(path, size)


def nice_ticks(lo: float, hi: float, n: int = 5) -> tuple[NDArray[np.float64], int]:
    """Return at most about ``n`` round tick values in ``[lo, hi]`` and their decimals.

    >>> ticks, decimals = nice_ticks(0.0, 1.02)
    >>> ticks.tolist(), decimals
    ([0.0, 0.25, 0.5, 0.75, 1.0], 2)
    """
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return np.array([lo]) if math.isfinite(lo) else np.array([]), 0
    raw = (hi - lo) / n
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * mag >= raw * (1 - 1e-9))
    first = math.ceil(lo / step - 1e-9)
    ticks = (first + np.arange(int(math.floor(hi / step + 1e-9)) - first + 1)) * step
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return ticks, decimals + (1 if round(step / 10.0 ** -decimals, 6) % 1 else 0)


class Raster:
    """A white image of ``width`` x ``height`` pixels (the saved size) to draw on."""

    def __init__(self, width: int, height: int) -> None:
        from PIL import Image, ImageDraw

        self.width, self.height = width, height
        self._img = Image.new("RGB", (width * _SCALE, height * _SCALE), "white")
        self.draw = ImageDraw.Draw(self._img)
        self._texts: list[tuple[tuple[float, float], str, int, str, str, bool]] = []

    def axes(self, box: Sequence[float], xlim: Sequence[float], ylim: Sequence[float]
             ) -> Axes:
        """Return a plotting area: ``box`` = (left, top, right, bottom) in pixels of the image."""
        return Axes(self, box, xlim, ylim)

    def text(self, xy: Sequence[float], text: str, size: int = 9, anchor: str = "la",
             color: str = _INK, vertical: bool = False) -> None:
        """Write ``text`` at ``xy`` (pixels); ``anchor`` as PIL's (``"mm"``: centred).

        Text is drawn last, on the halved image: FreeType antialiases it at its own size
        (a quarter of the glyph pixels of the doubled image), and lines never cover it.
        """
        self._texts.append(((float(xy[0]), float(xy[1])), text, size, anchor, color,
                            vertical))

    def text_width(self, text: str, size: int = 9) -> float:
        """Return the width of ``text`` in pixels of the saved image."""
        return float(_font(size).getlength(text))

    def image(self) -> Any:
        """Return the finished picture at its saved size (a ``PIL.Image``)."""
        from PIL import ImageDraw

        img = self._img.reduce(_SCALE)
        draw = ImageDraw.Draw(img)
        for xy, text, size, anchor, color, vertical in self._texts:
            if vertical:
                _vertical_text(img, xy, text, _font(size), color)
            else:
                draw.text(xy, text, fill=color, font=_font(size), anchor=anchor)
        return img

    def save(self, path: str) -> Any:
        """Write the PNG (:func:`png_bytes`); return the picture (a ``PIL.Image``)."""
        img = self.image()
        with open(path, "wb") as fh:
            fh.write(png_bytes(img))
        return img


def png_bytes(img: Any) -> bytes:
    """Return the PNG file of an RGB ``PIL.Image``: rows unfiltered, deflated at zlib level 1.

    Pillow's PNG encoder picks each row's filter by trying all five, which was most of its
    time on these figures (about 20 ms for a 760 x 864 one, the same image unfiltered through
    zlib about 13 ms); on a figure's flat colours filtering saves a fifth of the bytes at
    most. The file is the standard's minimal one: signature, IHDR (8-bit RGB), one IDAT, IEND.

    >>> from PIL import Image
    >>> import io
    >>> img = Image.new("RGB", (3, 2), "#1f77b4")
    >>> back = Image.open(io.BytesIO(png_bytes(img)))
    >>> back.format, back.size, back.getpixel((2, 1))
    ('PNG', (3, 2), (31, 119, 180))
    """
    import struct
    import zlib

    pixels = np.asarray(img.convert("RGB"), dtype=np.uint8)
    height, width = pixels.shape[:2]
    rows = np.zeros((height, 1 + 3 * width), dtype=np.uint8)  # filter type 0 (None) a row
    rows[:, 1:] = pixels.reshape(height, -1)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body)))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit truecolour
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(rows.tobytes(), 1)) + chunk(b"IEND", b""))


def _vertical_text(img: Any, xy: Sequence[float], text: str, font: Any, color: str) -> None:
    """Paste ``text`` turned a quarter anticlockwise, centred on ``xy``."""
    from PIL import Image, ImageDraw

    left, top, right, bottom = font.getbbox(text)
    mask = Image.new("L", (right - left + 2, bottom - top + 2), 0)
    ImageDraw.Draw(mask).text((1 - left, 1 - top), text, fill=255, font=font)
    mask = mask.rotate(90, expand=True)
    img.paste(color, (int(xy[0] - mask.width / 2), int(xy[1] - mask.height / 2)), mask)


class Axes:
    """One plotting area of a :class:`Raster`: data coordinates mapped to its box."""

    def __init__(self, raster: Raster, box: Sequence[float], xlim: Sequence[float],
                 ylim: Sequence[float]) -> None:
        self.raster = raster
        self.left, self.top, self.right, self.bottom = (float(v) for v in box)
        self.xlim = (float(xlim[0]), float(xlim[1]))
        self.ylim = (float(ylim[0]), float(ylim[1]))

    def _px(self, x: ArrayLike, y: ArrayLike) -> NDArray[np.float64]:
        (x0, x1), (y0, y1) = self.xlim, self.ylim
        px = self.left + (np.asarray(x, float) - x0) / ((x1 - x0) or 1.0) * (
            self.right - self.left)
        py = self.bottom - (np.asarray(y, float) - y0) / ((y1 - y0) or 1.0) * (
            self.bottom - self.top)
        return np.column_stack([np.ravel(px), np.ravel(py)]) * _SCALE

    def line(self, x: ArrayLike, y: ArrayLike, color: str, width: float = 1.6) -> None:
        """Draw a polyline through the finite points (a non-finite one breaks it)."""
        pts = self._px(x, y)
        ok = np.isfinite(pts).all(axis=1)
        for run in np.split(pts, np.flatnonzero(~ok)):
            run = run[np.isfinite(run).all(axis=1)]
            if len(run) >= 2:
                self.raster.draw.line(run.ravel().tolist(), fill=color,
                                      width=max(1, round(width * _SCALE)), joint="curve")

    def step(self, x: ArrayLike, y: ArrayLike, color: str, width: float = 1.6) -> None:
        """Draw a step line, as matplotlib's ``step(where="post")``: y[i] holds from x[i] on."""
        x, y = np.asarray(x, float), np.asarray(y, float)
        xs = np.repeat(x, 2)[1:]
        ys = np.repeat(y, 2)[:-1]
        self.line(xs, ys, color, width)

    def stairs(self, values: ArrayLike, edges: ArrayLike, color: str, width: float = 1.6
               ) -> None:
        """Draw a histogram outline: ``values[i]`` over ``[edges[i], edges[i + 1]]``."""
        v, e = np.asarray(values, float), np.asarray(edges, float)
        self.line(np.repeat(e, 2), np.r_[0.0, np.repeat(v, 2), 0.0], color, width)

    def vline(self, x: float, color: str, width: float = 1.0, dash: bool = False) -> None:
        """Draw a vertical line across the area (dashed: 4-pixel dashes)."""
        px = self._px([x], [self.ylim[0]])[0, 0]
        stops = ([(self.top, self.bottom)] if not dash else
                 [(t, min(t + 4, self.bottom)) for t in np.arange(self.top, self.bottom, 7)])
        for a, b in stops:
            self.raster.draw.line([px, a * _SCALE, px, b * _SCALE], fill=color,
                                  width=max(1, round(width * _SCALE)))

    def hline(self, y: float, color: str, width: float = 1.0) -> None:
        """Draw a horizontal line across the area."""
        self.line(self.xlim, [y, y], color, width)

    def dots(self, x: ArrayLike, y: ArrayLike, color: str, radius: float = 2.5) -> None:
        """Draw a filled circle at each finite point."""
        r = radius * _SCALE
        for px, py in self._px(x, y):
            if np.isfinite(px) and np.isfinite(py):
                self.raster.draw.ellipse([px - r, py - r, px + r, py + r], fill=color)

    def decorate(self, xlabel: str = "", ylabel: str = "", title: str = "",
                 yticks: bool = True) -> None:
        """Draw the grid, frame, x (and y) ticks with their labels, axis labels, title."""
        r = self.raster
        xt, xd = nice_ticks(*self.xlim)
        for t in xt:
            self.vline(float(t), _GRID)
            px = self._px([t], [0.0])[0, 0] / _SCALE
            r.text((px, self.bottom + 4), f"{t:.{xd}f}", size=8, anchor="mt")
        widest = 0.0
        if yticks:
            yt, yd = nice_ticks(*self.ylim)
            for t in yt:
                self.hline(float(t), _GRID)
                py = self._px([0.0], [t])[0, 1] / _SCALE
                r.text((self.left - 4, py), f"{t:.{yd}f}", size=8, anchor="rm")
                widest = max(widest, r.text_width(f"{t:.{yd}f}", 8))
        box = [v * _SCALE for v in (self.left, self.top, self.right, self.bottom)]
        r.draw.rectangle(box, outline=_INK, width=_SCALE)
        mid = (self.left + self.right) / 2
        if xlabel:
            r.text((mid, self.bottom + 18), xlabel, size=9, anchor="mt")
        if ylabel:
            # clear of the widest tick label (a salary's 250000 is wider than a share's 0.25)
            r.text((max(8.0, self.left - widest - 14), (self.top + self.bottom) / 2), ylabel,
                   size=9, vertical=True)
        for k, line in enumerate(reversed(title.splitlines())):
            r.text((mid, self.top - 6 - 14 * k), line, size=10, anchor="md")


def legend(raster: Raster, xy: Sequence[float], entries: Sequence[tuple[str, str]],
           size: int = 8) -> None:
    """Colour swatches and labels, one a line, from ``xy`` (top left) downwards."""
    x, y = xy
    for color, label in entries:
        raster.draw.line([x * _SCALE, (y + 6) * _SCALE, (x + 18) * _SCALE, (y + 6) * _SCALE],
                         fill=color, width=2 * _SCALE)
        raster.text((x + 24, y + 6), label, size=size, anchor="lm")
        y += size + 7
