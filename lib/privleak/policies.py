"""S3's policy functions (domain privacy): a policy F_d flags the words of a text that are
sensitive for domain d (the paper's F(tau)_i = 1 for a sensitive i-th token). Redaction masks
flagged words to build a redacted corpus, and a generation leaks d when a word is flagged.

Tokens are words, the `\\w+` matches of a text located by character span, so flags map back to
the text whatever LM tokenizer produced it. Punctuation is not a token: no keyword is
punctuation, a classifier window is counted in words, and redaction keeps punctuation in place.

Three policies with one interface (Policy):
- KeywordPolicy (here), the paper's Keyword Detection: a word is sensitive for d when it is part
  of an occurrence of one of d's hand-crafted keywords or phrases.
- ClassifierPolicy and SequenceClassifierPolicy (`privleak.classifier_policies`): word windows
  classified by domain, the paper's Sequence Classification and an embedding stand-in for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Protocol

from privleak.errors import require

WORD = re.compile(r"\w+")
MASK = "<MASK>"
NONE = "none"  # the classifier's class of windows sensitive for no domain (public text)


def word_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) character span of every word (`\\w+` match) of text, in order."""
    return [match.span() for match in WORD.finditer(text)]


class Policy(Protocol):
    """F_d for every d in domains: one flag per word of a text (word_spans order)."""

    domains: tuple[str, ...]

    def flags(self, text: str, domain: str) -> list[bool]: ...

    def flags_many(self, texts: Sequence[str], domain: str) -> list[list[bool]]: ...

    def flags_by_domain(
        self, texts: Sequence[str], domains: Sequence[str] | None = None
    ) -> dict[str, list[list[bool]]]: ...


def check_domain(unknown: str, domains: tuple[str, ...], domain: str) -> None:
    require(domain in domains, f"{unknown} {domain!r}; allowed: {', '.join(domains)}")


class KeywordPolicy:
    """Flags, for domain d, every word of each occurrence of one of d's keywords. Matching is
    case-insensitive and by whole words: "seat" flags "Seat" but not "seats", and a phrase
    flags its words when they follow each other in the text, whatever non-word characters
    separate them ("drive-thru" matches "drive thru" and "Drive-Thru")."""

    def __init__(self, keywords: Mapping[str, Sequence[str]]):
        require(
            isinstance(keywords, Mapping) and bool(keywords),
            f"keyword policy needs a non-empty mapping of domain to keywords; got {keywords!r}",
        )
        # Per domain: first word -> the keyword phrases (tuples of words) starting with it.
        self._phrases: dict[str, dict[str, list[tuple[str, ...]]]] = {}
        for domain, words in keywords.items():
            require(
                isinstance(domain, str) and bool(domain),
                f"keyword policy domains must be non-empty strings; got {domain!r}",
            )
            require(
                isinstance(words, list | tuple) and all(isinstance(w, str) for w in words),
                f"keyword policy: the keywords of domain {domain} must be a list of strings; "
                f"got {words!r}",
            )
            require(bool(words), f"keyword policy: the keyword list of domain {domain} is empty")
            starts: dict[str, list[tuple[str, ...]]] = {}
            for keyword in words:
                phrase = tuple(WORD.findall(keyword.lower()))
                require(
                    bool(phrase),
                    f"keyword policy: keyword {keyword!r} of domain {domain} has no word in it",
                )
                starts.setdefault(phrase[0], []).append(phrase)
            self._phrases[domain] = starts
        self.domains = tuple(keywords)

    def flags(self, text: str, domain: str) -> list[bool]:
        """One flag per word of text: True where the word is part of one of domain's keywords."""
        check_domain("keyword policy has no domain", self.domains, domain)
        words = [word.lower() for word in WORD.findall(text)]
        flagged = [False] * len(words)
        starts = self._phrases[domain]
        for i, word in enumerate(words):
            for phrase in starts.get(word, ()):
                if tuple(words[i : i + len(phrase)]) == phrase:
                    flagged[i : i + len(phrase)] = [True] * len(phrase)
        return flagged

    def flags_many(self, texts: Sequence[str], domain: str) -> list[list[bool]]:
        check_domain("keyword policy has no domain", self.domains, domain)
        return [self.flags(text, domain) for text in texts]

    def flags_by_domain(
        self, texts: Sequence[str], domains: Sequence[str] | None = None
    ) -> dict[str, list[list[bool]]]:
        """flags_many for each of domains (default: all the policy's)."""
        domains = self.domains if domains is None else domains
        return {domain: self.flags_many(texts, domain) for domain in domains}


def _runs(text: str, spans: list[tuple[int, int]], flags: Sequence[bool]) -> list[list[int]]:
    """Character spans [start, end] of maximal runs of flagged words; a run stops at a line
    break, so each line (a dialog turn) keeps its own mask."""
    runs: list[list[int]] = []
    previous = False
    for (start, end), flagged in zip(spans, flags, strict=True):
        if flagged and previous and "\n" not in text[runs[-1][1] : start]:
            runs[-1][1] = end
        elif flagged:
            runs.append([start, end])
        previous = flagged
    return runs


def redact(text: str, flags: Sequence[bool], mask: str = MASK) -> str:
    """text with each maximal run of flagged words (and the non-word characters between them)
    replaced by one mask. One mask per run, not per word: the number of masks does not give
    away how many words a phrase such as "boarding pass" had, and a model trained on redacted
    text sees no long runs of repeated masks. Runs stop at line breaks, keeping turns apart."""
    require(isinstance(mask, str) and bool(mask), f"mask must be a non-empty string; got {mask!r}")
    spans = word_spans(text)
    require(
        len(flags) == len(spans),
        f"redact got {len(flags)} flags for a text of {len(spans)} words; "
        "give one flag per word of word_spans(text)",
    )
    pieces, cursor = [], 0
    for start, end in _runs(text, spans, flags):
        pieces += [text[cursor:start], mask]
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def _redacted(text: str, flags: list[bool], mask: str, what: str, policy, domain: str) -> str:
    require(
        not flags or not all(flags),
        f"{type(policy).__name__} for {domain} flags every word of {what}, so redacting it "
        "leaves no word; raise the threshold or shorten the keyword list",
    )
    return redact(text, flags, mask)


def redact_for_domain(
    texts: Sequence[str], policy: Policy, domain: str, *, mask: str = MASK
) -> tuple[list[str], float]:
    """Every text with F_domain's flagged words masked (the paper's redacted version of D for
    one domain), and the share of all words that were masked."""
    flags = policy.flags_many(list(texts), domain)
    redacted = [
        _redacted(text, f, mask, f"text {i}", policy, domain)
        for i, (text, f) in enumerate(zip(texts, flags, strict=True))
    ]
    words = sum(len(f) for f in flags)
    return redacted, sum(map(sum, flags)) / words if words else 0.0


def redact_own_domains(
    records: Sequence[Mapping],
    policy: Policy,
    *,
    domains: Sequence[str] | None = None,
    field: str = "text",
    mask: str = MASK,
) -> tuple[list[dict], float]:
    """A copy of records where each record of a domain in `domains` (default: all the
    policy's) has record[field] masked by its own domain's policy; records of other domains
    (public ones, say) stay as they are. Also returns the share of all records' words masked.
    Each domain's records are flagged in one flags_many call."""
    domains = policy.domains if domains is None else tuple(dict.fromkeys(domains))
    for i, record in enumerate(records):
        require(
            isinstance(record, Mapping) and "domain" in record and field in record,
            f"record {i} needs 'domain' and '{field}' to be redacted by its domain",
        )
    out = [dict(record) for record in records]
    masked = 0
    for domain in domains:
        of_domain = [i for i, record in enumerate(records) if record["domain"] == domain]
        flags = policy.flags_many([records[i][field] for i in of_domain], domain)
        for i, f in zip(of_domain, flags, strict=True):
            name = f"record {records[i].get('id', i)}"
            out[i][field] = _redacted(records[i][field], f, mask, name, policy, domain)
            masked += sum(f)
    words = sum(len(word_spans(record[field])) for record in records)
    return out, masked / words if words else 0.0


def leaks(text: str, policy: Policy, domain: str) -> bool:
    """Whether text holds a word the policy flags for domain (LiRa's success test)."""
    return any(policy.flags(text, domain))


def leaks_many(texts: Sequence[str], policy: Policy, domain: str) -> list[bool]:
    """leaks for many texts, in one flags_many call (one embed call for ClassifierPolicy)."""
    return [any(f) for f in policy.flags_many(list(texts), domain)]


# A line's speaker label ("USER", "AGENT") is the dialog format, not domain text: masking it would
# erase the turn structure every target learns, and S3's prompts end where a label starts the
# next turn. The classifier still reads a label as the domain of the words around it (a window
# holding the label holds them too), so redaction drops the labels from every policy's flags.
SPEAKER_LABEL = re.compile(r"^[ \t]*(USER|AGENT)(?=[ \t]*:)", re.MULTILINE)


def label_words(text: str) -> set[int]:
    """Indices (word_spans order) of the words that are a line's speaker label."""
    starts = {match.start(1) for match in SPEAKER_LABEL.finditer(text)}
    return {i for i, (start, _) in enumerate(word_spans(text)) if start in starts}


class LabelsKept:
    """`policy` with speaker labels never flagged, counting per domain the words it flags.

    Args:
        policy: the wrapped policy (its `domains` are kept).
        name: the policy's name in error messages.
        fix: how to loosen the policy, ending the error when it flags every word of a dialog.
        dialog_ids: text -> dialog id, to name that dialog.

    `counts[domain]` after `flags_many(texts, domain)`: {dialogs, dialogs_masked, words,
    words_masked}.
    """

    def __init__(self, policy, name: str, fix: str, dialog_ids: Mapping[str, str]):
        self.policy, self.name, self.domains = policy, name, policy.domains
        self.fix, self.dialog_ids = fix, dialog_ids
        self.counts: dict[str, dict[str, int]] = {}

    def flags_many(self, texts, domain_name: str) -> list[list[bool]]:
        flags = []
        for text, row in zip(texts, self.policy.flags_many(list(texts), domain_name), strict=True):
            labels = label_words(text)
            flags.append([flagged and i not in labels for i, flagged in enumerate(row)])
            require(
                not flags[-1] or not all(flags[-1]),
                f"the s3 {self.name} policy flags every word of {domain_name} train dialog "
                f"{self.dialog_ids.get(text)!r}, so redacting it leaves no word; {self.fix}",
            )
        self.counts[domain_name] = {
            "dialogs": len(flags),
            "dialogs_masked": sum(any(row) for row in flags),
            "words": sum(map(len, flags)),
            "words_masked": sum(map(sum, flags)),
        }
        return flags
