"""S3's classifier policies over word windows (the interface and word tokens are
`privleak.policies`'):
- ClassifierPolicy, a stand-in for the paper's Sequence Classification: where the paper
  fine-tunes RoBERTa, we fit a logistic regression on sentence embeddings (MiniLM in the
  pipeline) of word windows labelled with their text's domain, plus a NONE class of windows from
  public text (dialogs of domains that are not private); a word is sensitive for d when a window
  containing it is classified as d with probability above a threshold. The NONE class is what
  lets the classifier tell domain-specific content from the greetings, names and phrasing every
  customer-service dialog shares: without it, such text is still assigned to some private
  domain.
- SequenceClassifierPolicy, the paper's Sequence Classification: a Hugging Face sequence
  classifier (RoBERTa in the paper) fine-tuned on the same labelled word windows (NONE class
  included when public text is given), flagging words the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import softmax
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from privleak.errors import PrivleakError, require
from privleak.models import device_problem
from privleak.policies import NONE, check_domain, word_spans

_CLASSIFIER_KEYS = ("classes", "coef", "intercept", "window", "stride", "threshold")

# SequenceClassifierPolicy.save writes this next to the model and tokenizer.
SEQUENCE_POLICY_FILE = "policy.json"
_SEQUENCE_KEYS = ("classes", "window", "stride", "threshold", "losses")

# Maps n texts to their embeddings [n, dim].
Embed = Callable[[list[str]], np.ndarray]


def _windows(spans: list[tuple[int, int]], window: int, stride: int) -> list[tuple[int, int]]:
    """Word ranges [a, b) of width `window` every `stride` words; the last one ends at the
    last word, so every word lies in at least one window. A shorter run is one window."""
    if not spans:
        return []
    last = max(len(spans) - window, 0)
    starts = list(range(0, last + 1, stride))
    if starts[-1] != last:
        starts.append(last)
    return [(a, min(a + window, len(spans))) for a in starts]


def _utterance_windows(
    text: str, spans: list[tuple[int, int]], window: int, stride: int
) -> list[tuple[int, int]]:
    """`_windows` within each utterance (line) of text, as word ranges [a, b) of the whole text:
    no window crosses a line break, and an utterance shorter than `window` words is one window,
    as the official code draws its n-grams per utterance (`min(n, len(utterance))`)."""
    breaks = [i for i, char in enumerate(text) if char == "\n"]
    line_of = np.searchsorted(breaks, [start for start, _ in spans])
    ranges, first = [], 0
    for end in [*(int(i) + 1 for i in np.flatnonzero(np.diff(line_of))), len(spans)]:
        ranges += [(first + a, first + b) for a, b in _windows(spans[first:end], window, stride)]
        first = end
    return ranges


def _cut(texts: Sequence[str], window: int, stride: int) -> tuple[list, list, list[str]]:
    """Per text its word spans and window word ranges (per utterance: `_utterance_windows`),
    and the text of every window (all texts' windows in order: the slice of the text from the
    window's first to last word)."""
    spans = [word_spans(text) for text in texts]
    windows = [
        _utterance_windows(text, s, window, stride) if s else []
        for text, s in zip(texts, spans, strict=True)
    ]
    chunks = [
        text[s[a][0] : s[b - 1][1]]
        for text, s, ranges in zip(texts, spans, windows, strict=True)
        for a, b in ranges
    ]
    return spans, windows, chunks


def _distinct(texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct texts, sorted, and the index of each text among them [len(texts)]."""
    unique, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
    return [str(text) for text in unique], inverse.ravel()


def _embedded(embed: Embed, texts: list[str]) -> np.ndarray:
    """[len(texts), dim] embeddings, each distinct text embedded once (short windows repeat)."""
    unique, inverse = _distinct(texts)
    vectors = np.asarray(embed(unique), dtype=np.float64)
    require(
        vectors.ndim == 2 and len(vectors) == len(unique),
        f"embed returned an array of shape {vectors.shape} for {len(unique)} texts; "
        f"expected ({len(unique)}, dim)",
    )
    return vectors[inverse]


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_settings(window, stride, threshold, name: str = "classifier policy") -> None:
    require(
        _is_int(window) and window >= 1,
        f"{name} window must be an integer >= 1 (words); got {window!r}",
    )
    # A stride past the window would leave words in no window, never to be flagged.
    require(
        _is_int(stride) and 1 <= stride <= window,
        f"{name} stride must be an integer in [1, window = {window}]; got {stride!r}",
    )
    require(
        isinstance(threshold, int | float)
        and not isinstance(threshold, bool)
        and 0 < threshold < 1,
        f"{name} threshold must be a number in (0, 1); got {threshold!r}",
    )


def _check_classes(classes, name: str) -> tuple[str, ...]:
    classes = list(classes)
    require(
        len(classes) >= 2 and len(set(classes)) == len(classes) and any(c != NONE for c in classes),
        f"{name} needs at least 2 distinct classes, one of them a domain; got {classes!r}",
    )
    return tuple(classes)


def _labelled_windows(
    texts: Sequence[str],
    domains: Sequence[str],
    public: Sequence[str],
    window: int,
    stride: int,
    name: str,
) -> tuple[list[str], list[str]]:
    """The text of every window of texts, then of public texts [n], and its label [n]: its
    text's domain, NONE for public text; texts without a word give no window."""
    require(
        len(texts) == len(domains),
        f"{name} fit: {len(texts)} texts but {len(domains)} domain labels",
    )
    require(
        NONE not in domains,
        f"{name} fit: {NONE!r} is the class of public text, not a domain; pass public texts as "
        "public=",
    )
    texts, labels = [*texts, *public], [*domains, *[NONE] * len(public)]
    _, windows, chunks = _cut(texts, window, stride)
    labels = [d for d, ranges in zip(labels, windows, strict=True) for _ in ranges]
    seen = sorted(set(labels))
    require(
        len(seen) >= 2 and seen != [NONE],
        f"{name} needs texts of at least 2 classes, one a domain, to train; got {seen}",
    )
    return chunks, labels


class _WindowClassifier:
    """Flags from the class probabilities of word windows. A subclass sets `_name` (for
    errors), classes, domains (the classes but NONE), window, stride and threshold, and gives
    probabilities(window texts) [n, len(classes)]."""

    _name: str
    classes: tuple[str, ...]
    domains: tuple[str, ...]
    window: int
    stride: int
    threshold: float
    probabilities: Callable[[list[str]], np.ndarray]

    def flags(self, text: str, domain: str) -> list[bool]:
        return self.flags_many([text], domain)[0]

    def flags_many(self, texts: Sequence[str], domain: str) -> list[list[bool]]:
        """One flag list per text; the windows of all texts share one probabilities call."""
        return self.flags_by_domain(texts, [domain])[domain]

    def flags_by_domain(
        self, texts: Sequence[str], domains: Sequence[str] | None = None
    ) -> dict[str, list[list[bool]]]:
        """flags_many for each of domains (default: all the policy's) from one probabilities
        call, so checking a text against several domains costs no more than against one."""
        domains = self.domains if domains is None else list(domains)
        for domain in domains:
            check_domain(f"{self._name} was never trained on domain", self.domains, domain)
        columns = [self.classes.index(domain) for domain in domains]
        words = [best[:, columns] > self.threshold for best in self.word_probabilities(texts)]
        return {d: [flags[:, k].tolist() for flags in words] for k, d in enumerate(domains)}

    def word_probabilities(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Per text, each word's largest class probabilities over the windows containing it
        [n_words, len(classes)]. The windows of all texts share one probabilities call."""
        spans, windows, chunks = _cut(texts, self.window, self.stride)
        probabilities = self.probabilities(chunks)
        out, at = [], 0
        for s, ranges in zip(spans, windows, strict=True):
            best = np.zeros((len(s), len(self.classes)))
            for a, b in ranges:
                best[a:b] = np.maximum(best[a:b], probabilities[at])
                at += 1
            out.append(best)
        return out


class ClassifierPolicy(_WindowClassifier):
    """A linear classifier over embeddings of word windows (width `window`, a new one every
    `stride` words) whose classes are the domains and, optionally, NONE (public text). A word is
    flagged for domain d when the largest probability of d over the windows containing it
    exceeds `threshold`.

    Max, not mean, over a word's windows: a leak check should err towards recall, and one
    window that reads as domain d is evidence enough (the paper's RoBERTa policy is the one
    with the higher recall). With max, a higher threshold flags a subset of the words, and a
    wider window flags a domain word's neighbours too (the official code's RoBERTa policy
    classifies 16-word windows at 0.96; short windows keep flags on the domain words)."""

    _name = "classifier policy"

    def __init__(
        self,
        embed: Embed,
        *,
        classes: Sequence[str],
        coef: np.ndarray,
        intercept: np.ndarray,
        window: int,
        stride: int,
        threshold: float,
    ):
        _check_settings(window, stride, threshold)
        classes = _check_classes(classes, self._name)
        coef = np.asarray(coef, dtype=np.float64)
        intercept = np.asarray(intercept, dtype=np.float64)
        # Two classes: scikit-learn keeps one row, the logit of the second class.
        rows = 1 if len(classes) == 2 else len(classes)
        require(
            coef.ndim == 2 and coef.shape[0] == rows and intercept.shape == (rows,),
            f"classifier policy coef {coef.shape} and intercept {intercept.shape} do not fit "
            f"{len(classes)} classes; expected ({rows}, dim) and ({rows},)",
        )
        self.embed = embed
        self.classes = classes
        self.domains = tuple(c for c in classes if c != NONE)
        self.coef, self.intercept = coef, intercept
        self.window, self.stride, self.threshold = window, stride, threshold

    @classmethod
    def fit(
        cls,
        texts: Sequence[str],
        domains: Sequence[str],
        embed: Embed,
        *,
        public: Sequence[str] = (),
        window: int = 12,
        stride: int = 6,
        threshold: float = 0.5,
        C: float = 10.0,
        max_iter: int = 1000,
    ) -> ClassifierPolicy:
        """Fit on the windows of texts, each labelled with its text's domain, and the windows of
        `public` texts (sensitive for no domain), labelled NONE; texts without a word give none.
        One embed call for all windows. C is scikit-learn's inverse L2 strength: unit-norm
        sentence embeddings need weak regularisation to reach confident probabilities."""
        _check_settings(window, stride, threshold)
        chunks, labels = _labelled_windows(texts, domains, public, window, stride, cls._name)
        # Balanced weights, so a class with more text does not lower the others' probabilities.
        model = LogisticRegression(C=C, max_iter=max_iter, class_weight="balanced")
        vectors = _embedded(embed, chunks)
        # One BLAS thread: the problem is small, and on shared cores threads slow lbfgs ~30x.
        with threadpool_limits(limits=1, user_api="blas"):
            model.fit(vectors, labels)
        return cls(
            embed,
            classes=[str(c) for c in model.classes_],
            coef=model.coef_,
            intercept=model.intercept_,
            window=window,
            stride=stride,
            threshold=threshold,
        )

    def probabilities(self, texts: list[str]) -> np.ndarray:
        """Class probabilities [len(texts), len(classes)], columns in classes order."""
        if not texts:
            return np.zeros((0, len(self.classes)))
        vectors = _embedded(self.embed, texts)
        require(
            vectors.shape[1] == self.coef.shape[1],
            f"embed gives {vectors.shape[1]}-dim vectors but the classifier policy was trained "
            f"on {self.coef.shape[1]}-dim ones; use the embedder it was trained with",
        )
        logits = vectors @ self.coef.T + self.intercept
        if len(self.classes) == 2:
            logits = np.hstack([np.zeros_like(logits), logits])
        return softmax(logits, axis=1)

    def to_dict(self) -> dict:
        """JSON-able settings and weights; from_dict(to_dict(), embed) flags identically."""
        return {
            "classes": list(self.classes),
            "coef": self.coef.tolist(),
            "intercept": self.intercept.tolist(),
            "window": self.window,
            "stride": self.stride,
            "threshold": self.threshold,
        }

    @classmethod
    def from_dict(cls, data: Mapping, embed: Embed) -> ClassifierPolicy:
        """The policy to_dict saved, with the embedder it was trained with."""
        require(isinstance(data, Mapping), f"classifier policy must be a mapping; got {data!r}")
        missing = [key for key in _CLASSIFIER_KEYS if key not in data]
        if missing:
            raise PrivleakError(
                f"classifier policy lacks '{missing[0]}'; it needs {', '.join(_CLASSIFIER_KEYS)}"
            )
        return cls(embed, **{key: data[key] for key in _CLASSIFIER_KEYS})


def _check_count(value, what: str, name: str) -> None:
    require(_is_int(value) and value >= 1, f"{name} {what} must be an integer >= 1; got {value!r}")


def _check_device(device, name: str) -> None:
    problem = device_problem(device)
    require(problem is None, f"{name} device {device!r}: {problem}")


def _load_classifier(source, name: str, **options):
    """(model, tokenizer) of a Hugging Face sequence classifier from a hub id or a folder;
    `options` go to the model's from_pretrained."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForSequenceClassification.from_pretrained(source, **options)
    except OSError as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise PrivleakError(f"{name} could not load {str(source)!r}: {first}") from None
    return model, tokenizer


def _capped(labels: np.ndarray, cap: int | None, seed: int) -> np.ndarray:
    """Indices of the windows kept, ascending: all of a class's when it has at most `cap`
    (None: no cap), else a seeded sample of `cap` of them."""
    if cap is None:
        return np.arange(len(labels))
    rng = np.random.default_rng(seed)
    kept = []
    for label in np.unique(labels):
        of_class = np.flatnonzero(labels == label)
        kept.append(rng.choice(of_class, size=min(cap, len(of_class)), replace=False))
    return np.sort(np.concatenate(kept))


class SequenceClassifierPolicy(_WindowClassifier):
    """A Hugging Face sequence classifier (AutoModelForSequenceClassification: a fine-tuned
    RoBERTa in the paper) over word windows, its labels (config.id2label, in id order) being
    `classes`: the domains and, optionally, NONE (public text). Flags as ClassifierPolicy does:
    a word is flagged for d when the largest probability of d over the windows containing it
    exceeds `threshold`. The official code replaces each 16-word window whose probability
    reaches 0.96 (> here for >=) with masks.

    Windows are drawn per utterance (line) as the official code draws them: every run of
    `window` words within one utterance (a new one every `stride` words), an utterance shorter
    than that being one window. Where they differ: a word here is a `\\w+` match (the official
    code splits at whitespace), so flags map back to the words of any text, and our dialogs'
    utterances keep their speaker label ("USER:", "AGENT:"); a word is flagged for the domain
    asked (redaction asks the dialog's own), where the official HFClassifierRedaction masks a
    window confident for any class; every flagged window's words are masked (their union), where
    the official code replaces flagged windows one after another in the text, so a window that
    overlaps one already replaced no longer matches and stays.
    The NONE class is ours as well: the official classifier knows only the private domains.
    Inference runs under torch.no_grad on `device`, `batch_size` distinct windows a forward
    pass."""

    _name = "sequence classifier policy"

    def __init__(
        self,
        model,
        tokenizer,
        *,
        classes: Sequence[str],
        window: int,
        stride: int,
        threshold: float,
        batch_size: int = 64,
        device: str = "cpu",
        losses: Sequence[float] = (),
    ):
        """losses: the mean training loss of each fine-tuning epoch (fit's record)."""
        _check_settings(window, stride, threshold, self._name)
        classes = _check_classes(classes, self._name)
        labels = [model.config.id2label[i] for i in range(model.config.num_labels)]
        require(
            labels == list(classes),
            f"{self._name} classes {list(classes)} differ from the model's labels {labels} "
            "(config.id2label in id order)",
        )
        _check_count(batch_size, "batch_size", self._name)
        _check_device(device, self._name)
        require(
            tokenizer.pad_token is not None,
            f"{self._name} needs a tokenizer with a pad token, to batch windows",
        )
        self.model, self.tokenizer = model.to(device).eval(), tokenizer
        self.classes = classes
        self.domains = tuple(c for c in classes if c != NONE)
        self.window, self.stride, self.threshold = window, stride, threshold
        self.batch_size, self.device, self.losses = batch_size, device, tuple(losses)
        # RoBERTa numbers positions from its padding index + 1 (= 2), so it fits
        # max_position_embeddings - 2 tokens; a model numbering from 0 merely loses 2.
        self.max_length = min(tokenizer.model_max_length, model.config.max_position_embeddings - 2)

    @classmethod
    def fit(
        cls,
        texts: Sequence[str],
        domains: Sequence[str],
        model_name_or_folder: str,
        *,
        public: Sequence[str] = (),
        window: int,
        stride: int,
        threshold: float,
        epochs: int,
        batch_size: int,
        learning_rate: float,
        seed: int,
        device: str = "cpu",
        max_windows: int | None = None,
    ) -> SequenceClassifierPolicy:
        """Fine-tune `model_name_or_folder` (a hub id or a local folder, e.g. roberta-base; its
        classification head is new) on the windows of texts, each labelled with its text's
        domain, and of `public` texts, labelled NONE. Classes: the domains sorted, then NONE
        when public texts give windows. `max_windows` caps each class's windows (a seeded
        sample) for speed; `batch_size` is also the policy's inference batch.

        Torch's AdamW at a constant learning_rate, `epochs` passes over the windows in a seeded
        shuffle, with balanced class weights in the loss (scikit-learn's n / (classes x
        n_class)), so the many windows of NONE or of long-dialog domains do not swamp a domain.
        torch.manual_seed(seed) fixes the new head and dropout."""
        name = cls._name
        _check_settings(window, stride, threshold, name)
        for what, value in (("epochs", epochs), ("batch_size", batch_size)):
            _check_count(value, what, name)
        if max_windows is not None:
            _check_count(max_windows, "max_windows", name)
        require(
            isinstance(learning_rate, int | float)
            and not isinstance(learning_rate, bool)
            and learning_rate > 0,
            f"{name} learning_rate must be a number > 0; got {learning_rate!r}",
        )
        require(_is_int(seed), f"{name} seed must be an integer; got {seed!r}")
        _check_device(device, name)
        chunks, labels = _labelled_windows(texts, domains, public, window, stride, name)
        classes = [*sorted(set(labels) - {NONE}), *([NONE] if NONE in labels else [])]
        ids = np.array([classes.index(label) for label in labels])
        kept = _capped(ids, max_windows, seed)
        torch.manual_seed(seed)
        model, tokenizer = _load_classifier(
            model_name_or_folder,
            name,
            num_labels=len(classes),
            id2label=dict(enumerate(classes)),
            label2id={c: i for i, c in enumerate(classes)},
            ignore_mismatched_sizes=True,
            dtype=torch.float32,
        )
        policy = cls(
            model,
            tokenizer,
            classes=classes,
            window=window,
            stride=stride,
            threshold=threshold,
            batch_size=batch_size,
            device=device,
        )
        policy.losses = policy._fine_tune(
            [chunks[i] for i in kept], ids[kept], epochs, learning_rate, seed
        )
        return policy

    def _fine_tune(
        self, windows: list[str], ids: np.ndarray, epochs: int, learning_rate: float, seed: int
    ) -> tuple[float, ...]:
        """Train the model on windows [n] of class ids [n]; the mean loss of each epoch."""
        counts = np.bincount(ids, minlength=len(self.classes))
        weight = torch.tensor(len(ids) / (len(counts) * counts), dtype=torch.float32)
        weight, targets = weight.to(self.device), torch.as_tensor(ids, device=self.device)
        order = torch.Generator().manual_seed(seed)
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=learning_rate)
        self.model.train()
        losses = []
        for _ in range(epochs):
            total, shuffled = 0.0, torch.randperm(len(ids), generator=order).tolist()
            for start in range(0, len(shuffled), self.batch_size):
                batch = shuffled[start : start + self.batch_size]
                logits = self.model(**self._encode([windows[i] for i in batch])).logits
                loss = F.cross_entropy(logits.float(), targets[batch], weight=weight)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                total += loss.item() * len(batch)
            losses.append(total / len(ids))
        self.model.eval()
        return tuple(losses)

    def _encode(self, texts: list[str]):
        """The tokenizer's padded batch of texts on the policy's device."""
        encoded = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        return encoded.to(self.device)

    def probabilities(self, texts: list[str]) -> np.ndarray:
        """Class probabilities [len(texts), len(classes)], columns in classes order; each
        distinct text is classified once (short windows repeat)."""
        distinct, inverse = _distinct(texts)
        rows = [np.zeros((0, len(self.classes)))]  # so that no text gives [0, len(classes)]
        with torch.no_grad():
            for start in range(0, len(distinct), self.batch_size):
                batch = self._encode(distinct[start : start + self.batch_size])
                rows.append(torch.softmax(self.model(**batch).logits.float(), dim=-1).cpu().numpy())
        return np.concatenate(rows).astype(np.float64)[inverse]

    def save(self, folder: str | Path) -> None:
        """The model and tokenizer (save_pretrained) and SEQUENCE_POLICY_FILE (classes, window,
        stride, threshold, losses) into folder, for load."""
        folder = Path(folder)
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        settings = {
            "classes": list(self.classes),
            "window": self.window,
            "stride": self.stride,
            "threshold": self.threshold,
            "losses": list(self.losses),
        }
        (folder / SEQUENCE_POLICY_FILE).write_text(json.dumps(settings, indent=2) + "\n")

    @classmethod
    def load(
        cls, folder: str | Path, *, device: str = "cpu", batch_size: int = 64
    ) -> SequenceClassifierPolicy:
        """The policy save wrote into folder, on device."""
        path = Path(folder) / SEQUENCE_POLICY_FILE
        require(
            path.is_file(),
            f"{cls._name} folder {folder} has no {SEQUENCE_POLICY_FILE}; "
            "write one with SequenceClassifierPolicy.save",
        )
        settings = json.loads(path.read_text())
        missing = [key for key in _SEQUENCE_KEYS if key not in settings]
        if missing:
            raise PrivleakError(
                f"{path} lacks '{missing[0]}'; it needs {', '.join(_SEQUENCE_KEYS)}"
            )
        model, tokenizer = _load_classifier(folder, cls._name)
        return cls(
            model,
            tokenizer,
            **{key: settings[key] for key in _SEQUENCE_KEYS},
            batch_size=batch_size,
            device=device,
        )


def sentence_embed(model, *, batch_size: int = 64) -> Embed:
    """An Embed from a sentence-transformers model (privleak.models.load_embedder()): unit-norm
    embeddings [n, dim]."""

    def embed(texts: list[str]) -> np.ndarray:
        return model.encode(
            texts, normalize_embeddings=True, batch_size=batch_size, show_progress_bar=False
        )

    return embed
