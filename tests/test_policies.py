"""S3 policy functions: keyword and classifier policies flag words, redaction masks runs of
flagged words, leaks is any flag. Tiny vocabularies so every flag is known in advance."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from tokenizers import processors

from privleak.classifier_policies import (
    SEQUENCE_POLICY_FILE,
    ClassifierPolicy,
    SequenceClassifierPolicy,
)
from privleak.data.multidogo_keywords import MULTIDOGO_KEYWORDS
from privleak.errors import PrivleakError
from privleak.policies import (
    NONE,
    KeywordPolicy,
    LabelsKept,
    label_words,
    leaks,
    leaks_many,
    redact,
    redact_for_domain,
    redact_own_domains,
    word_spans,
)
from privleak.training.family import train_tokenizer

KEYWORDS = {"AIRLINE": ["flight", "seat", "boarding pass", "drive-thru"], "MEDIA": ["episode"]}
# A toy world: three domains with three words each, plus filler words every domain uses.
VOCAB = {
    "AIRLINE": ["flight", "seat", "gate"],
    "MEDIA": ["episode", "channel", "stream"],
    "INSURANCE": ["claim", "premium", "adjuster"],
}
FILLER = ["please", "help", "with", "my", "the", "today"]
WORDS = [w for words in VOCAB.values() for w in words] + FILLER


def bag_of_words(texts: list[str]) -> np.ndarray:
    """Unit-norm word counts over WORDS [n, 15]; unknown words count for nothing."""
    vectors = np.zeros((len(texts), len(WORDS)))
    for i, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            if word in WORDS:
                vectors[i, WORDS.index(word)] += 1
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def toy_corpus(domains=tuple(VOCAB)) -> tuple[list[str], list[str]]:
    """Per domain, 12 texts: three filler words, then one of the domain's words, repeated."""
    texts, labels = [], []
    for domain in domains:
        for i in range(12):
            fill = [FILLER[(i + k) % len(FILLER)] for k in range(3)]
            words = [*fill, VOCAB[domain][i % 3]] * 3
            texts.append(" ".join(words))
            labels.append(domain)
    return texts, labels


@pytest.fixture(scope="module")
def per_word():
    """Window 1: each word is classified on its own."""
    texts, labels = toy_corpus()
    return ClassifierPolicy.fit(texts, labels, bag_of_words, window=1, stride=1)


@pytest.fixture(scope="module")
def windowed():
    texts, labels = toy_corpus()
    return ClassifierPolicy.fit(texts, labels, bag_of_words, window=3, stride=1)


def test_words_are_word_character_runs():
    assert word_spans("Hi, it's 4C!") == [(0, 2), (4, 6), (7, 8), (9, 11)]
    assert word_spans(" ... ") == []


# --- keyword policy ----------------------------------------------------------------------------


def test_keywords_flag_whole_words_case_insensitively_and_every_word_of_a_phrase():
    policy = KeywordPolicy(KEYWORDS)
    assert policy.domains == ("AIRLINE", "MEDIA")
    text = "Your Boarding-Pass: SEAT 4C (seats); boarding now, pass later."
    # Your Boarding Pass SEAT 4C seats boarding now pass later
    assert policy.flags(text, "AIRLINE") == [0, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    assert policy.flags(text, "MEDIA") == [False] * 10
    assert policy.flags("Drive thru or drive-thru?", "AIRLINE") == [1, 1, 0, 1, 1]
    assert policy.flags("", "AIRLINE") == []
    assert policy.flags_many(["an episode", "a seat"], "MEDIA") == [[0, 1], [0, 0]]


def test_overlapping_keywords_flag_their_union():
    policy = KeywordPolicy({"AIRLINE": ["pass", "boarding pass", "pass holder"]})
    assert policy.flags("boarding pass holder", "AIRLINE") == [1, 1, 1]
    assert policy.flags("boarding the pass", "AIRLINE") == [0, 0, 1]


@pytest.mark.parametrize(
    "keywords, message",
    [
        ({"AIRLINE": ["flight"], "MEDIA": []}, "the keyword list of domain MEDIA is empty"),
        ({"MEDIA": "episode"}, "the keywords of domain MEDIA must be a list of strings"),
        ({"MEDIA": ["episode", "--"]}, "keyword '--' of domain MEDIA has no word in it"),
        ({}, "keyword policy needs a non-empty mapping of domain to keywords; got {}"),
        ({"": ["x"]}, "keyword policy domains must be non-empty strings; got ''"),
    ],
)
def test_bad_keywords_are_one_line(keywords, message):
    with pytest.raises(PrivleakError, match=re.escape(message)):
        KeywordPolicy(keywords)


def test_an_unknown_domain_names_the_allowed_ones():
    message = "keyword policy has no domain 'HOTEL'; allowed: AIRLINE, MEDIA"
    with pytest.raises(PrivleakError, match=re.escape(message)):
        KeywordPolicy(KEYWORDS).flags("a seat", "HOTEL")
    with pytest.raises(PrivleakError, match=re.escape(message)):
        KeywordPolicy(KEYWORDS).flags_many([], "HOTEL")


# --- classifier policy -------------------------------------------------------------------------


def test_a_word_window_flags_the_words_of_its_domain(per_word):
    assert per_word.domains == ("AIRLINE", "INSURANCE", "MEDIA")
    text = "Please help with the flight and the claim."
    assert per_word.flags(text, "AIRLINE") == [0, 0, 0, 0, 1, 0, 0, 0]
    assert per_word.flags(text, "INSURANCE") == [0, 0, 0, 0, 0, 0, 0, 1]
    assert per_word.flags(text, "MEDIA") == [False] * 8
    # Filler words read as any domain: near-uniform probabilities; domain words are confident.
    probabilities = per_word.probabilities(["the", "flight", "and"])
    assert np.allclose(probabilities[0], 1 / 3, atol=0.05)
    assert probabilities[1, 0] > 0.9
    assert np.allclose(probabilities.sum(axis=1), 1)


def test_a_word_takes_the_largest_probability_of_its_windows(windowed):
    text = "the the flight the the the claim"
    # Windows of 3: every word within two words of "flight" shares a window with it.
    assert windowed.flags(text, "AIRLINE") == [1, 1, 1, 1, 1, 0, 0]
    assert windowed.flags(text, "INSURANCE") == [0, 0, 0, 0, 1, 1, 1]
    windows = ["the the flight", "the flight the", "flight the the", "the the the", "the the claim"]
    airline = windowed.probabilities(windows)[:, 0]
    best = [max(airline[max(0, i - 2) : i + 1]) for i in range(7)]
    assert windowed.flags(text, "AIRLINE") == [p > 0.5 for p in best]


def test_windows_stay_within_one_utterance(windowed):
    # "flight" ends the first line: on one line its windows would flag the next two words, but
    # windows are drawn per utterance (line), as the official code draws its n-grams.
    assert windowed.flags("the the flight the the the claim", "AIRLINE") == [1, 1, 1, 1, 1, 0, 0]
    assert windowed.flags("the the flight\nthe the the claim", "AIRLINE") == [1, 1, 1, 0, 0, 0, 0]
    # A line shorter than the window is one window: "the" shares it with "flight".
    flags = windowed.flags("the the the\nthe flight\nthe the the", "AIRLINE")
    assert flags == [0, 0, 0, 1, 1, 0, 0, 0]


def test_a_text_shorter_than_the_window_is_one_window(windowed):
    assert windowed.flags("flight", "AIRLINE") == [True]
    assert windowed.flags("... !", "AIRLINE") == []


def test_a_higher_threshold_flags_a_subset(windowed):
    texts = ["the the flight the the the claim", "please stream my episode today", "help"]

    def flagged_words(threshold: float) -> set[tuple[str, int, int]]:
        data = {**windowed.to_dict(), "threshold": threshold}
        policy = ClassifierPolicy.from_dict(data, bag_of_words)
        return {
            (domain, t, i)
            for domain in policy.domains
            for t, flags in enumerate(policy.flags_many(texts, domain))
            for i, flag in enumerate(flags)
            if flag
        }

    flagged = [flagged_words(threshold) for threshold in (0.2, 0.4, 0.6, 0.8, 0.95)]
    for lower, higher in zip(flagged, flagged[1:], strict=False):
        assert higher <= lower
    assert len(flagged[-1]) < len(flagged[0])


def test_probabilities_are_scikit_learns(windowed):
    texts, labels = toy_corpus()
    spans = [word_spans(t) for t in texts]
    windows = [
        t[s[a][0] : s[a + 2][1]]
        for t, s in zip(texts, spans, strict=True)
        for a in range(len(s) - 2)
    ]
    window_labels = [lab for lab, s in zip(labels, spans, strict=True) for _ in range(len(s) - 2)]
    model = LogisticRegression(C=10.0, max_iter=1000, class_weight="balanced")
    model.fit(bag_of_words(windows), window_labels)
    probe = ["the flight", "episode claim", "please help", "premium premium gate"]
    expected = model.predict_proba(bag_of_words(probe))
    assert np.allclose(windowed.probabilities(probe), expected, atol=1e-6)


def test_two_domains_use_scikit_learns_single_logit():
    texts, labels = toy_corpus(("MEDIA", "AIRLINE"))
    # Filler words read as either domain (p ~ 0.5), so flag only confident words.
    policy = ClassifierPolicy.fit(texts, labels, bag_of_words, window=1, stride=1, threshold=0.7)
    assert policy.coef.shape == (1, len(WORDS))
    model = LogisticRegression(C=10.0, max_iter=1000, class_weight="balanced")
    model.fit(bag_of_words([w for t in texts for w in t.split()]), np.repeat(labels, 12))
    probe = ["flight", "episode", "the", "seat episode"]
    assert np.allclose(policy.probabilities(probe), model.predict_proba(bag_of_words(probe)))
    assert policy.flags("the seat and the episode", "AIRLINE") == [0, 1, 0, 0, 0]


def test_saved_policy_flags_identically(windowed):
    saved = json.loads(json.dumps(windowed.to_dict()))
    loaded = ClassifierPolicy.from_dict(saved, bag_of_words)
    texts = ["the the flight the the the claim", "stream the episode", "help me with my premium"]
    for domain in windowed.domains:
        assert loaded.flags_many(texts, domain) == windowed.flags_many(texts, domain)
    assert np.array_equal(loaded.probabilities(texts), windowed.probabilities(texts))


def test_flags_many_embeds_all_windows_at_once(windowed):
    calls = []

    def counting(texts):
        calls.append(len(texts))
        return bag_of_words(texts)

    policy = ClassifierPolicy.from_dict(windowed.to_dict(), counting)
    texts = ["the the flight the the the claim", "a seat", "", "stream the episode today"]
    assert policy.flags_many(texts, "AIRLINE") == [windowed.flags(t, "AIRLINE") for t in texts]
    assert calls == [5 + 1 + 0 + 2]
    assert policy.flags_many([], "AIRLINE") == [] and calls == [8]
    # Every domain at once costs one embed call too.
    by_domain = policy.flags_by_domain(texts)
    assert by_domain == {d: windowed.flags_many(texts, d) for d in windowed.domains}
    assert calls == [8, 8]
    assert list(policy.flags_by_domain(texts, ["MEDIA"])) == ["MEDIA"]


def public_world(with_public: bool) -> ClassifierPolicy:
    """AIRLINE texts say "please", MEDIA texts "help", each with a domain word; public texts
    (no private domain) say both. Per word (window 1)."""
    airline = [f"please {w}" for w in VOCAB["AIRLINE"]] * 4
    media = [f"help {w}" for w in VOCAB["MEDIA"]] * 4
    public = ["please help"] * 12 if with_public else []
    labels = ["AIRLINE"] * 12 + ["MEDIA"] * 12
    return ClassifierPolicy.fit(
        airline + media, labels, bag_of_words, public=public, window=1, stride=1, threshold=0.8
    )


def test_a_public_class_stops_shared_phrasing_from_reading_as_a_domain():
    text = "please flight help episode"
    # Without public text, "please" only ever occurs in AIRLINE windows: it reads as AIRLINE.
    alone = public_world(with_public=False)
    assert alone.flags(text, "AIRLINE") == [True, True, False, False]
    assert alone.flags(text, "MEDIA") == [False, False, True, True]
    # Public dialogs say "please" and "help" as often: only the domain words stay flagged.
    with_public = public_world(with_public=True)
    assert with_public.flags(text, "AIRLINE") == [False, True, False, False]
    assert with_public.flags(text, "MEDIA") == [False, False, False, True]
    assert with_public.domains == ("AIRLINE", "MEDIA")
    assert with_public.classes == ("AIRLINE", "MEDIA", NONE)
    # "please" splits between AIRLINE and NONE (12 windows each, balanced weights).
    please = with_public.probabilities(["please"])[0]
    assert please[0] == pytest.approx(please[2], abs=0.05) and please[1] < 0.05
    loaded = ClassifierPolicy.from_dict(json.loads(json.dumps(with_public.to_dict())), bag_of_words)
    assert loaded.classes == with_public.classes
    assert loaded.flags(text, "AIRLINE") == with_public.flags(text, "AIRLINE")
    with pytest.raises(PrivleakError, match="never trained on domain 'none'; allowed: AIRLINE"):
        with_public.flags(text, NONE)
    with pytest.raises(PrivleakError, match="'none' is the class of public text, not a domain"):
        ClassifierPolicy.fit(["please flight"] * 2, ["AIRLINE", NONE], bag_of_words)


def test_each_distinct_window_is_embedded_once(per_word):
    calls = []

    def counting(texts):
        calls.append(sorted(texts))
        return bag_of_words(texts)

    policy = ClassifierPolicy.from_dict(per_word.to_dict(), counting)
    texts = ["the flight the", "the flight"]
    assert policy.flags_many(texts, "AIRLINE") == per_word.flags_many(texts, "AIRLINE")
    assert calls == [["flight", "the"]]


def test_keyword_flags_by_domain_are_flags_many():
    policy = KeywordPolicy(KEYWORDS)
    texts = ["a seat and an episode", ""]
    assert policy.flags_by_domain(texts) == {
        "AIRLINE": [[0, 1, 0, 0, 0], []],
        "MEDIA": [[0, 0, 0, 0, 1], []],
    }
    with pytest.raises(PrivleakError, match="keyword policy has no domain 'HOTEL'"):
        policy.flags_by_domain(texts, ["HOTEL"])


@pytest.mark.parametrize(
    "options, message",
    [
        ({"threshold": 1.0}, "classifier policy threshold must be a number in (0, 1); got 1.0"),
        ({"threshold": 0}, "classifier policy threshold must be a number in (0, 1); got 0"),
        ({"threshold": True}, "threshold must be a number in (0, 1); got True"),
        ({"window": 0}, "classifier policy window must be an integer >= 1 (words); got 0"),
        ({"stride": 0}, "classifier policy stride must be an integer in [1, window = 12]; got 0"),
        ({"window": 3, "stride": 4}, "stride must be an integer in [1, window = 3]; got 4"),
    ],
)
def test_bad_settings_are_one_line(options, message):
    texts, labels = toy_corpus()
    with pytest.raises(PrivleakError, match=re.escape(message)):
        ClassifierPolicy.fit(texts, labels, bag_of_words, **options)


def test_bad_training_data_and_lookups_are_one_line(per_word):
    texts, labels = toy_corpus()
    cases = [
        (
            lambda: ClassifierPolicy.fit(texts[:12], labels[:12], bag_of_words),
            "classifier policy needs texts of at least 2 classes, one a domain, to train; got "
            "['AIRLINE']",
        ),
        (
            # A domain whose texts have no word gives no window to learn from.
            lambda: ClassifierPolicy.fit(["flight seat", "--"], ["AIRLINE", "MEDIA"], bag_of_words),
            "needs texts of at least 2 classes, one a domain, to train; got ['AIRLINE']",
        ),
        (
            lambda: ClassifierPolicy.fit(texts, labels[:5], bag_of_words),
            "classifier policy fit: 36 texts but 5 domain labels",
        ),
        (
            lambda: per_word.flags("a seat", "FINANCE"),
            "classifier policy was never trained on domain 'FINANCE'; "
            "allowed: AIRLINE, INSURANCE, MEDIA",
        ),
        (
            lambda: ClassifierPolicy.from_dict(
                per_word.to_dict(), lambda t: np.ones((len(t), 4))
            ).flags("a seat", "AIRLINE"),
            "embed gives 4-dim vectors but the classifier policy was trained on 15-dim ones",
        ),
        (
            lambda: ClassifierPolicy.from_dict(per_word.to_dict(), lambda t: np.ones(len(t))).flags(
                "a seat", "AIRLINE"
            ),
            "embed returned an array of shape (2,) for 2 texts; expected (2, dim)",
        ),
        (
            lambda: ClassifierPolicy.from_dict(
                {k: v for k, v in per_word.to_dict().items() if k != "coef"}, bag_of_words
            ),
            "classifier policy lacks 'coef'; it needs classes, coef, intercept, window, stride, "
            "threshold",
        ),
        (
            lambda: ClassifierPolicy.from_dict(
                {**per_word.to_dict(), "classes": ["AIRLINE", "MEDIA"]}, bag_of_words
            ),
            "classifier policy coef (3, 15) and intercept (3,) do not fit 2 classes; "
            "expected (1, dim) and (1,)",
        ),
        (
            lambda: ClassifierPolicy.from_dict(
                {**per_word.to_dict(), "classes": ["AIRLINE"]}, bag_of_words
            ),
            "classifier policy needs at least 2 distinct classes, one of them a domain; got "
            "['AIRLINE']",
        ),
    ]
    for call, message in cases:
        with pytest.raises(PrivleakError, match=re.escape(message)) as caught:
            call()
        assert "\n" not in str(caught.value)


# --- sequence classifier policy ----------------------------------------------------------------

# Public text: the filler words alone, sensitive for no domain.
PUBLIC = [" ".join(FILLER[i:] + FILLER[:i]) for i in range(len(FILLER))] * 2
FIT = {"window": 2, "stride": 1, "threshold": 0.9, "epochs": 25, "batch_size": 16}
FIT |= {"learning_rate": 5e-3, "seed": 0, "max_windows": 100}


def _save_tiny_roberta(folder: Path, texts: list[str]) -> str:
    """A random 1-layer RoBERTa masked LM (the hub's roberta-base is one) and a byte-level BPE
    tokenizer wrapping each text in <s> ... </s> as RoBERTa's does, saved into folder. No
    dropout: 25 epochs then reach confident flags whatever the seed (0 to 7 tried)."""
    from transformers import RobertaConfig, RobertaForMaskedLM

    tokenizer = train_tokenizer(texts, vocab_size=400)
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)]
    )
    config = RobertaConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
                           type_vocab_size=1, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # fmt: skip
    torch.manual_seed(0)
    RobertaForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def one_torch_thread():
    """A tiny model gains nothing from a second thread, and on busy shared cores OpenMP's
    waiting threads slow its many small steps up to ~70x (1 s to 70 s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_roberta(tmp_path_factory, one_torch_thread) -> str:
    texts, _ = toy_corpus(("AIRLINE", "MEDIA"))
    return _save_tiny_roberta(tmp_path_factory.mktemp("roberta"), texts + PUBLIC)


@pytest.fixture(scope="module")
def sequence(tiny_roberta) -> SequenceClassifierPolicy:
    texts, labels = toy_corpus(("MEDIA", "AIRLINE"))
    return SequenceClassifierPolicy.fit(texts, labels, tiny_roberta, public=PUBLIC, **FIT)


def test_a_fine_tuned_sequence_classifier_flags_the_words_of_its_domain(sequence):
    # The domains sorted (MEDIA's texts came first), then NONE.
    assert sequence.classes == ("AIRLINE", "MEDIA", NONE)
    assert sequence.domains == ("AIRLINE", "MEDIA")
    assert len(sequence.losses) == FIT["epochs"] and sequence.losses[-1] < sequence.losses[0] - 0.2
    # Windows of 2 words: a domain word flags its neighbours too; filler alone flags nothing.
    text = "please help with my flight today, the stream please"
    assert sequence.flags(text, "AIRLINE") == [0, 0, 0, 1, 1, 1, 0, 0, 0]
    assert sequence.flags(text, "MEDIA") == [0, 0, 0, 0, 0, 0, 1, 1, 1]
    probabilities = sequence.probabilities(["please help", "my flight", "the stream"])
    assert probabilities.shape == (3, 3) and np.allclose(probabilities.sum(axis=1), 1)
    assert probabilities[0, 2] == probabilities[0].max()
    assert probabilities[1, 0] > 0.9 and probabilities[2, 1] > 0.9
    assert sequence.flags_by_domain(["a seat", ""]) == {
        "AIRLINE": [[1, 1], []],
        "MEDIA": [[0, 0], []],
    }


def test_a_saved_sequence_classifier_flags_identically(sequence, tmp_path):
    sequence.save(tmp_path / "policy")
    saved = json.loads((tmp_path / "policy" / SEQUENCE_POLICY_FILE).read_text())
    assert saved == {"classes": ["AIRLINE", "MEDIA", NONE], "window": 2, "stride": 1,
                     "threshold": 0.9, "losses": list(sequence.losses)}  # fmt: skip
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in (tmp_path / "policy").iterdir()
    }
    loaded = SequenceClassifierPolicy.load(tmp_path / "policy")
    texts = ["please help with my flight today", "stream the episode", "the gate and the channel"]
    assert loaded.flags_by_domain(texts) == sequence.flags_by_domain(texts)
    assert np.array_equal(loaded.probabilities(texts), sequence.probabilities(texts))
    # Another inference batch pads windows differently: the same probabilities up to rounding.
    by_two = SequenceClassifierPolicy.load(tmp_path / "policy", batch_size=2)
    assert np.allclose(by_two.probabilities(texts), sequence.probabilities(texts), atol=1e-6)


def test_sequence_classifier_windows_are_capped_per_class_by_a_seeded_sample():
    from privleak.classifier_policies import _capped

    labels = np.array([0, 1, 0, 2, 0, 0, 1])
    kept = _capped(labels, 2, seed=0)
    assert np.bincount(labels[kept]).tolist() == [2, 2, 1] and np.all(np.diff(kept) > 0)
    assert np.array_equal(kept, _capped(labels, 2, seed=0))
    assert np.array_equal(_capped(labels, None, seed=0), np.arange(7))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"window": 0}, "sequence classifier policy window must be an integer >= 1 (words); got 0"),
        ({"window": 2, "stride": 3}, "stride must be an integer in [1, window = 2]; got 3"),
        ({"threshold": 1.0}, "policy threshold must be a number in (0, 1); got 1.0"),
        ({"threshold": 0}, "threshold must be a number in (0, 1); got 0"),
        ({"epochs": 0}, "sequence classifier policy epochs must be an integer >= 1; got 0"),
        ({"batch_size": 2.0}, "batch_size must be an integer >= 1; got 2.0"),
        ({"max_windows": 0}, "max_windows must be an integer >= 1; got 0"),
        ({"learning_rate": 0}, "learning_rate must be a number > 0; got 0"),
        ({"seed": None}, "sequence classifier policy seed must be an integer; got None"),
        ({"device": "tpu"}, "sequence classifier policy device 'tpu': not a device; allowed: cpu"),
    ],
)
def test_bad_sequence_classifier_settings_are_one_line(tiny_roberta, options, message):
    texts, labels = toy_corpus(("AIRLINE", "MEDIA"))
    with pytest.raises(PrivleakError, match=re.escape(message)) as caught:
        SequenceClassifierPolicy.fit(texts, labels, tiny_roberta, **(FIT | options))
    assert "\n" not in str(caught.value)


def test_bad_sequence_classifier_data_and_lookups_are_one_line(sequence, tiny_roberta, tmp_path):
    texts, labels = toy_corpus(("AIRLINE", "MEDIA"))
    name = "sequence classifier policy"
    cases = [
        (
            lambda: sequence.flags("a seat", "INSURANCE"),
            f"{name} was never trained on domain 'INSURANCE'; allowed: AIRLINE, MEDIA",
        ),
        (
            lambda: SequenceClassifierPolicy.fit(texts[:12], labels[:12], tiny_roberta, **FIT),
            f"{name} needs texts of at least 2 classes, one a domain, to train; got ['AIRLINE']",
        ),
        (
            lambda: SequenceClassifierPolicy.fit(texts, [NONE] * 24, tiny_roberta, **FIT),
            f"{name} fit: 'none' is the class of public text, not a domain",
        ),
        (
            lambda: SequenceClassifierPolicy.fit(texts, labels, str(tmp_path / "absent"), **FIT),
            f"{name} could not load '{tmp_path / 'absent'}'",
        ),
        (
            lambda: SequenceClassifierPolicy.load(tmp_path),
            f"{name} folder {tmp_path} has no {SEQUENCE_POLICY_FILE}; write one with "
            "SequenceClassifierPolicy.save",
        ),
        (
            lambda: SequenceClassifierPolicy(
                sequence.model, sequence.tokenizer, classes=["MEDIA", "AIRLINE", NONE],
                window=2, stride=1, threshold=0.5,
            ),
            f"{name} classes ['MEDIA', 'AIRLINE', 'none'] differ from the model's labels "
            "['AIRLINE', 'MEDIA', 'none']",
        ),
    ]  # fmt: skip
    for call, message in cases:
        with pytest.raises(PrivleakError, match=re.escape(message)) as caught:
            call()
        assert "\n" not in str(caught.value)


def test_multidogo_keyword_lists_share_no_word_between_domains():
    assert list(MULTIDOGO_KEYWORDS) == ["AIRLINE", "MEDIA", "INSURANCE"]
    words = {}
    for domain, keywords in MULTIDOGO_KEYWORDS.items():
        assert 15 <= len(keywords) <= 30 and len(set(keywords)) == len(keywords), domain
        assert all(keyword == keyword.lower() for keyword in keywords), domain
        words[domain] = {word for keyword in keywords for word in re.findall(r"\w+", keyword)}
    for domain, own in words.items():
        others = set().union(*(w for d, w in words.items() if d != domain))
        assert not own & others, (domain, own & others)
    policy = KeywordPolicy(MULTIDOGO_KEYWORDS)
    text = "My modem is down, so I missed my flight and filed a claim."
    tokens = re.findall(r"\w+", text)
    flagged = {
        d: [w for w, f in zip(tokens, policy.flags(text, d), strict=True) if f]
        for d in policy.domains
    }
    assert flagged == {"AIRLINE": ["flight"], "MEDIA": ["modem"], "INSURANCE": ["claim"]}


# --- redaction and leaks -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, flags, expected",
    [
        ("Your flight, seat 4C.", [0, 1, 1, 0], "Your <MASK> 4C."),  # one mask per run
        ("Your flight, seat 4C.", [0, 1, 0, 1], "Your <MASK>, seat <MASK>."),
        ("my flight\ngate now", [0, 1, 1, 0], "my <MASK>\n<MASK> now"),  # runs stop at lines
        ("a b c", [1, 1, 1], "<MASK>"),
        ("(a) b", [1, 0], "(<MASK>) b"),
        ("...", [], "..."),
    ],
)
def test_redact_masks_each_run_of_flagged_words_once(text, flags, expected):
    assert redact(text, flags) == expected


def test_redact_takes_any_mask_and_one_flag_per_word():
    assert redact("a seat here", [0, 1, 0], mask="[X]") == "a [X] here"
    with pytest.raises(PrivleakError, match=r"redact got 2 flags for a text of 3 words"):
        redact("a seat here", [0, 1])
    with pytest.raises(PrivleakError, match=r"mask must be a non-empty string; got ''"):
        redact("a seat here", [0, 1, 0], mask="")


def test_redact_for_domain_masks_that_domains_words_in_every_text():
    texts = ["Your flight and seat.", "Stream the episode!", "Nothing here.", "--"]
    redacted, share = redact_for_domain(texts, KeywordPolicy(KEYWORDS), "AIRLINE")
    assert redacted == ["Your <MASK> and <MASK>.", "Stream the episode!", "Nothing here.", "--"]
    assert share == pytest.approx(2 / 9)


def test_redact_own_domains_masks_each_record_by_its_own_domain():
    records = [
        {"id": "a", "domain": "AIRLINE", "text": "Your flight and seat."},
        {"id": "m", "domain": "MEDIA", "text": "The episode and the flight."},
        {"id": "f", "domain": "FINANCE", "text": "My card."},
    ]
    policy = KeywordPolicy(KEYWORDS)
    redacted, share = redact_own_domains(records, policy)
    assert [r["text"] for r in redacted] == [
        "Your <MASK> and <MASK>.",
        "The <MASK> and the flight.",  # a MEDIA record: AIRLINE's words stay
        "My card.",  # no FINANCE policy: left as it is
    ]
    assert share == pytest.approx(3 / 11)
    assert records[0]["text"] == "Your flight and seat."  # the input is not changed
    only_media, share = redact_own_domains(records, policy, domains=["MEDIA"])
    assert only_media[0] == records[0] and share == pytest.approx(1 / 11)
    with pytest.raises(PrivleakError, match=r"record 1 needs 'domain' and 'text'"):
        redact_own_domains([records[0], {"text": "x"}], policy)


def test_a_redaction_that_leaves_no_word_is_an_error():
    policy = KeywordPolicy(KEYWORDS)
    message = "KeywordPolicy for AIRLINE flags every word of text 1, so redacting it leaves no word"
    with pytest.raises(PrivleakError, match=re.escape(message)):
        redact_for_domain(["a flight", "Flight, seat!"], policy, "AIRLINE")
    message = "KeywordPolicy for AIRLINE flags every word of record a, so"
    with pytest.raises(PrivleakError, match=re.escape(message)):
        redact_own_domains([{"id": "a", "domain": "AIRLINE", "text": "seat"}], policy)


def test_leaks_is_any_flagged_word(windowed):
    policy = KeywordPolicy(KEYWORDS)
    assert leaks("Is the Seat free?", policy, "AIRLINE")
    assert not leaks("Are the seats free?", policy, "AIRLINE")
    assert leaks_many(["an episode", "a seat", ""], policy, "MEDIA") == [True, False, False]
    assert leaks_many(["the flight", "the episode"], windowed, "AIRLINE") == [True, False]


def test_real_minilm_flags_in_domain_words_more_than_cross_domain_words():
    from privleak.classifier_policies import sentence_embed
    from privleak.data.dialogs import PRIVATE_DOMAINS, dialogs
    from privleak.models import load_embedder

    embed = sentence_embed(load_embedder())
    train, _ = dialogs(12, 0, domains=PRIVATE_DOMAINS, turns=[3, 4])
    test, _ = dialogs(6, 1, domains=PRIVATE_DOMAINS, turns=[3, 3])
    policy = ClassifierPolicy.fit(
        [r["text"] for r in train], [r["domain"] for r in train], embed, window=12, stride=12
    )
    flags = policy.flags_by_domain([r["text"] for r in test])
    for domain in PRIVATE_DOMAINS:
        own = [f for f, r in zip(flags[domain], test, strict=True) if r["domain"] == domain]
        other = [f for f, r in zip(flags[domain], test, strict=True) if r["domain"] != domain]
        own_rate = sum(map(sum, own)) / sum(map(len, own))
        other_rate = sum(map(sum, other)) / sum(map(len, other))
        assert own_rate > other_rate + 0.3, (domain, own_rate, other_rate)


class _FlagsAll:
    """A policy flagging every word of every text."""

    domains = ("A",)

    def flags_many(self, texts, domain):
        return [[True] * len(word_spans(text)) for text in texts]


def test_speaker_labels_are_the_label_words_at_line_starts():
    text = "USER: hi there\n  AGENT : the USER said\nnot USER: here"
    assert label_words(text) == {0, 3}


def test_labels_kept_never_flags_a_speaker_label_and_counts_flags_per_domain():
    kept = LabelsKept(_FlagsAll(), "all", "loosen it", {})
    texts = ["USER: my card\nAGENT: ok", "USER: hello"]
    assert kept.domains == ("A",)
    assert kept.flags_many(texts, "A") == [[False, True, True, False, True], [False, True]]
    assert kept.counts == {"A": {"dialogs": 2, "dialogs_masked": 2, "words": 7, "words_masked": 4}}


def test_labels_kept_refuses_to_mask_every_word_of_a_dialog():
    kept = LabelsKept(_FlagsAll(), "all", "loosen it", {"just words": "d7"})
    with pytest.raises(PrivleakError, match="flags every word of A train dialog 'd7'.*loosen it"):
        kept.flags_many(["just words"], "A")
