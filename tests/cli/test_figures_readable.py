"""Issue 61, item 8: figures a reader can read. Each figure is made by its command and caught before it is saved
(plot.save), then its axes, artists and labels are read back: the validation figure keeps the seed model on axes
of its own and shows our error; the roofline's x-range follows its points, its colours differ, its measured
markers are drawn and its FP32 ceiling says how it is made; the heatmap's title gives dtype and causal and its
legend names the tiles that do not fit."""

import matplotlib.colors as mcolors
import numpy as np
import pytest
from click.testing import CliRunner
from matplotlib.collections import PathCollection

from perfmodel import plot
from perfmodel.cli import main


@pytest.fixture
def drawn(monkeypatch):
    """The figures the commands make, in order, kept open instead of saved."""
    figs = []
    monkeypatch.setattr(plot, "save", lambda fig, path: figs.append(fig))
    yield figs
    for f in figs:
        plot.plt.close(f)


def _draw(drawn, args):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    return drawn[-1]


def _scatters(ax) -> list:
    """The scatter artists of ``ax`` that draw points (the legend's empty ones left out)."""
    return [c for c in ax.collections if isinstance(c, PathCollection) and len(c.get_offsets())]


def _points(ax):
    """(x, y) of every point the scatter artists of ``ax`` draw."""
    offs = [c.get_offsets() for c in _scatters(ax)]
    return np.concatenate(offs) if offs else np.zeros((0, 2))


VALIDATION = ["plot", "validation", "examples/measurements/h100/fa1.csv", "examples/measurements/h200/fa1.csv",
              "examples/measurements/h100/fa2.csv", "-o", "x.png"]


def test_validation_keeps_the_seed_model_on_axes_of_its_own(drawn):
    ours, error, seed = _draw(drawn, VALIDATION).axes
    pts, spts = _points(ours), _points(seed)
    # our (square) axes span our points, measured and predicted, within the padding; not the seed model's, which
    # reach hundreds of times further
    v = pts.ravel()
    for lim in (ours.get_xlim(), ours.get_ylim()):
        assert lim[0] <= v.min() and lim[1] >= v.max() and lim[1] / lim[0] <= v.max() / v.min() * 1.6 ** 2 * 1.01
    assert spts[:, 1].max() > 100 * pts[:, 1].max()
    assert seed.get_ylim()[1] >= spts[:, 1].max()
    # the error panel is in percent, spans our errors, and its band is visible
    err = _points(error)[:, 1]
    assert len(err) == len(pts) and error.get_ylim()[0] <= err.min() and error.get_ylim()[1] >= err.max()
    assert error.get_ylim()[1] < 200
    # the seed model's error is printed as the ratio it stands for
    assert any(t.get_text().endswith("x") for t in seed.get_legend().get_texts())


def test_validation_draws_each_gpu_in_its_own_marker_and_interleaved(drawn):
    ours = _draw(drawn, VALIDATION).axes[0]
    drawn_sets = _scatters(ours)
    paths = {}
    for c in drawn_sets:
        key = tuple(np.round(c.get_edgecolor()[0], 3))
        paths.setdefault(key, set()).add(c.get_paths()[0].vertices.tobytes())
    assert len(paths) == 3                                  # three groups: fa1 on two GPUs, fa2 on one
    # the two GPUs' fa1 points in different shapes
    shapes = {v for s in paths.values() for v in s}
    assert len(shapes) == 2
    # no group is drawn wholly after another: the order of the groups' artists changes more than twice
    order = [tuple(np.round(c.get_edgecolor()[0], 3)) for c in drawn_sets]
    assert sum(a != b for a, b in zip(order, order[1:])) > 2 * len(paths)
    # hollow: the points have no face, so one drawn over another leaves it visible
    assert all(len(c.get_facecolor()) == 0 or c.get_facecolor()[0][3] == 0 for c in drawn_sets)


ROOF = ["roofline", "--gpu", "h100", "--kernel", "fa2", "--N", "1024,4096", "--Br", "32,64", "--Bc", "64",
        "--measured", "examples/measurements/h100/fa2.csv", "-o", "x.png"]


def test_roofline_follows_its_points_in_distinct_colours(drawn):
    ax = _draw(drawn, ROOF).axes[0]
    pts = _points(ax)
    lo, hi = ax.get_xlim()
    assert lo <= pts[:, 0].min() and hi >= pts[:, 0].max()
    assert hi / lo < pts[:, 0].max() / pts[:, 0].min() * 10          # not the fixed 1e-3..1e4 of before
    bottom, top = ax.get_ylim()
    assert bottom <= pts[:, 1].min() and top >= pts[:, 1].max() and top / bottom < 1e3
    # one colour per configuration, none a ceiling's
    labels = {t.get_text() for t in ax.get_legend().get_texts()}
    configs = [h for h in ax.get_legend().legend_handles if h.get_label().startswith("N=")]
    colours = {mcolors.to_hex(h.get_color()) for h in configs}
    ceilings = {mcolors.to_hex(line.get_color()) for line in ax.get_lines() if len(line.get_xdata()) > 2}
    assert len(colours) == len(configs) == 4 and not colours & ceilings
    assert len(set(plot.CONFIG_COLORS)) == 12 and not {c.lower() for c in plot.CONFIG_COLORS} & ceilings
    # the measured markers are drawn, above the lines, and said in the legend
    measured = [c for c in _scatters(ax) if c.get_zorder() == 4]
    assert len(measured) == 4 * 3 and any("measured" in t for t in labels)
    # the FP32 ceiling says how it is made
    fp32 = next(t for t in labels if t.startswith("FP32"))
    assert "lanes/SM" in fp32 and "SMs" in fp32 and "MHz" in fp32 and "datasheet" in fp32


def test_an_unprobed_gpus_ceilings_name_the_spec_sheet(drawn):
    ax = _draw(drawn, ["roofline", "--gpu", "rtx3090", "--kernel", "fa2", "--N", "4096", "--d", "64", "--Br", "64",
                       "--Bc", "64", "-o", "x.png"]).axes[0]
    assert "ceilings: spec sheet + sm_86 constants" in ax.get_title() and "probe" not in ax.get_title()
    fp32 = next(t.get_text() for t in ax.get_legend().get_texts() if t.get_text().startswith("FP32"))
    assert "architecture constant" in fp32


@pytest.mark.parametrize("args,title,unfit", [
    (["--kernel", "fa1", "--d", "128"], "(fp32, not causal)", True),
    (["--kernel", "fa2_tc", "--d", "128", "--causal"], "(fp16, causal)", False),
])
def test_heatmap_title_gives_dtype_and_causal_and_its_legend_names_unfit_tiles(drawn, args, title, unfit):
    fig = _draw(drawn, ["sweep", "--gpu", "h100", "--N", "4096", "--B", "1", "--H", "16", "-o", "x.png"] + args)
    ax = fig.axes[0]
    assert title in ax.get_title()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "fastest" in legend
    assert ("no tile fits the GPU" in legend) == unfit
    notes = [t.get_text() for t in fig.texts]
    assert bool(notes) == unfit
    if unfit:
        assert "shared memory" in notes[0]
