"""paper-tiny: every S0, S1, S4, S2 and S3 stage under `profile: paper`, with the paper's options
kept and its hub models and datasets swapped for tiny local equivalents (CPU, float32, a few
examples).

Kept paper options: plain template, two LMs (an OPT with a padded vocabulary, as OPT's 50272
logits over 50265 tokens, and a Llama), an S1 model list, a `file:` sequence list, `hf:` corpora
read from save_to_disk folders in the hub datasets' schemas (CNN-DM split slice, PubMedQA's
nested `context` and integer `pubid`), monte-carlo over both kinds, FactKB faithfulness (a tiny
local classifier folder), fine-tuning disabled; S4 keeps the chat template (a tiny Llama whose
tokenizer has a ChatML template stands in for Phi-3.5-mini), the published top-p retrieval and
both epsilons, on a tiny `file:` export in the published corpus's columns read through the
paper's `fields`. S2 keeps its three `hf:` corpora in the hub datasets'
schemas (ChatDoctor's instruction/input/output, enron-email's text) with the paper's `fields`,
the OPT as its LM, a cross-encoder reranker (a tiny local BERT folder loaded by
sentence_transformers' CrossEncoder, for bge-reranker-large), every defense, ablation and sweep
(shortened), and the accountant; an hf: corpus has no planted ground truth, so its secrets and
exact secret probabilities are empty, and its prompts are untargeted, as the paper profile says
(the hub datasets have no `topic` column to target). S3 runs in its own project: a tiny local
GPT-2 folder as the base checkpoint and synthetic dialogs at the paper's `file:` MultiDoGo path
(see the S3 section below). Not exercisable offline: the `bert-score` backend (package not
installed; the MiniLM backend stands in), hub ids, cuda/float16/device_map.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from tokenizers import processors

from privleak.data.dialogs import PUBLIC_DOMAINS
from privleak.data.medical import document_text, symptom_question
from privleak.data.records import write_jsonl
from privleak.data.synthetic import generate
from privleak.metrics import sequence as seq
from privleak.report import papers
from privleak.training.family import train_tokenizer
from tests.conftest import tiny_bert_classifier, tiny_llama, tiny_opt, word_tokenizer
from tests.test_dp_rag import CHATML

pytestmark = pytest.mark.paper_tiny

REPO = Path(__file__).resolve().parents[1]
# DAG order of the S1, S0, S4 and S2 stages; prepare_models/context_gain are not among them (the
# paper profile's LMs, S2's included, are local folders here).
STAGES = [
    "prepare_data",
    "train_family",
    "train_family_seeds",
    "s1_scores",
    "s1_seeds",
    "s1_isp",
    "s1_public",
    "render_s1",
    "s0_generate",
    "s0_finetune",
    "s0_ngram",
    "s0_text",
    "s0_family",
    "render_s0",
    "s4_retrieve",
    "s4_generate",
    "render_s4",
    "s2_index",
    "s2_generate",
    "s2_matched",
    "s2_perplexity",
    "s2_length",
    "render_s2",
    "s3_prepare",
    "s3_train",
    "s3_attack",
    "render_s3",
    "audit_dp_rag",
    "audit_cid",
    "audit_pad",
    "audit_conformance",
    "render_audit",
    "mia_references",
    "mia_score",
    "render_mia",
    "frontier_generate",
    "render_frontier",
    "render_claims",
    "report",
]
# The paper profile's own relative path of its `file:` sequence list.
SEQUENCES = yaml.safe_load((REPO / "params.yaml").read_text())["s1"]["paper"]["scores"][
    "sequences"
].removeprefix("file:")
PADDED_ROWS = 8
# S4 reads a tiny `file:` export shaped like the published corpus (sarus-tech/
# medical_dirichlet_phi3's columns) through the paper profile's own `fields` mapping.
S4_PATIENTS, S4_DISEASES = 24, 4
S4_EXPORT = "data/external/corpora/medical_dirichlet_phi3_tiny.jsonl"
# S2: each hub-like corpus holds S2_ROWS rows, of which the slot keeps the first S2_DOCUMENTS.
S2_ROWS, S2_DOCUMENTS, S2_PROMPTS = 10, 8, 3
S2_CORPORA = {"healthcaremagic": "ChatDoctor-HealthCareMagic-100k",
              "icliniq": "ChatDoctor-iCliniq", "enron": "enron-email"}  # fmt: skip
RERANKER_WEIGHT_SCALE = 30.0
# ChatDoctor's instruction column, the same in every row.
CHATDOCTOR_INSTRUCTION = (
    "If you are a doctor, please answer the medical questions based on the patient's description."
)


def _lm_tokenizer(texts: list[str]):
    # Byte-level BPE like OPT's, prepending a BOS on encode like OPT and Llama-2 do.
    tokenizer = train_tokenizer(texts, vocab_size=400)
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]
    )
    return tokenizer


def _save_lms(root: Path, texts: list[str]) -> dict[str, str]:
    tokenizer = _lm_tokenizer(texts)
    real = len(tokenizer)
    built = {
        # OPT's own 2048 positions: S2's prompts hold three retrieved documents.
        "opt": tiny_opt(vocab_size=real + PADDED_ROWS, window=2048),
        "llama": tiny_llama(vocab_size=real, window=256, seed=1),
    }
    folders = {}
    for name, model in built.items():
        folder = root / "models" / f"tiny-{name}"
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders[name] = str(folder)
    return folders


def _save_chat_lm(root: Path) -> str:
    """A tiny Llama whose byte-level BPE tokenizer, trained on medical_dirichlet documents, has
    ChatML markers as special tokens and a ChatML chat template (the S4 paper LM's stand-in)."""
    records, _ = generate("medical_dirichlet", 40, 7, {"diseases": 5, "rare_details": 5})
    tokenizer = train_tokenizer([document_text(r) for r in records], vocab_size=400)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tokenizer.chat_template = CHATML
    folder = root / "models" / "tiny-chat"
    tiny_llama(vocab_size=len(tokenizer), window=2048, seed=2).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _hub_like_datasets(root: Path) -> dict[str, str]:
    """save_to_disk folders with the hub datasets' splits and columns, from synthetic records."""
    from datasets import Dataset, DatasetDict

    cnn, _ = generate("cnn_dm", 4, 7, {"min_words": 120})
    pubmed, _ = generate("pubmedqa", 3, 7, {"min_words": 120})
    pubmed = [
        {
            "pubid": 1000 + i,
            "question": r["question"],
            "context": {
                "contexts": r["context"].split(". "),
                "labels": ["BACKGROUND"],
                "meshes": [],
            },
            "long_answer": r["long_answer"],
            "final_decision": r["final_decision"],
        }
        for i, r in enumerate(pubmed)
    ]
    folders = {"cnn_dm": root / "hub" / "cnn_dailymail", "pubmedqa": root / "hub" / "PubMedQA"}
    DatasetDict({"test": Dataset.from_list(cnn)}).save_to_disk(folders["cnn_dm"])
    DatasetDict({"train": Dataset.from_list(pubmed)}).save_to_disk(folders["pubmedqa"])
    return {slot: str(folder) for slot, folder in folders.items()}


def _chatdoctor_row(dialogue: str) -> dict[str, str]:
    """A synthetic dialogue ("[Patient: ]<question>\n(Doctor|Answer): <answer>") as a ChatDoctor
    row: the patient's question is `input`, the doctor's answer `output`."""
    question, answer = re.split(r"\n(?:Doctor|Answer): ", dialogue, maxsplit=1)
    return {
        "instruction": CHATDOCTOR_INSTRUCTION,
        "input": question.removeprefix("Patient: "),
        "output": answer,
    }


def _hub_like_s2_corpora(root: Path) -> tuple[dict[str, str], list[str]]:
    """save_to_disk folders in the S2 hub datasets' schemas (a train split; ChatDoctor's
    instruction, input and output strings, enron-email's text), from the synthetic dialogues and
    emails, and the texts the corpora's `fields` pick (for the tokenizers)."""
    from datasets import Dataset, DatasetDict

    folders, texts = {}, []
    for corpus, hub_name in S2_CORPORA.items():
        records, _ = generate(corpus, S2_ROWS, 7, None)
        if corpus == "enron":
            rows = [{"text": r["text"]} for r in records]
        else:
            rows = [_chatdoctor_row(r["text"]) for r in records]
        folders[corpus] = str(root / "hub" / hub_name)
        DatasetDict({"train": Dataset.from_list(rows)}).save_to_disk(folders[corpus])
        texts += [row.get("input", row.get("text")) for row in rows]
    return folders, texts


def _save_cross_encoder(root: Path, texts: list[str]) -> str:
    """A tiny BERT scoring a (query, text) pair by one logit (num_labels=1, as bge-reranker-large)
    and a byte-level BPE tokenizer trained on the S2 texts that encodes a pair as
    "<s> query </s> text </s>" with segment ids: a folder sentence_transformers' CrossEncoder
    loads offline (it truncates pairs to the model's 64 positions). Default-initialised weights
    score every pair alike to within float noise; larger ones spread the scores, so the order is
    the model's."""
    tokenizer = train_tokenizer(texts, vocab_size=400)
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> $B:1 </s>:1",
        special_tokens=[("<s>", 1), ("</s>", 2)],
    )
    folder = root / "models" / "tiny-reranker"
    model = tiny_bert_classifier(num_labels=1, vocab_size=len(tokenizer))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(RERANKER_WEIGHT_SCALE if parameter.dim() > 1 else 1.0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _sequence_file(root: Path) -> list[str]:
    """The `file:` S1 list: a few planted sequences of each kind from a synthetic corpus."""
    options = {"doc_words": 60, "duplication_counts": [1, 2], "sequences_per_count": 2}
    options |= {"ne_prefix_words": 55, "long_prefix_words": 55, "long_suffix_words": 55}
    records, secrets = generate("pretrain", 12, 3, options)
    rows = seq.planted_sequences(records, secrets)
    write_jsonl(rows, root / SEQUENCES)
    return [r["prefix"] + r["suffix"] for r in rows] + [r["text"] for r in records]


def _mia_files(root: Path, params: dict) -> None:
    """The paper profile's member and non-member files, at its own paths: planted sequences of a
    synthetic corpus, the first half as members (one with a duplication count)."""
    mia = params["mia"]["paper"]
    records, secrets = generate("pretrain", 12, 5, {"doc_words": 40, "sequences_per_count": 2,
                                                    "duplication_counts": [1, 2]})  # fmt: skip
    rows = [{"id": r["seq_id"], "text": r["prefix"] + r["suffix"], "duplicates": r["duplicates"]}
            for r in seq.planted_sequences(records, secrets)]  # fmt: skip
    half = len(rows) // 2
    write_jsonl(rows[:half], root / mia["members"].removeprefix("file:"))
    others = [{"id": r["id"], "text": r["text"]} for r in rows[half:]]
    write_jsonl(others, root / mia["non_members"]["source"].removeprefix("file:"))


def _paper_params(
    root: Path, lms: dict, hub: dict, factkb: str, chat_lm: str, s2_hub: dict, reranker: str
) -> dict:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["profile"] = "paper"
    smoke = {group: params[group]["smoke"] for group in ("data", "family", "s1", "s0")}
    params["models"]["paper"] |= {
        "lm": lms["opt"],
        "embedder": "all-minilm-l6-v2",  # the hub MiniLM, shipped in a wheel
        "device": "cpu",
        "dtype": "float32",
        "device_map": None,
    }
    data = params["data"]["paper"]
    data["cnn_dm"]["source"] = f"hf:{hub['cnn_dm']}:test[:3]"
    data["pubmedqa"]["source"] = f"hf:{hub['pubmedqa']}:train"
    data["pretrain"] = smoke["data"]["pretrain"]  # only train_family reads it (S0 Fig. 2a/4)
    params["family"]["paper"] = smoke["family"] | {
        "sizes": {k: v for k, v in smoke["family"]["sizes"].items() if k in ("h8", "h16")}
    }
    s1 = params["s1"]["paper"]
    s1["scores"] |= {
        "models": [lms["llama"], lms["opt"]],
        "prefix_lengths": [10, 30, 50],
        "batch_size": 8,
        "device": "cpu",
        "dtype": "float32",
    }
    s1["scores"]["monte_carlo"] |= {"sequences": 2, "samples": 5}
    s1["isp"] |= {"sampling_expand": 16, "batch_size": 8}
    s1["public"] |= {"model": lms["llama"], "per_family": 1, "max_windows": 1, "batch_size": 8}
    s0 = params["s0"]["paper"]
    s0 |= {
        "lms": [lms["opt"], lms["llama"]],
        "n_examples": 2,
        "context_tokens": 48,
        "max_new_tokens": 8,
        "min_new_tokens": 2,
        "bertscore": {"backend": "minilm", "model": None},  # bert-score is not installed
        "faithfulness": f"factkb:{factkb}",
    }
    s0["sweep"] |= {"examples": 1, "temperatures": [0.5, 1.0], "lams": [0.0, 1.0, 2.0]}
    s0["context_sizes"] |= {"examples": 1, "sizes": [8, 32]}
    s0["ngram"] |= {"examples": 1, "ns": [16, 4], "unigram_context_tokens": 16}
    s0["bounded"] |= {"examples": 1, "eps": [0.5, 2.0], "n": 16}
    s0["family"] |= {"examples": 1, "context_tokens": 48, "max_new_tokens": 8, "n": 16}
    s4 = params["s4"]["paper"]
    s4["lm"] = chat_lm
    s4["corpus"] |= {"source": f"file:{S4_EXPORT}", "revision": None}  # the `fields` are kept
    s4["generation"] |= {"max_new_tokens": 4, "max_batch_streams": 8, "rag_k": 2}
    s4["sweeps"] |= {
        "voters": [2, 4],
        "voters_min_documents": 5,
        "thetas": [0.0],
        "thetas_min_documents": 5,
    }
    s4["densities"] |= {"documents": 10, "draws": 200}
    s4["published"] |= {"max_new_tokens": 6}  # the published layout, shortened
    s2 = params["s2"]["paper"]
    s2 |= {"lm": lms["opt"], "evaluator": lms["opt"], "embedder": "all-minilm-l6-v2"}
    for corpus, spec in s2["corpora"].items():  # the paper's `fields` mappings are kept
        spec |= {"source": f"hf:{s2_hub[corpus]}:train", "n": S2_DOCUMENTS}
    s2["embed_batch_size"] = 4
    s2["attack"]["prompts"] = S2_PROMPTS
    s2["retrieval"]["reranker"] = reranker
    s2["decoding"] |= {"max_new_tokens": 4, "max_batch_streams": 8}
    s2["sweeps"] = {"amplifications": [1.0, 5.0], "epsilons": [0.05, 1.0], "static_sigmas": [0.5]}
    # MiniLM puts these prompts 1.3-1.5 (L2) from every document: 1.4 keeps some of them.
    s2["distance"]["sweep"] = [1.0, 1.4]
    s2["summary"]["max_new_tokens"] = 4
    s2["length"] = {"prompts": 1, "max_new_tokens": 8}
    s2["esp"] |= {"prompts": 2, "draws": 2}
    s2["accounting"]["lengths"] = [2, 4]
    audit = params["audit"]["paper"]
    audit["canaries"] |= {
        "count": 2,
        "documents": 2,
        "n": 30,
        "options": {"diseases": 4, "concentration": 0.5, "rare_details": 2},
    }
    audit |= {"samples": 2, "max_new_tokens": 4, "batch_rows": 16}
    params["conformance"]["paper"] = {"vocab": 4, "bases": 1}
    # MIA keeps the paper profile's file: members and non-members; two listed models, the first
    # the reference.
    # Two workers: the stage's own process path (its job and arguments pickled), not the loop.
    params["mia"]["paper"] |= {"models": [lms["llama"], lms["opt"]], "reference": lms["llama"],
                               "batch_size": 4, "workers": 2}  # fmt: skip
    # The frontier on S4's export (no planted secrets: its records' patient names), one setting a
    # defense, S4's chat LM
    frontier = params["frontier"]["paper"]
    frontier |= {"units": 1, "top_contexts": 2, "max_batch_streams": 16,
                 "defenses": {"static": [1.0], "pad": [0.2], "cid": [0.5], "bounded_cid": [1.0],
                              "dp_icl": [5.0], "dist": [1.0], "summ": [], "redact_keyword": [],
                              "redact_classifier": [0.5]},
                 "comparisons": [["pad", "static"], ["dp_icl", "refusal"]]}  # fmt: skip
    frontier["attack"] |= {"max_new_tokens": 16}  # the byte-level BPE spends 8 tokens on a name
    frontier["summary"] |= {"max_new_tokens": 4}
    frontier["redaction"]["classifier"] |= {"train_documents": 10}
    return params


def _published_like_s4_export(root: Path) -> None:
    """The published corpus's columns (its data.py rows): patient_id, patient_name,
    patient_request, doctor_response, symptom (a list, the disease's), disease, treatment; no
    `question` (derived from the symptoms) and no planted facts."""
    options = {"diseases": S4_DISEASES, "concentration": 1.0, "rare_details": 0}
    records, _ = generate("medical_dirichlet", S4_PATIENTS, 7, options)
    lead, end = "I am experiencing the following symptoms: ", ". What is my disease?"
    rows = []
    for index, record in enumerate(records):
        symptoms = record["question"].removeprefix(lead).removesuffix(end).split(", ")
        assert symptom_question(symptoms) == record["question"]
        rows.append(
            {
                "patient_id": index,
                "patient_name": record["patient"],
                "patient_request": record["request"],
                "doctor_response": record["response"],
                "symptom": symptoms,
                "disease": record["disease"],
                "treatment": "rest",
            }
        )
    write_jsonl(rows, root / S4_EXPORT)


def _run_stage(root: Path, stage: str) -> str:
    """The stage's runner stderr tail when it failed, else ''. One torch thread: two stages run
    side by side on the two cores."""
    env = os.environ | {"PRIVLEAK_ROOT": str(root), "PYTHONPATH": str(REPO / "lib"),
                        "OMP_NUM_THREADS": "1"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "privleak.pipeline.stage", stage],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    return "" if done.returncode == 0 else f"{stage}: {done.stderr[-2000:]}"


def _upstream(stages: list[str]) -> dict[str, set[str]]:
    """{stage: the stages among `stages` that write a path it depends on}, from dvc.yaml's
    deps, outs and metrics (a dep inside an output, or an output inside a dep, counts)."""
    declared = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]

    def names(entries) -> list[str]:
        return [next(iter(e)) if isinstance(e, dict) else e for e in entries]

    outs = {s: names(declared[s].get("outs", []) + declared[s].get("metrics", [])) for s in stages}
    inside = lambda a, b: a == b or a.startswith(b.rstrip("/") + "/")  # noqa: E731
    return {
        s: {t for t in stages if t != s
            for dep in names(declared[s].get("deps", [])) for out in outs[t]
            if inside(dep, out) or inside(out, dep)}
        for s in stages
    }  # fmt: skip


def _run_stages(root: Path, stages: list[str], lanes: int = 2) -> None:
    """Every stage once, each as soon as its upstream stages are done, `lanes` at a time: the
    fixture's whole DAG run is mostly per-stage start-up (imports, kernel), one core each."""
    upstream, done, failed, running = _upstream(stages), set(), [], {}
    with ThreadPoolExecutor(lanes) as pool:
        while len(done) < len(stages) and not failed:
            for stage in stages:
                if stage not in done and stage not in running and upstream[stage] <= done:
                    if len(running) < lanes:
                        running[stage] = pool.submit(_run_stage, root, stage)
            assert running, f"no stage can start: {sorted(set(stages) - done)}"
            finished, _ = wait(running.values(), return_when=FIRST_COMPLETED)
            for stage in [s for s, future in running.items() if future in finished]:
                error = running.pop(stage).result()
                done.add(stage)
                failed += [error] if error else []
    assert not failed, failed[0]


@pytest.fixture(scope="module")
def paper_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("paper_tiny")
    shutil.copytree(REPO / "notebooks", root / "notebooks")
    shutil.copytree(REPO / "data" / "papers", root / "data" / "papers")
    shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
    texts = _sequence_file(root)
    _published_like_s4_export(root)
    hub = _hub_like_datasets(root)
    texts += [r["article"] for r in generate("cnn_dm", 8, 7, {"min_words": 120})[0]]
    s2_hub, s2_texts = _hub_like_s2_corpora(root)
    lms = _save_lms(root, texts + s2_texts)
    factkb = root / "models" / "tiny-factkb"
    tiny_bert_classifier().save_pretrained(factkb)
    word_tokenizer(add_bos=False).save_pretrained(factkb)
    reranker = _save_cross_encoder(root, s2_texts)
    params = _paper_params(root, lms, hub, str(factkb), _save_chat_lm(root), s2_hub, reranker)
    _s3_paper_params(root, params)
    _mia_files(root, params)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _run_stages(root, STAGES)
    return root


def _lm_names(root: Path) -> list[str]:
    return [str(root / "models" / "tiny-opt"), str(root / "models" / "tiny-llama")]


def test_every_stage_writes_its_declared_outputs(paper_root):
    env_root = {"PRIVLEAK_ROOT": str(paper_root)}
    code = (
        "from privleak.pipeline import params; import json; "
        f"print(json.dumps({{s: [str(p) for p in params.stage_outputs(s)] for s in {STAGES}}}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=os.environ | env_root | {"PYTHONPATH": str(REPO / "lib")},
        capture_output=True,
        text=True,
        check=True,
    )
    for stage, outputs in json.loads(done.stdout).items():
        for output in map(Path, outputs):
            assert output.exists(), f"{stage} did not write {output}"
            assert output.is_file() or any(output.iterdir()), f"{stage}: {output} is empty"


def test_the_report_shows_every_card_and_claim_under_the_paper_profile(paper_root):
    page = (paper_root / "reports" / "index.html").read_text()
    for paper in papers.load_all().values():
        for card in paper.cards:
            assert page.count(f'<article class="card" id="{card.id}">') == 1, card.id
    for claim in pd.read_csv(paper_root / "figures" / "claims" / "claims.csv")["id"]:
        assert page.count(f'<b class="claim-id">{claim}</b>') == 1, claim
    assert "Profile <b>paper</b>" in page


def test_the_frontier_attacks_the_exports_patient_names_under_every_defense(paper_root):
    generated = paper_root / "data" / "interim" / "frontier" / "generate"
    leakage = pd.read_parquet(generated / "leakage.parquet")
    points = pd.read_parquet(generated / "points.parquet")
    assert set(leakage["kind"]) == {"name"} and len(leakage) >= len(points)
    assert set(leakage["point"]) == set(points["point"])
    matched = pd.read_csv(paper_root / "figures" / "frontier" / "frontier_matched.csv")
    assert {"refusal", "dp_icl", "pad"} <= set(matched["defense"])


def test_mia_scores_the_listed_models_on_the_paper_profiles_member_files(paper_root):
    table = pd.read_csv(paper_root / "figures" / "mia" / "mia_table.csv")
    llama, opt = str(paper_root / "models" / "tiny-llama"), str(paper_root / "models" / "tiny-opt")
    assert set(table["model"]) == {llama, opt}
    attacks = table.groupby("model")["attack"].agg(set)
    assert attacks[opt] == {"loss", "zlib", "min_k", "min_k_plus_plus", "reference"}
    assert attacks[llama] == {"loss", "zlib", "min_k", "min_k_plus_plus"}  # it is the reference
    assert (table["runs"] == 1).all() and table["effect"].between(0, 1).all()
    assert (paper_root / "data" / "mia_references" / "manifest.json").exists()  # nothing trained


def test_every_figure_is_written_in_every_format(paper_root):
    for folder in ("s0", "s1", "s2", "s3"):
        stems = {p.stem for p in (paper_root / "figures" / folder).glob("*.png")}
        assert stems, f"figures/{folder} has no figure"
        for stem in stems:
            assert (paper_root / "figures" / folder / f"{stem}.pdf").exists()


def test_s0_renders_group_every_row_by_model(paper_root):
    models = set(_lm_names(paper_root))
    figures = paper_root / "figures" / "s0"
    for name in ("s0_table2", "s0_table3", "s0_table4", "s0_fig2b", "s0_fig2c", "s0_fig7",
                 "s0_fig8", "s0_theorem31"):  # fmt: skip
        table = pd.read_csv(figures / f"{name}.csv")
        assert set(table["model"]) == models, name
    # One row per (model, setting): a mixed group would have merged the two models' rows.
    table2 = pd.read_csv(figures / "s0_table2.csv")
    assert not table2.duplicated(["model", "corpus", "lam"]).any()
    assert (table2.groupby("model")["prompts"].sum() > 0).all()
    by_size = pd.read_csv(figures / "s0_fig2b.csv")
    assert len(by_size) == 2 * by_size["context_limit"].nunique()


def test_s0_text_metrics_use_the_factkb_classifier(paper_root):
    text = pd.read_parquet(paper_root / "data" / "interim" / "s0" / "text" / "text_metrics.parquet")
    assert text["faithfulness_kind"].str.startswith("factkb:").all()
    assert text["faithfulness"].between(0, 1).all()
    assert set(text["model"]) == set(_lm_names(paper_root))


def test_s1_scores_every_listed_model_on_the_file_sequences(paper_root):
    esp = pd.read_parquet(paper_root / "data" / "interim" / "s1" / "scores" / "esp.parquet")
    assert esp.groupby("model")["model_rank"].first().to_dict() == {
        str(paper_root / "models" / "tiny-llama"): 0,
        str(paper_root / "models" / "tiny-opt"): 1,
    }
    assert set(esp["kind"]) == {"named_entity", "long_sequence"}
    metrics = json.loads((paper_root / "metrics" / "s1.json").read_text())
    assert metrics["family_models"] == [
        str(paper_root / "models" / n) for n in ("tiny-llama", "tiny-opt")
    ]


def test_claims_are_judged_from_the_paper_profile_artifacts(paper_root):
    frame = pd.read_csv(paper_root / "figures" / "claims" / "claims.csv").set_index("id")
    body = json.loads((paper_root / "metrics" / "claims.json").read_text())
    claims = frame[frame["role"] != "check"]  # checks of our own mechanisms are counted apart
    assert set(body["claims"]) == set(frame.index) and body["total"] == len(claims)
    assert sum(body["counts"].values()) == len(claims)
    assert sum(body["checks"].values()) == len(frame) - len(claims)
    notes = frame["note"].fillna("")
    # S1's paper models are a list of pretrained models, not the in-pipeline family: no seeds.
    size_claims = [i for i in frame.index if i.startswith("s1.larger_model_on_average.")]
    assert size_claims and not notes[size_claims].str.contains("training runs").any()
    # The paper profile disables S0's fine-tuned miniature; the family is still trained once.
    assert "needs s0_finetune responses" in notes["s0.known_context.influence"]
    assert "training runs" in notes["s0.model_size.influence"]
    # S3's targets ran S3_SEEDS times (= min_units here): runs x prompts (or dialogs) resampled.
    s3 = frame[frame.index.str.startswith("s3.")]
    assert len(s3) == 25 and s3["units"].str.endswith(f"x {S3_SEEDS} training runs").all()
    assert not notes[s3.index].str.contains("needs an interval over").any()
    perplexity = s3[s3.index.str.contains("perplexity")]
    assert len(perplexity) == 4 and perplexity["ci_low"].map(math.isfinite).all()


def test_the_audit_runs_every_mechanism_and_setting_of_the_paper_profile(paper_root):
    table = pd.read_csv(paper_root / "figures" / "audit" / "audit_table.csv")
    params = yaml.safe_load((paper_root / "params.yaml").read_text())
    s0, s2, s4 = (params[p]["paper"] for p in ("s0", "s2", "s4"))
    expected = {
        "dp_rag": {f"eps{e:g}" for e in s4["budget"]["epsilons"]}
        | {f"eps{s4['budget']['epsilons'][0]:g}_broken"},
        "cid": {f"eps{e:g}" for e in s0["bounded"]["eps"]} | {"no_search"},
        "pad": {f"eps{e:g}" for e in {*s2["sweeps"]["epsilons"], s2["pad"]["epsilon"]}}
        | {f"eps{s2['pad']['epsilon']:g}_broken"},
    }
    for mechanism, variants in expected.items():
        assert set(table.loc[table["mechanism"] == mechanism, "variant"]) == variants
    assert (table["canaries"] == 2).all()
    correct = table[~table["broken"]]
    assert correct["nominal_epsilon"].notna().sum() == (correct["mechanism"] != "cid").sum()
    # DP-ICL and bounded CID never exceed their per-token epsilon, whatever the model.
    pure = correct[correct["mechanism"] != "pad"]
    assert (pure["audited_token"] <= pure["nominal_token"] * (1 + 1e-4)).all()
    metrics = json.loads((paper_root / "metrics" / "audit.json").read_text())
    assert set(metrics["flagged"]) == {f"{m}/{v}" for m, vs in expected.items() for v in vs}


def test_s4_asks_every_patient_with_both_decoders_at_every_epsilon(paper_root):
    s4 = paper_root / "data" / "interim" / "s4"
    questions = pd.read_parquet(s4 / "retrieve" / "questions.parquet")
    assert len(questions) == S4_PATIENTS and (questions["kind"] == "disease").all()
    assert questions["fig6"].all()  # every patient is asked: no sweep-only question
    assert questions["question"].str.startswith("I am experiencing the following symptoms: ").all()
    assert (questions["chosen"].map(len) == questions["above"]).all()  # no cap: all above tau
    assert (questions["rag"].map(len) == 2).all()
    responses = pd.read_parquet(s4 / "generate" / "responses.parquet")
    s4_params = yaml.safe_load((paper_root / "params.yaml").read_text())["s4"]["paper"]
    # the budget's epsilons and the swept ones, every question at each
    epsilons = s4_params["budget"]["epsilons"] + s4_params["sweeps"]["epsilons"]
    main = responses[responses["sweep"] == "main"]
    runs = main.groupby(["decoder", "epsilon"])["question_id"].agg(sorted)
    assert set(runs.index) == {("dp_rag", e) for e in epsilons} | {("rag", float("inf"))}
    assert all(ids == sorted(questions["question_id"]) for ids in runs)
    dp_rag = main[main["decoder"] == "dp_rag"].merge(
        questions[["question_id", "chosen"]], on="question_id"
    )
    assert (dp_rag["documents"] == dp_rag["chosen"].map(len)).all()
    assert (dp_rag["public_only"] == (dp_rag["documents"] == 0)).all()
    assert main["new_tokens"].between(1, 4).all()
    long = responses[responses["sweep"] == "published"]  # the published answer length, no prefix
    assert set(long["epsilon"]) == set(s4_params["published"]["epsilons"])
    assert len(long) == len(questions) * len(s4_params["published"]["epsilons"])
    assert long["new_tokens"].between(1, 6).all() and (long["answer_prefix"] == "").all()
    swept = responses[responses["sweep"] == "voters"]
    assert set(swept["voters"]) == {2, 4} and (swept["frequency"] >= 5).all()


def test_s4_published_export_plants_no_facts(paper_root):
    planted = pd.read_parquet(
        paper_root / "data" / "interim" / "s4" / "generate" / "planted.parquet"
    )
    assert planted.empty
    claims = pd.read_csv(paper_root / "figures" / "claims" / "claims.csv", index_col="id")
    assert claims.loc["s4.censors_individual_knowledge", "verdict"] == "inconclusive"


def _s2_params(root: Path) -> dict:
    return yaml.safe_load((root / "params.yaml").read_text())["s2"]["paper"]


def test_s2_answers_every_prompt_under_every_defense_and_sweep_point(paper_root):
    s2, folder = _s2_params(paper_root), paper_root / "data" / "interim" / "s2"
    prompts = pd.read_parquet(folder / "index" / "prompts.parquet")
    responses = pd.read_parquet(folder / "generate" / "responses.parquet")
    pad = s2["pad"]
    sweep = {
        "ablation": {"no_calib", "no_sens"},
        "amplification": {
            f"amplification={v:g}" for v in s2["sweeps"]["amplifications"]
            if v != pad["amplification"]
        },
        "epsilon": {f"epsilon={v:g}" for v in s2["sweeps"]["epsilons"] if v != pad["epsilon"]},
        "distance": {f"dist={v:g}" for v in s2["distance"]["sweep"]},
        "static": {f"static={v:g}" for v in s2["sweeps"]["static_sigmas"]
                   if v != s2["static_sigma"]},
    }  # fmt: skip
    assert set(responses["corpus"]) == set(S2_CORPORA)
    for corpus in S2_CORPORA:
        asked = sorted(prompts.loc[prompts["corpus"] == corpus, "prompt_id"])
        assert len(asked) == S2_PROMPTS
        rows = responses[responses["corpus"] == corpus]
        expected = {("table", d) for d in ("extraction", "summ", "dist", "static", "pad")}
        if corpus == s2["sweep_corpus"]:
            expected |= {(family, d) for family, names in sweep.items() for d in names}
        answered = rows.groupby(["family", "defense"])["prompt_id"].agg(sorted)
        assert set(answered.index) == expected, corpus
        assert all(ids == asked for ids in answered), corpus
    # Each response names the contexts its defense placed in its prompt: the retrieved top
    # contexts, or (Dist., Summ.) some of them, never another candidate.
    retrieved = {(r.corpus, r.prompt_id): list(r.context_ids) for r in prompts.itertuples()}
    for r in responses.itertuples():
        own, top = list(r.context_ids), retrieved[(r.corpus, r.prompt_id)]
        if r.defense.startswith(("dist", "summ")):
            assert set(own) <= set(top) and own == [c for c in top if c in own], r.defense
        else:
            assert own == top, r.defense
    steps = responses["tokens"].map(len)
    assert steps.between(1, s2["decoding"]["max_new_tokens"]).all()
    for record in ("sigma", "sensitivity", "protected"):
        assert (responses[record].map(len) == steps).all(), record
    # PAD and its ablations and sweeps draw noise of a finite positive sigma at every step;
    # Static's is its fixed sigma; the undefended decoders draw none.
    noised = ~responses["defense"].isin(["extraction", "summ", "static"])
    noised &= ~responses["defense"].str.startswith("dist")
    sigmas = responses["sigma"].map(list)
    assert sigmas[noised].map(lambda v: all(math.isfinite(x) and x > 0 for x in v)).all()
    static = responses["defense"] == "static"
    recorded = float(np.float32(s2["static_sigma"]))  # the records are float32
    assert sigmas[static].map(lambda v: set(v) == {recorded}).all()
    assert sigmas[~noised & ~static].map(lambda v: set(v) == {0.0}).all()
    # Fig. 6a's accountant has PAD responses of every corpus at every length.
    lengths = pd.read_csv(paper_root / "figures" / "s2" / "s2_fig6a_data.csv")
    assert set(zip(lengths["corpus"], lengths["length"], strict=True)) == {
        (corpus, length) for corpus in S2_CORPORA for length in s2["accounting"]["lengths"]
    }


def test_s2_contexts_are_the_cross_encoders_top_candidates(paper_root):
    from privleak.vector_store import CrossEncoderScorer

    s2, folder = _s2_params(paper_root), paper_root / "data" / "interim" / "s2" / "index"
    prompts = pd.read_parquet(folder / "prompts.parquet")
    chunks = pd.read_parquet(folder / "chunks.parquet")
    # Each hub-like corpus is cut to its slot's first n rows.
    assert chunks.groupby("corpus")["record_id"].nunique().to_dict() == dict.fromkeys(
        S2_CORPORA, S2_DOCUMENTS
    )
    text = {(r.corpus, r.id): r.text for r in chunks.itertuples()}
    scorer = CrossEncoderScorer(s2["retrieval"]["reranker"])
    for r in prompts.itertuples():
        candidates = list(r.candidate_ids)
        assert len(candidates) == s2["retrieval"]["k"]
        scores = scorer(r.question, [text[(r.corpus, c)] for c in candidates])
        by_score = sorted(candidates, key=lambda c: -scores[candidates.index(c)])
        assert list(r.reranked_ids) == by_score
        assert list(r.context_ids) == by_score[: s2["retrieval"]["rerank_top"]]
    # The cross-encoder, not the L2 order, picked the contexts of some prompt.
    assert (prompts["reranked_ids"].map(list) != prompts["candidate_ids"].map(list)).any()


def test_s2_hub_corpora_carry_no_planted_secrets(paper_root):
    """An hf: corpus has no planted ground truth: no secret rows, no exact secret
    probabilities, and Table 1's cued secret column is empty; every other column is filled."""
    s2 = paper_root / "data" / "interim" / "s2"
    assert pd.read_parquet(s2 / "index" / "secrets.parquet").empty
    assert pd.read_parquet(s2 / "generate" / "esp.parquet").empty
    table1 = pd.read_csv(paper_root / "figures" / "s2" / "s2_table1.csv")
    assert set(table1["corpus"]) == set(S2_CORPORA)
    assert table1["cued_secrets"].isna().all()
    assert table1[["prompts", "retrieved_contexts", "ppl"]].notna().all().all()
    metrics = json.loads((paper_root / "metrics" / "s2.json").read_text())
    rows = [row for corpus in metrics["table1"].values() for row in corpus.values()]
    assert len(rows) == len(table1)
    assert all(row["cued_secrets"] is None for row in rows)


# ---------------------------------------------------------------- S3 (its own tiny project)
# S3's paper profile fine-tunes GPT-2 on MultiDoGo exports: here a tiny local GPT-2 folder (a
# byte-level BPE tokenizer trained on the dialogs, with GPT-2's conventions: no BOS added, no
# pad token, so models.load pads with EOS; dropout on) and synthetic dialogs written to the
# paper profile's own `file:` path (short ones: 3-4 exchanges). Every other paper option is kept
# except the sizes and the classifier's stride, set to its window (half the embedding work).
S3_DIALOGS, S3_PROMPTS, S3_SAMPLES, S3_SEEDS = 60, 2, 3, 6
S3_CORPUS = yaml.safe_load((REPO / "params.yaml").read_text())["s3"]["paper"]["corpus"][
    "source"
].removeprefix("file:")
S3_PUBLIC = yaml.safe_load((REPO / "params.yaml").read_text())["s3"]["paper"]["classifier"][
    "public"
]["source"].removeprefix("file:")


def _save_tiny_gpt2(root: Path, texts: list[str]) -> str:
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = train_tokenizer(texts, vocab_size=400)
    tokenizer.pad_token = None  # GPT-2 has none
    eos = tokenizer.eos_token_id
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=512, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=eos, eos_token_id=eos)  # fmt: skip
    torch.manual_seed(3)
    folder = root / "models" / "tiny-gpt2"
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _save_tiny_classifier_base(root: Path, texts: list[str]) -> str:
    """A tiny pretrained-LM folder for the classifier policy to fine-tune (the paper profile's
    roberta-base): GPT-2 shape with a pad token, as a sequence classifier needs one."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = train_tokenizer(texts, vocab_size=400)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=512, n_embd=16, n_layer=1, n_head=2,
                        pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    torch.manual_seed(4)
    folder = root / "models" / "tiny-classifier-base"
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _s3_paper_params(root: Path, params: dict) -> None:
    """The paper profile's S3 slots filled with local stand-ins: a `file:` MultiDoGo-like dialog
    corpus and its public-domain companion, and a tiny GPT-2 as the pretrained base."""
    options = {"domains": ["AIRLINE", "MEDIA", "INSURANCE"], "turns": [3, 4]}
    records, _ = generate("dialogs", S3_DIALOGS, 7, options)
    public, _ = generate("dialogs", S3_DIALOGS // 2, 8, options | {"domains": list(PUBLIC_DOMAINS)})
    for rows, path in ((records, S3_CORPUS), (public, S3_PUBLIC)):
        write_jsonl([{key: r[key] for key in ("id", "domain", "text")} for r in rows], root / path)
    s3 = params["s3"]["paper"]
    s3["base"] = _save_tiny_gpt2(root, [r["text"] for r in records + public])
    s3["classifier"]["model"] = _save_tiny_classifier_base(root, [r["text"] for r in records])
    s3["classifier"]["fine_tune"] |= {"epochs": 1, "learning_rate": 1.0e-3, "max_windows": 200}
    s3["classifier"]["batch_size"] = 64
    s3["train"] |= {"epochs": 1, "batch_size": 8, "seq_len": 512, "learning_rate": 1.0e-3}
    s3["schedule"] |= {"epochs": 2}  # twice Pub+Redacted's, as the paper profile trains
    s3["dp"] |= {"batch_size": 8, "learning_rate": 1.0e-3}
    s3["attack"] |= {"prompts": S3_PROMPTS, "samples": S3_SAMPLES, "max_new_tokens": 8,
                     "max_batch_streams": 2 * S3_SAMPLES, "batch_size": 8}  # fmt: skip
    s3["render"]["n_boot"] = 100
    # The paper profile's six training runs of every target: render_claims resamples S3's
    # runs x prompts.
    s3["seeds"] = S3_SEEDS
    s3["workers"] = 2  # the worker processes' path, pickling included
    params["claims"]["paper"]["min_units"] = 2  # as before: the other papers' tiny units


@pytest.fixture(scope="module")
def s3_root(paper_root) -> Path:
    """S3 runs in the paper-profile project itself: render_claims reads its artifacts too."""
    return paper_root


def test_s3_trains_every_target_per_policy_from_the_gpt2_base(s3_root):
    from transformers import GPT2LMHeadModel

    log = pd.read_parquet(s3_root / "data" / "interim" / "s3" / "train" / "train_log.parquet")
    per_policy = {"Pub+Redacted", "JFT", "Redaction Schedule"}
    expected = {("AIRLINE Only", None), ("Public", None), ("Private", None)}
    expected |= {(t, p) for t in per_policy for p in ("keyword", "classifier")}
    expected |= {("Reference (D without MEDIA)", None), ("Reference (D without INSURANCE)", None)}
    policies = [None if pd.isna(policy) else policy for policy in log["policy"]]
    assert set(zip(log["target"], policies, strict=True)) == expected
    dp = log[log["kind"].isin(["dp", "jft"])]
    epsilon = yaml.safe_load((s3_root / "params.yaml").read_text())["s3"]["paper"]["dp"][
        "target_epsilon"
    ]
    assert len(dp) == 3 * S3_SEEDS and dp["epsilon"].between(0, epsilon + 1e-6).all()
    # Every target again in run 1 (seed + 1, its own folder); the references once.
    targets = log[log["without"].isna()]
    assert (targets.groupby("run").size() == 9).all() and set(log["run"]) == set(range(S3_SEEDS))
    assert set(log.loc[log["without"].notna(), "run"]) == {0}
    assert log.loc[log["run"] == 1, "model"].str.startswith("run1/").all()
    run0, run1 = (targets[targets["run"] == r].set_index(["target", "policy"]) for r in (0, 1))
    assert (run0["final_loss"] - run1.loc[run0.index, "final_loss"]).abs().max() > 0
    assert log["final_loss"].map(math.isfinite).all() and (log["tokens"] > 0).all()
    # JFT trains twice: Pub+Redacted's AdamW run (same data, same seed), then Private's DP run.
    by_model = log.set_index("model")
    for policy in ("keyword", "classifier"):
        for count in ("tokens", "steps"):
            jft, first = (
                by_model.at[f"jft-{policy}", count],
                by_model.at[f"pub_redacted-{policy}", count],
            )
            assert jft == first + by_model.at["private", count], (policy, count)
    folder = s3_root / "data" / "interim" / "s3" / "models" / "private"
    assert isinstance(GPT2LMHeadModel.from_pretrained(folder), GPT2LMHeadModel)


def test_s3_attack_scores_every_sample_under_itself_and_each_reference(s3_root):
    attack = s3_root / "data" / "interim" / "s3" / "attack"
    samples = pd.read_parquet(attack / "samples.parquet")
    models = pd.read_parquet(attack / "ppl.parquet")
    n_models = 2 + 9 * S3_SEEDS  # two references, nine targets per training run
    assert len(models) == n_models and (models["test_ppl"] > 1).all()
    assert len(samples) == n_models * S3_PROMPTS * S3_SAMPLES
    scored = samples[~samples["empty"]]
    for column in ("nll_self", "nll_without_MEDIA", "nll_without_INSURANCE"):
        assert scored[column].map(math.isfinite).all(), column
    leaks = [f"leak_{p}_{j}" for p in ("keyword", "classifier") for j in ("MEDIA", "INSURANCE")]
    assert samples[leaks].dtypes.eq(bool).all()


def test_s3_table1_has_six_targets_per_policy_with_rates_in_range(s3_root):
    table = pd.read_csv(s3_root / "figures" / "s3" / "s3_table1.csv")
    assert table.groupby("policy")["target"].nunique().to_dict() == {"classifier": 6, "keyword": 6}
    rates = table["lira_success"].dropna()
    assert rates.between(0, 1).all()
    metrics = json.loads((s3_root / "metrics" / "s3.json").read_text())
    assert metrics["prompts"] == S3_PROMPTS and metrics["samples_per_prompt"] == S3_SAMPLES
    assert set(metrics["targets"]) == {"keyword", "classifier"}
