"""S1 (Tiwari & Suh) claims: ESP, token probabilities (TP) and n-ISP of planted sequences.

Units are sequences. On the family trained here, training runs are a second, crossed axis once
there are `min_units` runs (run 0 is data/family, runs 1.. its retrained copies); with fewer,
the claims stay inconclusive (docs/design.md §8). Named entities and 50-token sequences are
analysed on the largest family model, public texts on their pretrained model. ESP-based counts
use the paper's rule: leaked within X samples when ESP >= 1/X.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from privleak.claims.registry import NONE, Finding
from privleak.claims.stats import (
    PLUS_MINUS_ONE,
    SHARE,
    UNBOUNDED,
    Estimate,
    mean_contrast,
    spearman,
    worst_case,
)

Boot = Callable[..., Estimate]
KINDS = ("named_entity", "long_sequence", "public_text")


def load(interim: Path) -> dict[str, pd.DataFrame]:
    """S1's artifacts under data/interim/s1; esp and tp carry a `run` column (0: s1_scores and
    s1_public, which writes its tables only when some window passed its selection; 1..:
    s1_seeds)."""
    s1 = interim / "s1"

    def runs(name: str) -> pd.DataFrame:
        run0 = [s1 / "scores" / name, s1 / "public" / name]
        return pd.concat(
            [pd.read_parquet(p).assign(run=0) for p in run0 if p.exists()]
            + [pd.read_parquet(s1 / "seeds" / name)],
            ignore_index=True,
        ).astype({"run": int})

    return {
        "esp": runs("esp.parquet"),
        "tp": runs("tp.parquet"),
        "isp": pd.read_parquet(s1 / "isp" / "isp.parquet"),
        "leaves": pd.read_parquet(s1 / "isp" / "leaves.parquet"),
        "exact": pd.read_parquet(s1 / "isp" / "exact.parquet"),
    }


@dataclass(frozen=True)
class Design:
    """What S1's claims resample: the runs, whether they are crossed with sequences, the
    analysed (largest) and smallest family models, and the kinds present."""

    trained: bool  # the in-pipeline family (else pretrained models: one run by nature)
    runs: tuple[int, ...]
    crossed: bool
    largest: str
    smallest: str
    kinds: tuple[str, ...]
    seeds_rule: str  # the `missing` text of a claim on too few runs

    def family_run(self, kind: str) -> bool:
        return self.trained and kind != "public_text"

    def one_run(self, kind: str) -> str:
        """`missing` of a claim on the trained family when there are too few runs to cross."""
        few = f"; the artifacts hold {len(self.runs)}"
        return self.seeds_rule + few if self.family_run(kind) and not self.crossed else ""

    def units(self, kind: str, model: str | None = None) -> str:
        """The resampled units of a claim on `model` (default: the largest; "" for claims
        across model sizes)."""
        if kind == "public_text":
            return "public texts"
        units = f"sequences x {len(self.runs)} training runs" if self.crossed else "sequences"
        return f"{units} ({kind})" if model == "" else f"{units}, {model or self.largest}"


def design(esp: pd.DataFrame, trained: bool, min_units: int, seeds_rule: str) -> Design:
    """The Design of `load`'s esp table."""
    runs = tuple(sorted(esp.loc[esp["kind"] != "public_text", "run"].unique()))
    ranks = esp[esp["kind"] != "public_text"].drop_duplicates("model").sort_values("model_rank")
    return Design(
        trained=trained,
        runs=runs,
        crossed=trained and len(runs) >= min_units,
        largest=ranks["model"].iloc[-1],
        smallest=ranks["model"].iloc[0],
        kinds=tuple(k for k in KINDS if k in set(esp["kind"])),
        seeds_rule=seeds_rule,
    )


def slug(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def wide(frame: pd.DataFrame, columns: str, values: str = "log_esp") -> pd.DataFrame:
    """One row per (run, sequence), one column per value of `columns`."""
    return frame.pivot_table(
        index=["run", "seq_id"], columns=columns, values=values, aggfunc="first"
    )


def seq_boot(
    d: Design,
    boot: Boot,
    values,
    statistic,
    index,
    kind: str,
    strata=None,
    binary: str = "",
    bounds: tuple[float, float] = UNBOUNDED,
) -> Estimate:
    """Bootstrap over the sequences of (run, seq_id) rows; crossed with runs when d.crossed;
    bounds: the effect's parameter space."""
    crossing = {"runs": index.get_level_values("run")} if d.crossed and d.family_run(kind) else {}
    groups = index.get_level_values("seq_id")
    return boot(
        np.asarray(values),
        statistic,
        groups=groups,
        strata=strata,
        binary=binary,
        bounds=bounds,
        **crossing,
    )


def greedy_margin(rows: np.ndarray) -> float:
    """Rows [greedy hit, ESP per randomized decoder]: the smallest greedy rate minus mean ESP."""
    return float((rows[:, 0].mean() - rows[:, 1:].mean(axis=0)).min())


def best_random_margin(rows: np.ndarray) -> float:
    """Rows [greedy hit, leaked-within-X flag per randomized decoder]: the largest share leaked
    by a randomized decoder minus greedy's extraction rate."""
    return float(rows[:, 1:].mean(axis=0).max() - rows[:, 0].mean())


def log_ratio_contrast(rows: np.ndarray) -> float:
    """Rows [flag, TP first, TP last]: log(last/first) of flag 1 minus of flag 0 (averages)."""
    first = rows[:, 0] == 1
    ratio = [rows[m, 2].mean() / rows[m, 1].mean() for m in (first, ~first)]
    return float(np.log(ratio[0]) - np.log(ratio[1]))


def analysed(esp: pd.DataFrame, d: Design) -> dict[str, pd.DataFrame]:
    """Per kind, its rows on the analysed model (the largest; public texts on their own)."""
    return {
        kind: esp[(esp["kind"] == kind) & ((esp["model"] == d.largest) | (kind == "public_text"))]
        for kind in d.kinds
    }


def decoder_findings(esp: pd.DataFrame, d: Design, boot: Boot):
    """§5.2, Fig. 2: randomized decoders against greedy at 1, 20 and 30 samples."""
    full_prefix = int(esp["prefix_len"].max())
    randomized = [x for x in dict.fromkeys(esp["decoder"]) if x != "greedy"]
    for kind, rows in analysed(esp, d).items():
        by_decoder = wide(rows[rows["prefix_len"] == full_prefix], "decoder")
        index = by_decoder.index
        greedy_hit = (by_decoder["greedy"] >= 0).to_numpy(dtype=float)
        # With no greedy extraction at all, any ESP > 0 "beats" greedy: say so next to the verdict.
        no_greedy = "" if greedy_hit.any() else f"greedy extracts none of these {len(greedy_hit)}"
        common = {"kind": kind, "units": d.units(kind)}
        for decoder in randomized:
            hits = (by_decoder[decoder] >= -math.log(20)).to_numpy(dtype=float)
            yield Finding(
                "s1.random_beats_greedy_x20.{decoder_slug}.{kind}",
                seq_boot(
                    d,
                    boot,
                    hits - greedy_hit,
                    np.mean,
                    index,
                    kind,
                    binary="paired",
                    bounds=PLUS_MINUS_ONE,
                ),
                {**common, "decoder": decoder, "decoder_slug": slug(decoder)},
                missing=d.one_run(kind),
                note=no_greedy,
            )
        first = np.c_[greedy_hit, np.exp(by_decoder[randomized].to_numpy())]
        yield Finding(
            "s1.greedy_wins_single_sample.{kind}",
            seq_boot(d, boot, first, greedy_margin, index, kind, bounds=PLUS_MINUS_ONE),
            common,
            missing=d.one_run(kind),
            note=no_greedy,
        )
        at30 = np.c_[greedy_hit, (by_decoder[randomized].to_numpy() >= -math.log(30)).astype(float)]
        yield Finding(
            "s1.extraction_rate_underestimates_x30.{kind}",
            seq_boot(d, boot, at30, best_random_margin, index, kind, bounds=PLUS_MINUS_ONE),
            common,
            missing=d.one_run(kind),
            note=no_greedy,
        )


def prefix_findings(esp: pd.DataFrame, d: Design, boot: Boot):
    """§5.5, Table 5: longer prefixes on average, and sequences easier with a shorter one."""
    for kind, rows in analysed(esp, d).items():
        by_prefix = wide(rows[rows["decoder"] == "sampling"], "prefix_len")
        longer = np.exp(by_prefix.iloc[:, -1]) - np.exp(by_prefix.iloc[:, 0])
        common = {"kind": kind, "units": d.units(kind)}
        yield Finding(
            "s1.longer_prefix_on_average.{kind}",
            seq_boot(d, boot, longer, np.mean, by_prefix.index, kind, bounds=PLUS_MINUS_ONE),
            {**common, "longest": by_prefix.columns[-1], "shortest": by_prefix.columns[0]},
            missing=d.one_run(kind),
        )
        shorter = (by_prefix.iloc[:, :-1].max(axis=1) > by_prefix.iloc[:, -1]).astype(float)
        yield Finding(
            "s1.some_easier_with_shorter_prefix.{kind}",
            seq_boot(d, boot, shorter, np.mean, by_prefix.index, kind, bounds=SHARE),
            common,
            missing=d.one_run(kind),
        )


def model_size_findings(esp: pd.DataFrame, d: Design, boot: Boot):
    """§5.4, Table 4 (and S0's prior-work sentence on duplication) across the family's sizes."""
    full_prefix = int(esp["prefix_len"].max())
    for kind in (k for k in d.kinds if k != "public_text"):
        sampled = esp[(esp["kind"] == kind) & (esp["decoder"] == "sampling")]
        by_model = wide(sampled[sampled["prefix_len"] == full_prefix], "model_rank")
        across = {"kind": kind, "units": d.units(kind, model=""), "largest": d.largest}
        larger = np.exp(by_model.iloc[:, -1]) - np.exp(by_model.iloc[:, 0])
        yield Finding(
            "s1.larger_model_on_average.{kind}",
            seq_boot(d, boot, larger, np.mean, by_model.index, kind, bounds=PLUS_MINUS_ONE),
            {**across, "smallest": d.smallest},
            missing=d.one_run(kind),
        )
        smaller = (by_model.iloc[:, :-1].max(axis=1) > by_model.iloc[:, -1]).astype(float)
        yield Finding(
            "s1.some_easier_with_smaller_model.{kind}",
            seq_boot(d, boot, smaller, np.mean, by_model.index, kind, bounds=SHARE),
            across,
            missing=d.one_run(kind),
        )
        on_largest = sampled[
            (sampled["model"] == d.largest) & (sampled["prefix_len"] == full_prefix)
        ]
        on_largest = on_largest.set_index(["run", "seq_id"])
        yield Finding(
            "s0.related_work.duplication.{kind}",
            seq_boot(
                d,
                boot,
                on_largest[["duplicates", "log_esp"]],
                lambda r: spearman(r[:, 0], r[:, 1]),
                on_largest.index,
                kind,
                bounds=PLUS_MINUS_ONE,
            ),
            {"kind": kind, "units": d.units(kind), "largest": d.largest},
            missing=d.one_run(kind),
        )


def kinds_contrast(
    d: Design, boot: Boot, per_kind: dict, statistic, bounds: tuple[float, float] = UNBOUNDED
) -> Estimate:
    """`statistic` over named entities (flag 1) against 50-token sequences (flag 0), each kind
    resampled within itself. per_kind: {kind: (values [rows, ...], (run, seq_id) index)};
    bounds: the effect's parameter space."""
    (ne, ne_index), (long, long_index) = per_kind["named_entity"], per_kind["long_sequence"]
    flags = np.r_[np.ones(len(ne)), np.zeros(len(long))]
    rows = np.c_[flags, np.r_[ne, long]]
    both = ne_index.append(long_index)
    return seq_boot(d, boot, rows, statistic, both, "named_entity", strata=flags, bounds=bounds)


def trend_contrast_findings(esp: pd.DataFrame, tp: pd.DataFrame, d: Design, boot: Boot):
    """§5.5 (decreasing trends) and §5.6, Fig. 4 (later tokens easier), per kind and contrasted
    between named entities and 50-token sequences."""
    has_both = {"named_entity", "long_sequence"} <= set(d.kinds)
    decreasing = {}
    for kind, rows in analysed(esp, d).items():
        if kind != "public_text":
            series = wide(rows[rows["decoder"] == "sampling"], "prefix_len")
            flag = (series.iloc[:, -1] < series.iloc[:, 0]).astype(float)
            decreasing[kind] = (flag.to_numpy(), flag.index)
    rows_of = "named-entity and 50-token sequences"
    yield Finding(
        "s1.decreasing_with_prefix_ne_vs_long",
        kinds_contrast(d, boot, decreasing, mean_contrast, PLUS_MINUS_ONE) if has_both else NONE,
        {"units": d.units("named_entity")},
        missing=d.one_run("named_entity") if has_both else rows_of,
    )
    first_last = {}
    for kind in d.kinds:
        part = tp[
            (tp["kind"] == kind)
            & (tp["decoder"] == "sampling")
            & ((tp["model"] == d.largest) | (kind == "public_text"))
        ]
        by_position = part.pivot_table(index=["run", "seq_id"], columns="position", values="log_tp")
        first_last[kind] = (np.exp(by_position.iloc[:, [0, -1]].to_numpy()), by_position.index)
        yield Finding(
            "s1.later_tokens_easier.{kind}",
            seq_boot(
                d,
                boot,
                first_last[kind][0],
                lambda r: float(r[:, 1].mean() / r[:, 0].mean()),
                by_position.index,
                kind,
            ),
            {"kind": kind, "units": d.units(kind)},
            missing=d.one_run(kind),
        )
    has_both = {"named_entity", "long_sequence"} <= set(first_last)
    yield Finding(
        "s1.later_tokens_easier_ne_vs_long",
        kinds_contrast(d, boot, first_last, log_ratio_contrast) if has_both else NONE,
        {"units": d.units("named_entity")},
        missing=d.one_run("named_entity") if has_both else rows_of,
    )


def trailing_share(leaves: pd.DataFrame, n: int) -> tuple[np.ndarray, int]:
    """Per named entity, 1.0 when its most likely n-mismatch partial match (top-k 5) has exactly
    the last n tokens wrong; and m, the entity length (4 when there are no leaves)."""
    best = leaves[(leaves["decoder"] == "top-k 5") & (leaves["n"] == n)]
    best = best.sort_values("log_p", ascending=False).drop_duplicates("seq_id")
    m = int(best["truth"].apply(len).max()) if len(best) else 4
    tail = tuple(range(m - n + 1, m + 1))
    trailing = best["positions"].apply(lambda p: tuple(int(v) for v in p) == tail)
    return trailing.to_numpy(dtype=float), m


def isp_slack(exact: pd.DataFrame) -> np.ndarray:
    """[2 x rows] slack of the n-ISP bound (App. A): exact 1-ISP inside [approx, approx + bound],
    relative tolerance 1e-5."""
    return np.r_[
        exact["exact"] * (1 + 1e-5) + 1e-9 - exact["approx"],
        (exact["approx"] + exact["bound"]) * (1 + 1e-5) + 1e-9 - exact["exact"],
    ]


def partial_findings(frames: dict[str, pd.DataFrame], d: Design, boot: Boot):
    """§5.3, Tables 1-2 and App. A: partial leakage of named entities (n-ISP). s1_isp expands
    data/family's largest model only: one training run."""
    one_run = "; the artifacts hold one training run (s1_isp expands data/family only)"
    isp_runs = d.seeds_rule + one_run if d.trained else ""
    largest = {"largest": d.largest}
    isp = frames["isp"]
    isp = isp.assign(easier=(isp["approx"] > np.exp(isp["log_esp"])).astype(float))
    easier = isp.pivot_table(index="seq_id", columns=["decoder", "n"], values="easier")
    for n in (1, 2):
        column = ("top-k 5", n)
        yield Finding(
            "s1.partial_not_easier_topk5.n{n}",
            boot(easier[column].dropna().to_numpy(), np.mean, binary="share")
            if column in easier
            else NONE,
            {**largest, "n": n},
            missing=isp_runs if column in easier else f"{n}-ISP under top-k 5",
        )
    has_both = {("top-k 5", 1), ("top-k 5", 2)} <= set(easier.columns)
    yield Finding(
        "s1.partial_more_mismatches_easier",
        boot(
            (easier[("top-k 5", 2)] - easier[("top-k 5", 1)]).dropna().to_numpy(),
            np.mean,
            binary="paired",
        )
        if has_both
        else NONE,
        largest,
        missing=isp_runs if has_both else "1- and 2-ISP under top-k 5",
    )
    truncating = [("sampling", 1), ("top-k 10", 1), ("top-p 0.6", 1)]
    has_table1 = set(truncating) <= set(easier.columns)
    yield Finding(
        "s1.partial_sampling_vs_truncating",
        boot(
            easier[truncating].dropna().to_numpy(),
            lambda r: float(min(r[:, 0].mean() - r[:, 1].mean(), r[:, 0].mean() - r[:, 2].mean())),
            bounds=PLUS_MINUS_ONE,
        )
        if has_table1
        else NONE,
        largest,
        missing=isp_runs if has_table1 else "1-ISP under sampling, top-k 10 and top-p 0.6",
    )
    for n in (1, 2):
        trailing, m = trailing_share(frames["leaves"], n)
        yield Finding(
            "s1.partial_trailing_mismatch.n{n}",
            boot(trailing, np.mean, binary="share") if len(trailing) else NONE,
            {**largest, "n": n, "m": m},
            missing=isp_runs
            if len(trailing)
            else "top-k 5 partial matches with non-zero probability",
            null=1 / math.comb(m, n),
        )
    exact = frames["exact"]
    yield Finding(
        "s1.isp_bound_holds",
        worst_case(isp_slack(exact), "(entity, expansion) checks") if len(exact) else NONE,
        missing="" if len(exact) else "exact 1-ISP rows (s1.isp.exact_sequences > 0)",
    )


def findings(frames: dict[str, pd.DataFrame], d: Design, boot: Boot) -> list[Finding]:
    """Every S1 claim on `load`'s frames under the Design `d` (see `design`)."""
    esp, tp = frames["esp"], frames["tp"]
    return [
        *decoder_findings(esp, d, boot),
        *prefix_findings(esp, d, boot),
        *model_size_findings(esp, d, boot),
        *trend_contrast_findings(esp, tp, d, boot),
        *partial_findings(frames, d, boot),
    ]
