"""Figure theme, text-overlap check and deterministic writers (lib/privleak/figures.py)."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import seaborn as sns

from privleak import figures
from privleak.errors import PrivleakError


@pytest.fixture
def themed():
    """The render notebooks' theme, restored afterwards so other tests see matplotlib defaults."""
    with matplotlib.rc_context():
        figures.style()
        yield
    plt.close("all")


def suptitle_over_title() -> plt.Figure:
    """The old S0 Fig. 3 defect: a suptitle pushed down onto a titled axes, no layout engine."""
    fig, ax = plt.subplots(figsize=(4, 3), layout="none")
    ax.set_title("n = 8")
    fig.suptitle("Token n-gram influence", y=0.9)
    return fig


def three_panels() -> plt.Figure:
    """Titled panels with a suptitle, long y labels and a legend, laid out by the theme."""
    fig, axes = plt.subplots(1, 3, figsize=(8, 2.8))
    for k, ax in enumerate(axes):
        ax.plot([0, 1], [0, k], label=f"line {k}")
        ax.set(title=f"panel {k}", xlabel="x", ylabel="a rather long y label")
    figures.outside_legend(fig, axes[0])
    fig.suptitle("A suptitle above every panel title")
    return fig


def bootstrap_figure(seed: int = figures.BOOTSTRAP["seed"]) -> plt.Figure:
    """Means of 8 draws at each of 5 x values with seaborn's bootstrap band."""
    frame = pd.DataFrame(
        {"x": np.repeat(np.arange(5), 8), "y": np.random.default_rng(1).normal(size=40)}
    )
    fig, ax = plt.subplots(figsize=(3, 2))
    sns.lineplot(data=frame, x="x", y="y", ax=ax, **(figures.BOOTSTRAP | {"seed": seed}))
    ax.set_title("mean with a 95% bootstrap interval")
    return fig


def test_suptitle_over_a_title_is_reported():
    clashes = figures.overlapping_text(suptitle_over_title())
    assert clashes == [("suptitle 'Token n-gram influence'", "axes 0 title 'n = 8'")]
    plt.close("all")


def test_a_hidden_suptitle_overlaps_nothing():
    fig = suptitle_over_title()
    fig._suptitle.set_visible(False)
    assert figures.overlapping_text(fig) == []
    plt.close("all")


def test_tick_labels_of_overlapping_axes_are_reported():
    fig = plt.figure(figsize=(4, 3), layout="none")
    fig.add_axes((0.2, 0.2, 0.6, 0.6))
    fig.add_axes((0.2, 0.2, 0.6, 0.6))  # same place: every tick label sits on its twin
    names = {name for pair in figures.overlapping_text(fig) for name in pair}
    assert "axes 0 x tick '0.0'" in names and "axes 1 x tick '0.0'" in names
    plt.close("all")


def test_tick_labels_of_an_axes_turned_off_are_not_drawn_so_not_reported():
    fig = plt.figure(figsize=(4, 3), layout="none")
    fig.add_axes((0.2, 0.2, 0.6, 0.6))
    inset = fig.add_axes((0.2, 0.2, 0.6, 0.6))
    fig.canvas.draw()  # its tick labels now hold text, but an axes turned off never draws them
    inset.axis("off")
    assert figures.overlapping_text(fig) == []
    plt.close("all")


def test_the_theme_lays_out_panels_without_overlap(themed):
    fig = three_panels()
    assert fig.get_layout_engine() is not None
    assert figures.overlapping_text(fig) == []
    assert fig.legends and fig.axes[0].get_legend() is None


def test_save_figure_refuses_overlapping_text_and_names_the_figure(tmp_path):
    with pytest.raises(PrivleakError, match=r"figure s0_fig3: overlapping text: suptitle") as info:
        figures.save_figure(suptitle_over_title(), tmp_path / "s0_fig3")
    assert "\n" not in str(info.value)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("fmt", ["jpg", "PNG", "eps"])
def test_an_unknown_format_is_a_one_line_error(tmp_path, fmt):
    message = rf"^figures.formats has '{fmt}'; allowed: png, pdf, svg$"
    with pytest.raises(PrivleakError, match=message):
        figures.save_figure(bootstrap_figure(), tmp_path / "f", ("png", fmt))
    assert not list(tmp_path.iterdir())
    with pytest.raises(PrivleakError, match="figures.formats is empty"):
        figures.check_formats([])
    assert figures.check_formats(["svg", "png"]) == ("svg", "png")
    plt.close("all")


def test_same_figure_same_bytes_in_every_format(themed, tmp_path):
    first = figures.save_figure(bootstrap_figure(), tmp_path / "a" / "fig", ("png", "pdf", "svg"))
    second = figures.save_figure(bootstrap_figure(), tmp_path / "b" / "fig", ("png", "pdf", "svg"))
    assert [p.name for p in first] == ["fig.png", "fig.pdf", "fig.svg"]
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_the_bootstrap_seed_fixes_the_interval(themed):
    def band(seed: int) -> np.ndarray:
        fig = bootstrap_figure(seed)
        vertices = fig.axes[0].collections[0].get_paths()[0].vertices.copy()
        plt.close(fig)
        return vertices

    assert np.array_equal(band(0), band(0))
    assert not np.array_equal(band(0), band(1))


def test_save_table_keeps_csv_only_columns_out_of_the_markdown_and_adds_the_note(tmp_path):
    table = pd.DataFrame({"corpus": ["a", "b"], "tau": [0.123456, 2.0], "prompt": ["x\n", "y"]})
    csv, markdown = figures.save_table(
        table, tmp_path / "t", note="No-context prompt: `'x\\n'`", csv_only=["prompt"]
    )
    assert pd.read_csv(csv).equals(table)
    shown, caption = markdown.read_text().split("\n\n")
    assert "prompt" not in shown and "0.1235" in shown
    assert caption == "No-context prompt: `'x\\n'`\n"
    plain = figures.save_table(table.drop(columns="prompt"), tmp_path / "u")[1].read_text()
    assert plain == shown + "\n"
