"""privleak.claims.catalogue and registry: specs are well formed, findings fill their templates,
and every verdict comes out of the interval as docs/design.md §8 says."""

from __future__ import annotations

import math

import pytest

from privleak.claims import CONTRADICTED, INCONCLUSIVE, REPRODUCED, Estimate
from privleak.claims.catalogue import CATALOGUE, SPECS
from privleak.claims.procedures import TANGO, WELCH, Test
from privleak.claims.registry import NONE, Finding, claim, evaluate, merged
from privleak.errors import PrivleakError


def test_spec_ids_are_unique_and_name_their_paper():
    assert len(CATALOGUE) == len(SPECS)
    for spec in SPECS:
        assert spec.id.split(".")[0] in {"s0", "s1", "s2", "s3", "s4"}
        assert spec.direction in ("+", "-")
        assert spec.where and spec.effect and spec.unit
        # A spec without a paper sentence extends a paper's measures, and its note says how.
        assert spec.quote or (spec.where.startswith("extends ") and spec.note)


def finding(effect, low, high, **kwargs) -> Finding:
    return Finding("s0.lambda.influence", Estimate(effect, low, high, 12), **kwargs)


@pytest.mark.parametrize(
    ("low", "high", "verdict"),
    [(0.1, 0.3, REPRODUCED), (-0.3, -0.1, CONTRADICTED), (-0.1, 0.2, INCONCLUSIVE)],
)
def test_a_plus_claim_is_judged_by_where_its_interval_lies(low, high, verdict):
    assert claim(finding(0.2, low, high)).verdict == verdict


def test_a_minus_claim_with_a_spec_null_is_judged_against_that_null():
    # s1.partial_not_easier_topk5: the paper says below one half.
    below = Finding("s1.partial_not_easier_topk5.n{n}", Estimate(0.2, 0.1, 0.4, 30),
                    {"n": 1, "largest": "h128"})  # fmt: skip
    above = Finding("s1.partial_not_easier_topk5.n{n}", Estimate(0.7, 0.6, 0.8, 30),
                    {"n": 1, "largest": "h128"})  # fmt: skip
    assert claim(below).verdict == REPRODUCED and claim(above).verdict == CONTRADICTED
    assert claim(below).null == 0.5 and claim(below).id == "s1.partial_not_easier_topk5.n1"


def test_fields_fill_id_effect_and_unit():
    made = claim(
        Finding(
            "s0.lambda.{flag}_prompts",
            Estimate(0.1, 0.05, 0.2, 8),
            {"flag": "rouge", "name": "Rouge Prompts", "low_lam": 0.0, "high_lam": 2.0},
        )
    )
    assert made.id == "s0.lambda.rouge_prompts"
    assert made.effect_name.startswith("share of Rouge Prompts at λ = 2 minus at λ = 0 ")
    assert made.units == "8 contexts"


def test_missing_data_makes_a_claim_inconclusive_and_says_what_the_interval_reads():
    made = claim(finding(0.2, 0.1, 0.3, missing="two training runs"))
    assert made.verdict == INCONCLUSIVE
    assert made.note == "needs two training runs; the interval alone reads reproduced"


def test_spec_and_finding_notes_are_joined():
    spec = "s3.below_{only_slug}.{target_slug}"
    fields = {"target": "JFT", "target_slug": "jft", "only": "AIRLINE Only",
              "only_slug": "airline_only", "domain": "AIRLINE", "runs": ""}  # fmt: skip
    made = claim(Finding(spec, Estimate(-0.1, -0.2, -0.05, 60), fields, note="few prompts"))
    assert made.note == CATALOGUE[spec].note + "; few prompts"
    assert made.quote.endswith("lower than the AIRLINE Only baseline.")


def test_a_data_null_is_taken_only_where_the_spec_leaves_it_open():
    fields = {"n": 1, "m": 4, "largest": "h128"}
    open_null = Finding("s1.partial_trailing_mismatch.n{n}", Estimate(0.5, 0.4, 0.6, 20), fields,
                        null=0.25)  # fmt: skip
    assert claim(open_null).null == 0.25 and claim(open_null).verdict == REPRODUCED
    with pytest.raises(PrivleakError, match="not both"):
        claim(finding(0.2, 0.1, 0.3, null=0.5))
    with pytest.raises(PrivleakError, match="not both"):
        claim(Finding("s1.partial_trailing_mismatch.n{n}", NONE, fields))


def test_no_interval_is_inconclusive():
    made = claim(Finding("s0.instruction_tuned.influence", NONE))
    assert made.verdict == INCONCLUSIVE and math.isnan(made.ci_low)


def test_evaluate_refuses_an_unknown_spec_and_an_unanswered_one():
    with pytest.raises(PrivleakError, match="no claim spec"):
        claim(Finding("s9.nothing", NONE))
    with pytest.raises(PrivleakError, match="claim specs without a finding"):
        evaluate([finding(0.2, 0.1, 0.3)])


def _t(effect: float, se: float = 0.05, units: int = 12) -> Estimate:
    test = Test(WELCH, effect, se=se, df=units - 1)  # a t-type procedure the coverage rule keeps
    low, high = test.interval(0.05)
    return Estimate(effect, low, high, units, test=test)


def test_identical_and_mirror_estimates_make_one_claim_that_lists_every_sentence():
    fields = {"a": "pad", "b": "refusal", "share": 0.9}
    mirror = {"a": "bounded_cid", "b": "pad", "share": 0.9}
    found = merged([
        claim(Finding("s4.frontier.{a}_over_{b}", _t(-0.2), fields)),
        claim(Finding("s4.frontier.{a}_over_{b}", _t(0.2), mirror)),  # its mirror image
        claim(Finding("s4.frontier.{a}_over_{b}", _t(-0.2, se=0.06), {**fields, "b": "dist"})),
    ])  # fmt: skip
    ids = ["s4.frontier.bounded_cid_over_pad", "s4.frontier.pad_over_dist"]
    assert [c.id for c in found] == ids
    kept = found[0]
    assert kept.also == "s4.frontier.pad_over_refusal"
    assert "the same estimate tests s4.frontier.pad_over_refusal (its mirror image)" in kept.note
    assert kept.note.endswith("which it reads reproduced")
    assert kept.verdict == "contradicted"  # bounded CID over PAD: +0.2, the paper side is below
    assert found[1].also == ""  # another standard error: another estimate


def test_identical_exact_test_outcomes_are_not_merged():
    def exact(wins):
        test = Test(TANGO, 0.3, wins=wins, losses=0, pairs=10)
        return Estimate(0.3, *test.interval(0.05), 10, test=test)

    found = merged([claim(Finding("s4.accuracy_rises_with_voters", exact(3), {"low": 1, "high": 5,
                   "epsilon": 5, "documents": 3})),
                   claim(Finding("s4.accuracy_rises_with_epsilon", exact(3), {"low": 1,
                   "high": 20}))])  # fmt: skip
    assert all(math.isfinite(c.ci_low) for c in found)
    assert len(found) == 2  # a few discrete outcomes can coincide by chance


def test_roles_come_from_the_papers_abstracts_and_conclusions_and_checks_apart():
    keyword = {"target": "JFT", "target_slug": "jft", "policy": "keyword", "runs": ""}
    assert claim(Finding("s3.redaction_leaks_less_than_public.{target_slug}.{policy}", _t(-0.1),
                         keyword)).role == "check"  # fmt: skip
    classifier = claim(Finding("s3.redaction_leaks_less_than_public.{target_slug}.{policy}",
                               _t(-0.1), {**keyword, "policy": "classifier"}))  # fmt: skip
    assert classifier.role == "primary"
    assert classifier.primary_quote.startswith("Domain privacy becomes feasible")
    # only Dist. and Summ. are the abstract's "existing ... defenses": Static is a body baseline
    s2 = "s2.pad_leaks_less_than_{base}.{outcome}.{corpus}"
    fields = {"outcome": "rouge", "corpus": "enron", "label": "ROUGE-L"}
    assert claim(Finding(s2, _t(-0.1), {**fields, "base": "dist"})).role == "primary"
    assert claim(Finding(s2, _t(-0.1), {**fields, "base": "static"})).role == "secondary"
    assert claim(finding(0.2, 0.1, 0.3)).role == "primary"  # s0.lambda.influence
    assert CATALOGUE["s0.related_work.duplication.{kind}"].primary is None
    for spec in CATALOGUE.values():  # a check is never a primary claim of the same instances
        assert not (spec.check and spec.primary and not spec.check.only)
