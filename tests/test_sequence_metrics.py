"""TP, ESP, n-ISP (+ Appendix A bound), leak curves and trend types, on hand-computable models."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from privleak import decoding, models
from privleak.data import synthetic
from privleak.errors import PrivleakError
from privleak.metrics import esp_summary
from privleak.metrics import sequence as seq
from privleak.scoring import continuation_logprobs
from privleak.training import family
from tests.conftest import PeakForward, tiny_llama, tiny_opt, word_tokenizer

# A bigram "model" over 5 tokens: the next-token logits depend only on the current token, so
# every probability below is a product of softmaxes of these rows, computable by hand.
TABLE = torch.tensor(
    [
        [2.0, 1.0, 0.0, -1.0, 0.5],
        [0.0, 3.0, 1.0, 0.0, -2.0],
        [1.0, 1.2, 0.8, 1.1, 0.9],  # no ties: top-k keeps every tie at the k-th value
        [-1.0, 0.0, 2.5, 0.5, 0.0],
        [0.3, 0.2, 0.1, 2.0, 1.5],
    ]
)
DECODERS = {
    "greedy": [decoding.greedy()],
    "sampling": [],
    "top_k2": [decoding.top_k(2)],
    "top_p": [decoding.top_p(0.6)],
    "temp": [decoding.temperature(0.5)],
}


class _Cache:
    def reorder_cache(self, index):  # a bigram needs no past, only the current token
        pass


class Bigram(torch.nn.Module):
    def __init__(self, window: int = 16):
        super().__init__()
        self.config = SimpleNamespace(vocab_size=5, max_position_embeddings=window)
        self.device = torch.device("cpu")

    def forward(self, input_ids, logits_to_keep=0, **_):
        logits = TABLE[input_ids]
        if logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        return SimpleNamespace(logits=logits, past_key_values=_Cache())


def by_hand(row: int, token: int, transform: str) -> float:
    """P(token | row) under a decoder, written out with numpy."""
    z = TABLE[row].double().numpy()
    if transform == "temp":
        z = z / 0.5
    p = np.exp(z - z.max())
    p /= p.sum()
    if transform == "greedy":
        return float(token == int(np.argmax(z)))
    if transform == "top_k2":
        keep = np.argsort(-p)[:2]
        q = np.zeros_like(p)
        q[keep] = p[keep]
        return float(q[token] / q.sum())
    if transform == "top_p":
        order = np.argsort(-p)
        before = np.cumsum(p[order]) - p[order]
        q = np.zeros_like(p)
        q[order[before < 0.6]] = p[order[before < 0.6]]
        return float(q[token] / q.sum())
    return float(p[token])


def esp_by_hand(prefix, suffix, transform) -> float:
    previous, out = prefix[-1], 1.0
    for token in suffix:
        out *= by_hand(previous, token, transform)
        previous = token
    return out


def test_tp_and_esp_match_hand_computation_for_every_decoder():
    prefixes, suffixes = [[0, 1], [3], [4, 4, 2]], [[1, 1, 2], [2, 1], [1]]
    scores = seq.suffix_logprobs(Bigram(), prefixes, suffixes, DECODERS, batch_size=2)
    for name in DECODERS:
        for prefix, suffix, row in zip(prefixes, suffixes, scores[name], strict=True):
            previous = [prefix[-1], *suffix[:-1]]
            want_tp = [by_hand(a, b, name) for a, b in zip(previous, suffix, strict=True)]
            np.testing.assert_allclose(row.exp().numpy(), want_tp, rtol=1e-5, atol=1e-7)
        got_esp = np.exp(seq.log_esp(scores[name]))
        want_esp = [esp_by_hand(p, s, name) for p, s in zip(prefixes, suffixes, strict=True)]
        np.testing.assert_allclose(got_esp, want_esp, rtol=1e-5, atol=1e-9)
    # greedy is an indicator: argmax of rows 1, 3, 2 is 1, 2, 1; seq 0 ends 1 -> 2 (not argmax)
    assert np.exp(seq.log_esp(scores["greedy"])).tolist() == [0.0, 1.0, 1.0]


@pytest.mark.parametrize("batch_size", [1, 3])
def test_batched_all_decoder_pass_equals_scoring_and_per_sequence(tiny_lm, batch_size):
    gen = torch.Generator().manual_seed(0)
    prefixes = [torch.randint(3, 32, (n,), generator=gen).tolist() for n in (5, 9, 3, 7)]
    suffixes = [torch.randint(3, 32, (n,), generator=gen).tolist() for n in (4, 2, 6, 3)]
    batched = seq.suffix_logprobs(tiny_lm, prefixes, suffixes, DECODERS, batch_size=batch_size)
    reference = continuation_logprobs(tiny_lm, prefixes, suffixes, batch_size=1)
    for got, want in zip(batched["sampling"], reference, strict=True):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
    for name in DECODERS:
        for i in range(len(prefixes)):
            alone = seq.suffix_logprobs(
                tiny_lm, [prefixes[i]], [suffixes[i]], {name: DECODERS[name]}
            )
            torch.testing.assert_close(batched[name][i], alone[name][0], atol=1e-4, rtol=0)


def test_exact_isp_brute_force_matches_the_written_out_sum():
    prefix, suffix = [0], [1, 2]
    p = lambda a, b: by_hand(a, b, "sampling")  # noqa: E731
    # 1-ISP of a 2-token suffix: first token wrong and second right, or first right, second wrong.
    want_1 = sum(p(0, a) * p(a, 2) for a in range(5) if a != 1) + p(0, 1) * sum(
        p(1, b) for b in range(5) if b != 2
    )
    want_2 = sum(p(0, a) * p(a, b) for a in range(5) if a != 1 for b in range(5) if b != 2)
    assert seq.exact_isp(Bigram(), prefix, suffix, 1, []) == pytest.approx(want_1, rel=1e-5)
    assert seq.exact_isp(Bigram(), prefix, suffix, 2, []) == pytest.approx(want_2, rel=1e-5)
    assert len(seq.hamming_neighbours([1, 2, 3], 2, 5)) == math.comb(3, 2) * 4**2


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("decoder", ["sampling", "top_k2", "temp"])
def test_full_expansion_is_exact_and_partial_expansion_brackets_exact(n, decoder):
    model = tiny_llama(vocab_size=12, seed=3)
    gen = torch.Generator().manual_seed(1)
    prefixes = [torch.randint(3, 12, (k,), generator=gen).tolist() for k in (4, 6, 5)]
    suffixes = [torch.randint(3, 12, (3,), generator=gen).tolist() for _ in prefixes]
    transforms = {"sampling": [], "top_k2": [decoding.top_k(2)], "temp": [decoding.temperature(2)]}
    exact = np.array(
        [
            seq.exact_isp(model, p, s, n, transforms[decoder])
            for p, s in zip(prefixes, suffixes, strict=True)
        ]
    )
    full = seq.approximate_isp(model, prefixes, suffixes, n, transforms[decoder], expand=11)
    np.testing.assert_allclose(full.approx, exact, rtol=1e-4, atol=1e-9)
    np.testing.assert_allclose(full.bound, 0.0, atol=1e-12)  # float64: no rounding slack
    partial = seq.approximate_isp(model, prefixes, suffixes, n, transforms[decoder], expand=2)
    tol = 1e-5 * exact + 1e-9  # float32 model: the two paths agree to ~1e-7
    assert (partial.approx <= exact + tol).all()
    assert (exact <= partial.approx + partial.bound + tol).all()
    if decoder == "sampling":  # the full distribution has 11 alternatives: something is ignored
        assert (partial.bound > 0).all() and (partial.approx < exact).all()
    for leaves, suffix in zip(partial.leaves, suffixes, strict=True):
        for tokens, _, where in leaves:
            assert len(where) == n
            assert [i for i in range(3) if tokens[i] != suffix[i]] == list(where)
    # The leaves' ESPs sum to the approximation.
    sums = [sum(math.exp(lp) for _, lp, _ in leaves) for leaves in partial.leaves]
    np.testing.assert_allclose(sums, partial.approx, rtol=1e-9)


def test_head_mass_expansion_is_a_lower_bound_and_counts_level_forwards():
    model = tiny_llama(vocab_size=12, seed=4)
    prefixes, suffixes = [[3, 4, 5, 6]], [[7, 8, 9, 10]]
    exact = seq.exact_isp(model, prefixes[0], suffixes[0], 1, [])
    head = seq.approximate_isp(model, prefixes, suffixes, 1, [], expand=11, head_mass=0.5)
    assert head.approx[0] <= exact + 1e-9 <= head.approx[0] + head.bound[0] + 2e-9
    one = seq.approximate_isp(model, prefixes, suffixes, 1, [], expand=1)
    # prefill 4 + level sizes: 1 correct + 1 alt, then 1 correct + 2 erring, then 1 + 3 (last
    # level is not forwarded; the all-correct path dies at the last level for n=1).
    assert one.counter.tokens == 4 + 2 + 3 + 4


@pytest.mark.parametrize("head_mass", [None, 0.8])
def test_chunked_expansion_equals_unchunked_and_bounds_the_forwarded_batch(head_mass):
    model = tiny_llama(vocab_size=12, seed=7)
    gen = torch.Generator().manual_seed(2)
    prefixes = [torch.randint(3, 12, (k,), generator=gen).tolist() for k in (5, 3, 6)]
    suffixes = [torch.randint(3, 12, (4,), generator=gen).tolist() for _ in prefixes]
    runs = {}
    for max_nodes in (10**6, 5, 1):
        proxy = PeakForward(model)
        runs[max_nodes] = (
            proxy,
            # One sequence per prefill (batch_size 1), so every forward wider than one row is the
            # tree's and must respect max_nodes.
            seq.approximate_isp(
                proxy,
                prefixes,
                suffixes,
                2,
                [],
                expand=3,
                head_mass=head_mass,
                max_nodes=max_nodes,
                batch_size=1,
            ),
        )
    whole = runs[10**6][1]
    assert runs[10**6][0].rows > 5  # the unchunked tree does exceed the budget
    for max_nodes in (5, 1):
        proxy, chunked = runs[max_nodes]
        assert proxy.rows <= max_nodes and proxy.area <= max_nodes * (6 + 4)
        # Same tree; a float32 forward's last bits depend on the batch it runs in.
        np.testing.assert_allclose(chunked.approx, whole.approx, rtol=1e-6, atol=0)
        np.testing.assert_allclose(chunked.bound, whole.bound, rtol=1e-6, atol=1e-12)
        assert chunked.counter.tokens == whole.counter.tokens
        for got, want in zip(chunked.leaves, whole.leaves, strict=True):
            assert [(t, w) for t, _, w in got] == [(t, w) for t, _, w in want]
            np.testing.assert_allclose(
                [lp for _, lp, _ in got], [lp for _, lp, _ in want], rtol=1e-6
            )


def test_padded_vocabulary_rows_get_zero_probability_and_are_never_expanded():
    model = tiny_opt(vocab_size=40, seed=8)
    models.mark_real_vocab(model, 30)
    prefix = [3, 9, 14]
    table = {**DECODERS, "top_k2": [decoding.top_k(2)]}
    scores = seq.suffix_logprobs(model, [prefix] * 40, [[t] for t in range(40)], table)
    for name in table:
        probs = torch.cat(scores[name]).exp()
        assert probs[30:].eq(0).all()
        assert float(probs[:30].sum()) == pytest.approx(1.0, abs=1e-5)
    # Without the mark the padded rows take mass: the mask is what zeroes them.
    del model.privleak_real_vocab
    unmarked = seq.suffix_logprobs(model, [prefix] * 40, [[t] for t in range(40)], DECODERS)
    assert float(torch.cat(unmarked["sampling"]).exp()[30:].sum()) > 0
    models.mark_real_vocab(model, 30)
    suffixes = [[4, 20, 7], [29, 5, 11]]
    for n in (1, 2):
        full = seq.approximate_isp(model, [prefix] * 2, suffixes, n, [], expand=39)
        assert all(max(tokens) < 30 for leaves in full.leaves for tokens, _, _ in leaves)
        exact = [seq.exact_isp(model, prefix, s, n, []) for s in suffixes]
        np.testing.assert_allclose(full.approx, exact, rtol=1e-4)
        np.testing.assert_allclose(full.bound, 0.0, atol=1e-12)


def test_leak_curves_by_hand():
    log_esps = np.array([0.0, math.log(0.5), math.log(0.1), -np.inf])
    assert esp_summary.leaked_paper(log_esps, [1, 3, 10, 11]).tolist() == [0.25, 0.5, 0.75, 0.75]
    want_2 = np.mean([1.0, 1 - 0.5**2, 1 - 0.9**2, 0.0])
    assert esp_summary.leaked_expected(log_esps, [1, 2]) == pytest.approx([0.4, want_2])
    greedy = np.array([0.0, -np.inf, 0.0])  # greedy ESPs are indicators: a flat curve
    assert set(esp_summary.leaked_paper(greedy, range(1, 101)).round(6)) == {round(2 / 3, 6)}
    np.testing.assert_allclose(esp_summary.leaked_expected(greedy, range(1, 101)), 2 / 3)


def test_monte_carlo_with_the_real_sampler_matches_the_closed_form():
    model = tiny_llama(vocab_size=8, seed=5)
    prefix, suffix = [3, 4, 5], None
    transforms = [decoding.top_k(3)]
    runs = 3000
    out = decoding.decode(model, [prefix] * runs, max_new_tokens=2, transforms=transforms, seed=7)
    # Score the most frequent sample so its ESP is not tiny.
    values, counts = out.tokens.unique(dim=0, return_counts=True)
    suffix = values[counts.argmax()].tolist()
    log_esp = seq.log_esp(seq.suffix_logprobs(model, [prefix], [suffix], {"k": transforms})["k"])
    esp = math.exp(log_esp[0])
    hits = (out.tokens == torch.tensor(suffix)).all(-1).float()
    assert abs(hits.mean().item() - esp) < 4 * math.sqrt(esp * (1 - esp) / runs)
    # Leaked within X samples: averaged over disjoint blocks of X samples.
    x = 5
    blocks = hits[: runs // x * x].view(-1, x).amax(-1)
    expected = esp_summary.leaked_expected(log_esp, [x])[0]
    assert abs(blocks.mean().item() - expected) < 4 * math.sqrt(
        expected * (1 - expected) / len(blocks)
    )


@pytest.mark.parametrize(
    ("series", "labels"),
    [
        ([5, 4, 3, 2], ("Straight Dec",)),
        ([5, 3.5, 4, 3], ("Straight Dec",)),  # not monotone, but no interior max/min
        ([5, 6, 3], ("Inverted-U Dec",)),
        ([5, 1, 3], ("U-Shaped Dec",)),
        ([1, 2, 3], ("Straight Inc",)),
        ([2, 0, 3], ("U-Shaped Inc",)),
        ([1, 5, 3], ("Inverted-U Inc",)),
        ([2, 0, 9, 3], ("U-Shaped Inc", "Inverted-U Inc")),
        ([4, 9, 0, 3], ("U-Shaped Dec", "Inverted-U Dec")),
        ([-np.inf, -3.0, -np.inf], (esp_summary.FLAT,)),
        ([-np.inf, -3.0, -1.0], ("Straight Inc",)),
    ],
)
def test_trend_types_on_constructed_series(series, labels):
    assert esp_summary.classify_trend(series) == labels


def test_easier_with_smaller():
    assert esp_summary.easier_with_smaller([1, 3, 2]) and esp_summary.easier_with_smaller([3, 2, 1])
    assert not esp_summary.easier_with_smaller([1, 2, 3]) and not esp_summary.easier_with_smaller(
        [2, 2]
    )


def test_decoder_specs_build_the_modified_distributions():
    table = seq.decoder_table(
        [
            {"name": "g", "kind": "greedy"},
            {"name": "k", "kind": "top_k", "value": 2},
            {"name": "t", "kind": "temperature", "value": 0.5},
        ]
    )
    logits = TABLE[:1]
    assert torch.isfinite(decoding.sampling_logprobs(logits, table["g"])).sum() == 1
    assert torch.isfinite(decoding.sampling_logprobs(logits, table["k"])).sum() == 2


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: seq.suffix_logprobs(Bigram(8), [[1] * 6], [[2] * 3], DECODERS), "exceed"),
        (lambda: seq.suffix_logprobs(Bigram(8), [[1] * 9], [[2]], DECODERS), "window of 8"),
        (lambda: seq.suffix_logprobs(Bigram(), [], [], DECODERS), "sequence set is empty"),
        (lambda: seq.approximate_isp(Bigram(), [[1]], [[2, 3]], 3, [], expand=2), "n = 3"),
        (lambda: seq.exact_isp(Bigram(), [1], [2, 3], 3, []), "exceeds the suffix length"),
        (lambda: seq.approximate_isp(Bigram(), [[1]], [[2, 3]], 1, [], expand=0), "expand"),
        (
            lambda: seq.approximate_isp(Bigram(), [[1]], [[2, 3]], 1, [], expand=2, max_nodes=0),
            "max_nodes",
        ),
        (lambda: seq.decoder_transforms({"name": "k", "kind": "top_k", "value": 0}), "top_k"),
        (lambda: seq.decoder_transforms({"name": "p", "kind": "top_p", "value": 1.5}), "top_p"),
        (lambda: seq.decoder_transforms({"name": "p", "kind": "top_p", "value": 0}), "top_p"),
        (lambda: seq.decoder_transforms({"name": "t", "kind": "temperature", "value": 0}), "> 0"),
        (lambda: seq.decoder_transforms({"name": "x", "kind": "beam"}), "allowed: greedy"),
        (lambda: esp_summary.leaked_paper(np.array([]), [1]), "empty"),
        (lambda: esp_summary.classify_trend([1.0]), ">= 2 points"),
    ],
)
def test_bad_input_is_a_one_line_error(call, match):
    with pytest.raises(PrivleakError, match=match) as info:
        call()
    assert "\n" not in str(info.value)


def test_hamming_neighbours_are_exactly_distance_n():
    for g in seq.hamming_neighbours([0, 1, 2], 2, 3):
        assert sum(a != b for a, b in zip(g, [0, 1, 2], strict=True)) == 2
    assert len(set(seq.hamming_neighbours([0, 1, 2], 1, 3))) == 3 * 2
    assert list(itertools.islice(seq.hamming_neighbours([0], 1, 3), 5)) == [(1,), (2,)]


def test_split_tokens_cuts_at_the_character_boundary():
    tokenizer = word_tokenizer(add_bos=False)
    ids = tokenizer("the cat sat on the mat", add_special_tokens=False)["input_ids"]
    split = seq.split_tokens(tokenizer, "the cat sat ", "on the mat", 2, 2)
    assert split == (ids[1:3], ids[3:5])
    assert seq.split_tokens(tokenizer, "the cat sat ", "on the mat", 4, 2) is None
    assert seq.split_tokens(tokenizer, "the cat sat ", "on the mat", 3, 4) is None


def test_planted_sequences_and_byte_level_split_on_a_generated_corpus():
    options = {"doc_words": 30, "duplication_counts": [1, 2], "sequences_per_count": 2,
               "ne_prefix_words": 20, "long_prefix_words": 20, "long_suffix_words": 20}  # fmt: skip
    records, secrets = synthetic.generate("pretrain", 6, 0, options)
    rows = seq.planted_sequences(records, secrets)
    assert len(rows) == 2 * 2 * 2 and len({r["seq_id"] for r in rows}) == len(rows)
    corpus = " ".join(r["text"] for r in records)
    for row in rows:
        assert corpus.count(row["prefix"] + row["suffix"]) == row["duplicates"]
        secret = next(x["text"] for x in secrets if x.get("seq_id") == row["seq_id"])
        assert row["suffix"] == secret + ("." if row["kind"] == "named_entity" else "")
    tokenizer = family.train_tokenizer([r["text"] for r in records], 400)
    row = next(r for r in rows if r["kind"] == "long_sequence")
    prefix_ids, suffix_ids = seq.split_tokens(tokenizer, row["prefix"], row["suffix"], 5, 3)
    # The suffix's first token carries the prefix's trailing space (byte-level "Ġword").
    assert tokenizer.decode(suffix_ids).startswith(" " + row["suffix"].split()[0][:1])
    assert (row["prefix"] + row["suffix"]).find(tokenizer.decode(prefix_ids + suffix_ids)) >= 0
    with pytest.raises(PrivleakError, match="out of sync"):
        seq.planted_sequences(records, [{**secrets[0], "start": secrets[0]["start"] + 1}])
    with pytest.raises(PrivleakError, match="empty"):
        seq.planted_sequences(records, [])


def test_prefix_length_rows_cut_prefixes_and_sum_tps_to_esp():
    model = tiny_llama(vocab_size=12, seed=6)
    sequences = [
        {
            "prefix_ids": [4, 5, 6, 7],
            "suffix_ids": [8, 9],
            "seq_id": "a",
            "kind": "k",
            "duplicates": 1,
        },
        {
            "prefix_ids": [9, 8, 7, 6],
            "suffix_ids": [5, 4],
            "seq_id": "b",
            "kind": "k",
            "duplicates": 2,
        },
    ]
    decoders = seq.decoder_table([{"name": "sampling", "kind": "sampling"}])
    esp_rows, tp_rows = seq.prefix_length_rows(
        model, sequences, [2, 4], decoders, model_fields={"model": "m"}, tp_prefix_len=4
    )
    assert [(r["seq_id"], r["prefix_len"]) for r in esp_rows] == [
        ("a", 2),
        ("a", 4),
        ("b", 2),
        ("b", 4),
    ]
    (short,) = continuation_logprobs(model, [[6, 7]], [[8, 9]])
    assert esp_rows[0]["log_esp"] == pytest.approx(float(short.sum()), abs=1e-5)
    assert len(tp_rows) == 4 and {r["model"] for r in tp_rows} == {"m"}
    for row in (r for r in esp_rows if r["prefix_len"] == 4):
        tps = [t["log_tp"] for t in tp_rows if t["seq_id"] == row["seq_id"]]
        assert sum(tps) == pytest.approx(row["log_esp"], abs=1e-5)
