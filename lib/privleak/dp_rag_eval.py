"""DP-RAG's Fig. 6 (Grislain) as its published evaluation computes it (sarus-tech/dp-rag,
test_dp_rag.py and evaluation.py): one symptom question per patient, the patient's privacy unit,
answered correctly when the response names the patient's disease; accuracy per bucket of disease
frequency (the number of documents of that disease), each bucket's successes over its questions,
so buckets are weighted by questions, not by diseases.

`sample_patients` keeps the evaluation's weighting when a budget cannot ask every patient: it
draws `per_bucket` patients uniformly from each bucket, so a bucket's mean over its drawn questions
estimates that bucket's accuracy over all of its patients.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence

from scipy.stats import binomtest

from privleak.data.medical import symptom_question
from privleak.errors import require

BUCKETS = ((0, 10), (10, 20), (20, 50), (50, 100), (100, math.inf))
"""Fig. 6's buckets of disease frequency (evaluation.py: [0 10[ ... [50 100[, >= 100)."""


def bucket(frequency: int) -> str:
    """The Fig. 6 bucket label of a disease with `frequency` documents."""
    require(frequency >= 0, f"a disease frequency must be >= 0, got {frequency}")
    for low, high in BUCKETS:
        if low <= frequency < high:
            return f"[{low}, {high})" if math.isfinite(high) else f"≥ {low}"
    raise AssertionError(frequency)


BUCKET_NAMES = [bucket(low) for low, _ in BUCKETS]


def with_questions(records: Sequence[dict], where: str) -> list[dict]:
    """Records with their symptom `question`: kept where a record has one, else derived from its
    `symptoms` list as the published evaluation asks ("I am experiencing the following symptoms:
    ... What is my disease?"). One line naming the record when it has neither."""
    out = []
    for index, record in enumerate(records):
        if record.get("question"):
            out.append(dict(record))
            continue
        symptoms = record.get("symptoms")
        if isinstance(symptoms, str):  # a CSV export writes the list as text
            symptoms = [s.strip(" '\"") for s in symptoms.strip("[]").split(",") if s.strip()]
        require(
            isinstance(symptoms, list) and len(symptoms) >= 1,
            f"{where}: record {index} (id {record.get('id')!r}) has no 'question' and no "
            "'symptoms' list to derive it from; map a column to one of them with fields",
        )
        out.append({**record, "question": symptom_question([str(s) for s in symptoms])})
    return out


def sample_patients(records: Sequence[dict], per_bucket: int | None, seed: int) -> list[dict]:
    """The patients asked: every record when per_bucket is None, else per_bucket records drawn
    uniformly without replacement from each frequency bucket (all of a smaller bucket), in corpus
    order. A record's bucket is its disease's number of records."""
    if per_bucket is None:
        return list(records)
    require(per_bucket >= 1, f"per_bucket must be >= 1 or None, got {per_bucket}")
    frequency = Counter(r["disease"] for r in records)
    rng = random.Random(f"s4-patients-{seed}")
    chosen: set[int] = set()
    for name in BUCKET_NAMES:
        members = [i for i, r in enumerate(records) if bucket(frequency[r["disease"]]) == name]
        chosen.update(rng.sample(members, min(per_bucket, len(members))))
    return [records[i] for i in sorted(chosen)]


def wilson(successes: int, trials: int, alpha: float = 0.05) -> tuple[float, float]:
    """The Wilson (1 - alpha) interval of a proportion; (nan, nan) without trials."""
    if trials == 0:
        return math.nan, math.nan
    interval = binomtest(successes, trials).proportion_ci(1 - alpha, "wilson")
    return float(interval.low), float(interval.high)
