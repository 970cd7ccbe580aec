"""The regressor figures (issue 29 items 2 and 6): every group drawn, from exact numbers."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from fairmonitor_mlflow import plots
from fairmonitor_mlflow.raster import TAB10, nice_ticks
from PIL import Image

from fairmonitor.metrics._intervals import Interval


def _window(n: int = 3000, seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray,
                                                    np.ndarray]:
    rng = np.random.default_rng(seed)
    group = rng.choice(np.array(["a", "b", "c"], dtype=object), n, p=[0.5, 0.3, 0.2])
    pred = rng.normal(40, 5, n) + 2 * (group == "b")
    residual = rng.normal(0, 3, n) - 1.5 * (group == "c")
    return {"group": group}, pred, residual


def _ecdf(values: np.ndarray, at: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.sort(values), at, side="right") / values.size


def test_series_are_each_groups_exact_cdf_and_residual_density() -> None:
    cols, pred, residual = _window()
    s = plots.regression_series(cols, pred, residual)
    group = cols["group"]
    assert s["counts"] == {g: int((group == g).sum()) for g in ("a", "b", "c")}
    for g in ("a", "b", "c"):
        x, share = s["cdf"][g]
        assert x.size <= 256 and share[-1] == 1.0
        # the CDF at its (quantile) points is the group's exact ECDF there
        np.testing.assert_array_equal(share, _ecdf(pred[group == g], x))
        density = s["density"][g]
        assert float(np.sum(density * np.diff(s["edges"]))) == pytest.approx(1.0, abs=1e-12)
        assert s["mean_residual"][g] == pytest.approx(float(residual[group == g].mean()),
                                                      abs=1e-12)
    x, share = s["cdf"]["pooled"]
    np.testing.assert_array_equal(share, _ecdf(pred, x))


def test_the_png_holds_every_group_in_its_colour(tmp_path) -> None:
    cols, pred, residual = _window()
    path = tmp_path / "r.png"
    image = plots.save_png(plots.regression_panels("group", cols, pred, residual, ks=0.1,
                                                   residual_gap=1.5), str(path))
    with Image.open(path) as png:
        assert png.format == "PNG" and png.size == image.size == (1070, 340)
        colours = {tuple(c) for c in np.asarray(png.convert("RGB")).reshape(-1, 3)}
    rgb = [tuple(int(h[i:i + 2], 16) for i in (1, 3, 5)) for h in TAB10[:4]]
    # three groups' colours, the fourth unused (antialiasing blends, but a line's centre
    # keeps its colour)
    assert [c in colours for c in rgb] == [True, True, True, False]


def test_small_groups_are_left_out_and_at_most_ten_drawn() -> None:
    rng = np.random.default_rng(1)
    group = np.repeat(np.arange(12).astype(str), [200] * 11 + [5])
    pred = rng.normal(size=group.size)
    s = plots.regression_series({"g": group}, pred, None, min_group_size=30)
    assert len(s["counts"]) == 10 and "11" not in s["counts"] and "density" not in s
    fig = plots.regression_panels("g", {"g": group}, pred, None, min_group_size=30)
    assert fig.image().size == (640, 340)  # one panel and the legend


def test_interval_figure_of_no_value_and_of_values(tmp_path) -> None:
    empty = SimpleNamespace(values={("mae_difference", "sex"): float("nan")}, intervals={})
    assert plots.save_png(plots.metric_intervals(empty), str(tmp_path / "e.png")).size == (
        760, 180)
    report = SimpleNamespace(
        values={("mae_difference", "sex"): 1.0, ("prediction_madd", "sex"): 0.2},
        intervals={("mae_difference", "sex"): Interval(0.5, 1.5, 0.25, "x")})
    image = plots.save_png(plots.metric_intervals(report), str(tmp_path / "i.png"))
    assert image.size == (760, 180)
    colours = {tuple(c) for c in np.asarray(image).reshape(-1, 3)}
    assert {(31, 119, 180), (214, 39, 40), (127, 127, 127)} <= colours  # bar, chance, no-CI


@pytest.mark.parametrize(("lo", "hi", "expected"), [
    (0.0, 1.02, [0.0, 0.25, 0.5, 0.75, 1.0]), (20.0, 60.0, [20.0, 30.0, 40.0, 50.0, 60.0]),
    (-7.0, 3.0, [-6.0, -4.0, -2.0, 0.0, 2.0])])
def test_ticks_are_round_and_inside(lo: float, hi: float, expected: list[float]) -> None:
    ticks, _ = nice_ticks(lo, hi)
    np.testing.assert_allclose(ticks, expected, atol=1e-12)


@pytest.mark.parametrize(("width", "height"), [(1, 1), (7, 3), (760, 181)])
def test_the_png_writer_gives_pillow_the_same_pixels(width: int, height: int) -> None:
    import io
    import zlib

    from fairmonitor_mlflow.raster import png_bytes

    rng = np.random.default_rng(width)
    pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    pixels[:, : width // 2] = 255  # a plot's flat white beside noise
    data = png_bytes(Image.fromarray(pixels))
    with Image.open(io.BytesIO(data)) as png:
        png.load()  # Pillow checks each chunk's CRC and the stream as it decodes
        assert (png.format, png.mode, png.size) == ("PNG", "RGB", (width, height))
        np.testing.assert_array_equal(np.asarray(png), pixels)
    # one IDAT whose rows all carry filter type 0, as the docstring says
    assert data.count(b"IDAT") == 1
    start = data.index(b"IDAT") + 4
    size = int.from_bytes(data[start - 8:start - 4], "big")
    raw = np.frombuffer(zlib.decompress(data[start:start + size]), dtype=np.uint8)
    assert (raw.reshape(height, -1)[:, 0] == 0).all()
