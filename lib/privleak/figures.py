"""One figure theme for every paper, a text-overlap check, and deterministic figure and table
writers: same data, same bytes (a second dvc repro is a no-op)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from pathlib import Path

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from privleak.errors import PrivleakError, require  # noqa: E402

# No timestamps or random ids in the files, so identical data gives identical bytes.
matplotlib.rcParams["svg.hashsalt"] = "privleak"
_METADATA = {
    "png": {"Software": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
    "svg": {"Date": None, "Creator": None},
}
DPI = 200
# Interval estimates over examples/sequences: a 95% percentile bootstrap with a fixed seed, so a
# figure is the same on every run. Pass as `sns.lineplot(..., **BOOTSTRAP)`.
BOOTSTRAP = {"errorbar": ("ci", 95), "n_boot": 500, "seed": 0}


def style() -> None:
    """Set the one theme every render notebook uses: seaborn's paper context on a white grid, a
    colour-blind-safe palette, and constrained layout so titles, labels and legends get room."""
    sns.set_theme(
        context="paper",
        style="whitegrid",
        palette="colorblind",
        rc={
            "figure.constrained_layout.use": True,
            "axes.titlesize": 10,
            "axes.labelsize": 9,
            "xtick.labelsize": 8,
            "ytick.labelsize": 8,
            "legend.fontsize": 8,
            "legend.title_fontsize": 8,
            "figure.titlesize": 11,
            "figure.labelsize": 9,
        },
    )


def check_formats(formats) -> tuple[str, ...]:
    """formats as a tuple, each one the deterministic writer knows; else a one-line error."""
    formats = tuple(formats)
    allowed = ", ".join(_METADATA)
    require(len(formats) >= 1, f"figures.formats is empty; allowed: a list from {allowed}")
    for fmt in formats:
        require(fmt in _METADATA, f"figures.formats has '{fmt}'; allowed: {allowed}")
    return formats


def outside_legend(
    fig: plt.Figure, ax: plt.Axes, title: str | None = None, below: bool = False
) -> None:
    """Move ax's legend off every panel's data: right of the figure, or below it in one row
    (where a wide suptitle would reach over a legend on the right)."""
    handles, labels = ax.get_legend_handles_labels()
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    if below:
        fig.legend(handles, labels, title=title, loc="outside lower center", ncols=len(labels))
    else:
        fig.legend(handles, labels, title=title, loc="outside right upper")


def short_name(model: str) -> str:
    """Label for a model in titles, ticks and legends: the last component of a hub id or folder
    (a full path would run over the next panel)."""
    return model.rstrip("/").split("/")[-1]


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:39] + "…")


def _axis_texts(ax: plt.Axes, axis, name: str) -> list[tuple[str, object]]:
    """Label, offset and drawn tick labels of one axis; none when the axis is not drawn (a
    twin's hidden x axis keeps visible tick labels that are never drawn)."""
    if not (ax.axison and axis.get_visible()):
        return []
    # Only ticks inside the view limits are drawn; the locator may return more.
    lo, hi = sorted(axis.get_view_interval())
    slack = 1e-9 * max(abs(lo), abs(hi), 1.0)
    ticks = [
        (f"{name} tick", label)
        for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks())
        if lo - slack <= tick.get_loc() <= hi + slack
        for label in (tick.label1, tick.label2)
    ]
    return [(f"{name} label", axis.label), (f"{name} offset", axis.get_offset_text()), *ticks]


def _texts(fig: plt.Figure) -> list[tuple[str, object]]:
    """(name, artist) for every text-bearing artist of fig, visible or not."""
    # matplotlib keeps the suplabel and side-title Text objects private; only they give extents.
    named = {id(fig._suptitle): "suptitle", id(fig._supxlabel): "supxlabel",
             id(fig._supylabel): "supylabel"}  # fmt: skip
    found = [(named.get(id(t), "figure text"), t) for t in fig.texts]
    found += [("figure legend", legend) for legend in fig.legends]
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        where = f"axes {k}"
        found += [
            (f"{where} title", ax.title),
            (f"{where} left title", ax._left_title),
            (f"{where} right title", ax._right_title),
            *[(f"{where} text", t) for t in ax.texts],
            *_axis_texts(ax, ax.xaxis, f"{where} x"),
            *_axis_texts(ax, ax.yaxis, f"{where} y"),
        ]
        if ax.get_legend() is not None:
            found.append((f"{where} legend", ax.get_legend()))
    return found


def _shown(artist) -> bool:
    if not artist.get_visible():
        return False
    return not isinstance(artist, Text) or bool(artist.get_text().strip())


def overlapping_text(fig: plt.Figure) -> list[tuple[str, str]]:
    """Draw fig and return the (name, name) pairs of visible text artists whose window extents
    intersect: suptitle and supxlabel, titles, axis labels, offsets, tick labels, texts and
    legends of every axes. A name says where the artist is and, for texts, what it reads."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = []
    for name, artist in _texts(fig):
        if _shown(artist):
            box = artist.get_window_extent(renderer)
            if isinstance(artist, Text):
                name = f"{name} {_short(artist.get_text())}"
            if box.width > 0 and box.height > 0:
                boxes.append((name, box))
    clashes = []
    for (name_a, a), (name_b, b) in combinations(boxes, 2):
        if a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1:
            clashes.append((name_a, name_b))
    return clashes


def save_figure(
    fig: plt.Figure, stem: Path, formats: tuple[str, ...] = ("png", "pdf")
) -> list[Path]:
    """Write fig to stem.<fmt> for each format and close it; returns the written paths.

    Raises PrivleakError naming the figure if any of its texts overlap (see overlapping_text)."""
    stem = Path(stem)
    formats = check_formats(formats)
    clashes = overlapping_text(fig)
    if clashes:
        plt.close(fig)
        more = f" (+{len(clashes) - 1} more pairs)" if len(clashes) > 1 else ""
        raise PrivleakError(
            f"figure {stem.name}: overlapping text: {' and '.join(clashes[0])}{more}"
        )
    stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        target = stem.with_suffix(f".{fmt}")
        fig.savefig(target, format=fmt, metadata=_METADATA[fmt], dpi=DPI, bbox_inches="tight")
        written.append(target)
    plt.close(fig)
    return written


def save_table(
    table: pd.DataFrame,
    stem: Path,
    float_format: str = ".4g",
    *,
    note: str = "",
    csv_only: Sequence[str] = (),
) -> list[Path]:
    """Write table to stem.csv (full precision, every column) and stem.md (rounded, for reading):
    the markdown leaves out the `csv_only` columns (long per-row text) and ends with `note`, a
    caption line, when one is given."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    csv, markdown = stem.with_suffix(".csv"), stem.with_suffix(".md")
    table.to_csv(csv, index=False)
    shown = table.drop(columns=list(csv_only)).to_markdown(index=False, floatfmt=float_format)
    markdown.write_text(shown + "\n" + (f"\n{note}\n" if note else ""))
    return [csv, markdown]
