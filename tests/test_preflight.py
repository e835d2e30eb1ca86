"""The preflight stops at the first thing this machine lacks with one line naming the param and
its value, and passes the embedded profile offline. Devices, caches and the hub are
monkeypatched, so nothing here needs a GPU or the network."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch

from privleak import models
from privleak.data.records import write_jsonl
from privleak.errors import PrivleakError
from privleak.pipeline import params, paths, preflight
from tests.conftest import tiny_llama, word_tokenizer

REPO_PARAMS = params.load()


@pytest.fixture
def cpu_only(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "hub_model_cached", lambda name: False)
    monkeypatch.setattr(preflight, "hub_dataset_cached", lambda name: False)


def profile(name: str) -> dict:
    return copy.deepcopy(REPO_PARAMS) | {"profile": name}


def failure(config: dict) -> str:
    with pytest.raises(PrivleakError) as caught:
        preflight.run(config)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_paper_profile_on_an_offline_cpu_machine_fails_on_its_device(cpu_only, offline):
    message = failure(profile("paper"))
    assert message.startswith("params models.paper.device = 'cuda': CUDA is not available")
    assert message.endswith("available: cpu")


def test_every_device_param_is_checked(cpu_only):
    config = profile("smoke")
    config["s1"]["smoke"]["scores"]["device"] = "cuda:0"
    assert failure(config).startswith("params s1.smoke.scores.device = 'cuda:0': CUDA is not")
    assert ("s1.smoke.scores.device", "cuda:0") in preflight.device_params(config, "smoke")


def test_paper_profile_offline_on_a_gpu_machine_names_the_first_hub_model(monkeypatch, offline):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    message = failure(profile("paper"))
    assert message.startswith("params models.paper.lm = 'facebook/opt-1.3b': hub model not in")
    assert "HF_HUB_OFFLINE=1" in message


def test_paper_models_listed_include_every_hub_model():
    keys = {key: name for key, name, _ in preflight.model_params(profile("paper"), "paper")}
    assert keys["s0.paper.lms[1]"] == "EleutherAI/gpt-neo-1.3B"
    assert keys["s1.paper.scores.models[4]"] == "facebook/opt-13b"
    assert keys["s1.paper.public.model"] == "meta-llama/Llama-2-7b-hf"
    assert keys["s0.paper.bertscore.model"] == "roberta-large"
    assert keys["s0.paper.faithfulness"] == "bunsenstraat/FactKB"
    assert keys["s2.paper.lm"] == "EleutherAI/pythia-6.9b"
    assert keys["s2.paper.retrieval.reranker"] == "BAAI/bge-reranker-large"
    assert keys["s4.paper.lm"] == "microsoft/Phi-3.5-mini-instruct"


def test_tfidf_reranker_is_not_a_model():
    keys = {key for key, _, _ in preflight.model_params(profile("embedded"), "embedded")}
    assert "s2.embedded.lm" in keys and "s2.embedded.retrieval.reranker" not in keys


def test_online_hub_model_is_asked_with_a_head(monkeypatch, cpu_only):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(models, "hub_model_cached", lambda name: False)
    asked = []
    monkeypatch.setattr(preflight, "_hub_model_answers", lambda name: asked.append(name) or None)
    assert preflight.check_model("k", "org/model", [], True, "paper") == "org/model (hub)"
    monkeypatch.setattr(preflight, "_hub_model_answers", lambda name: "404 Client Error")
    with pytest.raises(PrivleakError, match=r"params k = 'org/x': the hub did not answer \(404"):
        preflight.check_model("k", "org/x", [], True, "paper")
    assert asked == ["org/model"]


def test_cached_hub_model_passes_offline(monkeypatch, offline):
    monkeypatch.setattr(models, "hub_model_cached", lambda name: name == "org/cached")
    assert preflight.check_model("k", "org/cached", [], True, "paper") == "org/cached (HF cache)"


def test_missing_model_folder_and_unprepared_embedded_name(tmp_path, monkeypatch):
    gone = str(tmp_path / "gone")
    with pytest.raises(PrivleakError, match=f"params k = '{gone}': model folder not found"):
        preflight.check_model("k", gone, [], True, "embedded")
    monkeypatch.setattr(paths, "MODELS", tmp_path / "models")
    message = f"params k = '{models.SMOLLM2}': embedded model not in data/models and not listed"
    with pytest.raises(PrivleakError, match=message):
        preflight.check_model("k", models.SMOLLM2, [], True, "embedded")
    listed = preflight.check_model("k", models.SMOLLM2, [models.SMOLLM2], True, "embedded")
    assert listed == f"{models.SMOLLM2} (prepare_models)"


def test_local_model_folder_passes(tmp_path):
    tiny_llama().save_pretrained(tmp_path / "m")
    word_tokenizer(add_bos=True).save_pretrained(tmp_path / "m")
    assert preflight.check_model("k", str(tmp_path / "m"), [], True, "paper").endswith("(folder)")


def test_missing_file_corpus_names_the_slot_source(tmp_path):
    source = f"file:{tmp_path / 'news.jsonl'}"
    message = failure(profile("smoke") | {"data": {"smoke": {"cnn_dm": {"source": source}}}})
    assert message == (
        f"params data.smoke.cnn_dm.source = '{source}': file '{tmp_path / 'news.jsonl'}' "
        "does not exist"
    )


def test_unreadable_file_corpus_is_named(tmp_path):
    path = tmp_path / "news.jsonl"
    path.write_text("{}\n")
    path.chmod(0)
    try:
        readable = path.open("rb")  # root reads anything; nothing to test then
        readable.close()
        pytest.skip("running as a user who can read mode-000 files")
    except PermissionError:
        pass
    with pytest.raises(PrivleakError, match="is not readable"):
        preflight.check_corpus("data.paper.cnn_dm", {"source": f"file:{path}"})


def test_hub_dataset_offline_must_be_cached(monkeypatch, offline):
    spec = {"source": "hf:qiaojin/PubMedQA:pqa_labeled:train"}
    with pytest.raises(PrivleakError) as caught:
        preflight.check_corpus("data.paper.pubmedqa", spec)
    assert str(caught.value).startswith(
        "params data.paper.pubmedqa.source = 'hf:qiaojin/PubMedQA:pqa_labeled:train': hub "
        "dataset 'qiaojin/PubMedQA' is not in the local datasets cache"
    )
    monkeypatch.setattr(preflight, "hub_dataset_cached", lambda name: True)
    assert preflight.check_corpus("data.paper.pubmedqa", spec) == "hf cache"


def test_hub_dataset_cache_is_found_by_folder_name(monkeypatch, tmp_path):
    hub, datasets_cache = tmp_path / "hub", tmp_path / "datasets"
    (hub / "datasets--abisee--cnn_dailymail").mkdir(parents=True)
    (datasets_cache / "qiaojin___pub_med_qa").mkdir(parents=True)
    (hub / "models--org--other").mkdir()
    monkeypatch.setattr(preflight, "_cache_dirs", lambda: [hub, datasets_cache])
    assert preflight.hub_dataset_cached("cnn_dailymail")
    assert preflight.hub_dataset_cached("qiaojin/PubMedQA")
    assert not preflight.hub_dataset_cached("org/other")


def test_online_hub_dataset_is_asked_at_its_revision(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(preflight, "hub_dataset_cached", lambda name: False)
    asked = []
    monkeypatch.setattr(
        preflight, "_hub_dataset_answers", lambda name, rev: asked.append((name, rev)) or None
    )
    spec = {"source": "hf:org/set:train", "revision": "abc"}
    assert preflight.check_corpus("data.paper.x", spec) == "hf hub"
    assert asked == [("org/set", "abc")]


def test_s1_sequence_file_is_checked(tmp_path, cpu_only):
    config = profile("smoke")
    scores = config["s1"]["smoke"]["scores"]
    scores["sequences"] = f"file:{tmp_path / 'seq.jsonl'}"
    assert failure(config).startswith("params s1.smoke.scores.sequences = 'file:")
    write_jsonl([{"seq_id": "a", "kind": "named_entity", "prefix": "p"}], tmp_path / "seq.jsonl")
    assert "has no field 'suffix'" in failure(config)


def test_s3_hub_base_is_checked_like_every_hub_model(monkeypatch, offline):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    keys = {key: name for key, name, _ in preflight.model_params(profile("paper"), "paper")}
    assert keys["s3.paper.base"] == "openai-community/gpt2"
    monkeypatch.setattr(models, "hub_model_cached", lambda name: name != "openai-community/gpt2")
    monkeypatch.setattr(preflight, "hub_dataset_cached", lambda name: True)
    assert failure(profile("paper")).startswith(
        "params s3.paper.base = 'openai-community/gpt2': hub model not in the local Hugging Face "
        "cache and HF_HUB_OFFLINE=1"
    )


def test_s3_base_folder_must_exist_unless_train_family_builds_it(cpu_only, tmp_path):
    config = profile("smoke")
    assert "s3.smoke.base" not in {key for key, _, _ in preflight.model_params(config, "smoke")}
    assert "data/family/h32 (train_family)" in preflight.run(config)[2]
    config["s3"]["smoke"]["base"] = str(tmp_path / "gpt2")
    assert failure(config) == (
        f"params s3.smoke.base = '{tmp_path / 'gpt2'}': model folder not found "
        f"({tmp_path / 'gpt2'} does not exist)"
    )
    tiny_llama().save_pretrained(tmp_path / "gpt2")
    assert f"{tmp_path / 'gpt2'} (folder)" in preflight.run(config)[2]


def test_s3_dialog_corpus_file_is_checked(cpu_only, tmp_path):
    config = profile("smoke")
    assert "s3 dialogs synthetic, s3 public dialogs synthetic" in preflight.run(config)[3]
    source = f"file:{tmp_path / 'multidogo.jsonl'}"
    config["s3"]["smoke"]["corpus"] = {"source": source}
    assert failure(config) == (
        f"params s3.smoke.corpus.source = '{source}': file '{tmp_path / 'multidogo.jsonl'}' "
        "does not exist"
    )
    (tmp_path / "multidogo.jsonl").write_text('{"text": "USER: hi", "domain": "AIRLINE"}\n')
    assert "s3 dialogs file, s3 public dialogs synthetic" in preflight.run(config)[3]
    public = f"file:{tmp_path / 'public.jsonl'}"
    config["s3"]["smoke"]["classifier"]["public"] = {"source": public}
    assert failure(config).startswith(
        f"params s3.smoke.classifier.public.source = '{public}': file '"
    )
    config["s3"]["smoke"]["classifier"]["public"] = None
    assert "s3 dialogs file, s4 corpus synthetic" in preflight.run(config)[3]


@pytest.mark.parametrize(
    ("group", "key"), [("s2", "corpora.enron"), ("s4", "corpus")], ids=["s2", "s4"]
)
def test_rag_corpus_files_are_checked(cpu_only, tmp_path, group, key):
    """S2's corpora and S4's corpus are checked like every data slot, before DVC runs."""
    config = profile("smoke")
    block = config[group]["smoke"]
    *parents, last = key.split(".")
    for part in parents:
        block = block[part]
    source = f"file:{tmp_path / 'corpus.jsonl'}"
    block[last] = {"source": source}
    assert failure(config) == (
        f"params {group}.smoke.{key}.source = '{source}': file '{tmp_path / 'corpus.jsonl'}' "
        "does not exist"
    )
    record = {"text": "a record"} if group == "s2" else CANONICAL_S4_RECORD
    write_jsonl([record], tmp_path / "corpus.jsonl")
    summary = preflight.run(config)[3]
    assert f"{group} {key.split('.')[-1]} file" in summary


CANONICAL_S4_RECORD = {"id": "m0", "unit": "p0", "disease": "Flux", "question": "What is it?",
                       "request": "I feel odd.", "response": "Flux."}  # fmt: skip
S4_RECORD = {"patient_id": 0, "patient_request": "I feel odd.", "doctor_response": "Flux.",
             "symptom": ["Bloating"], "disease": "Flux"}  # fmt: skip
PUBLISHED = {"id": "patient_id", "unit": "patient_id", "disease": "disease",
             "request": "patient_request", "response": "doctor_response",
             "symptoms": "symptom"}  # fmt: skip


def test_an_s4_export_is_read_through_its_fields(cpu_only, tmp_path):
    """A published-like export passes through the paper's `fields`; a column the mapping names
    but the file lacks, or a field no column maps to, is one line."""
    config = profile("smoke")
    source = f"file:{tmp_path / 'export.jsonl'}"
    config["s4"]["smoke"]["corpus"] = {"source": source, "fields": PUBLISHED}
    write_jsonl([S4_RECORD], tmp_path / "export.jsonl")
    assert "s4 corpus file" in preflight.run(config)[3]
    write_jsonl([{k: v for k, v in S4_RECORD.items() if k != "doctor_response"}],
                tmp_path / "export.jsonl")  # fmt: skip
    assert failure(config).startswith(
        "params s4.smoke.corpus: field 'response' maps to column 'doctor_response', which "
        f"record 0 of '{source}' lacks"
    )
    config["s4"]["smoke"]["corpus"]["fields"] = {"id": "patient_id", "unit": "patient_id"}
    write_jsonl([S4_RECORD], tmp_path / "export.jsonl")
    assert failure(config).startswith(
        f"params s4.smoke.corpus: the first record of '{source}' has no field 'request'; map a "
        "column to it in s4.smoke.corpus.fields"
    )


def test_an_s2_corpus_without_the_text_field_is_one_line(cpu_only, tmp_path):
    """s2_index chunks each record's `text`: a file without it, unmapped, stops the preflight."""
    config = profile("smoke")
    source = f"file:{tmp_path / 'mail.jsonl'}"
    config["s2"]["smoke"]["corpora"]["enron"] = {"source": source}
    write_jsonl([{"id": "e0", "body": "From: a"}], tmp_path / "mail.jsonl")
    assert failure(config) == (
        f"params s2.smoke.corpora.enron: the first record of '{source}' has no field 'text'; map "
        "a column to it in s2.smoke.corpora.enron.fields (columns: body, id)"
    )
    config["s2"]["smoke"]["corpora"]["enron"]["fields"] = {"text": "body"}
    assert "s2 enron file" in preflight.run(config)[3]


def test_an_s3_dialog_corpus_without_a_domain_is_one_line(cpu_only, tmp_path):
    """s3_prepare reads each dialog's `text` and `domain`: a file without one stops here."""
    config = profile("smoke")
    source = f"file:{tmp_path / 'dialogs.jsonl'}"
    config["s3"]["smoke"]["corpus"] = {"source": source}
    write_jsonl([{"id": "d0", "text": "User: hi", "label": "AIRLINE"}], tmp_path / "dialogs.jsonl")
    assert failure(config) == (
        f"params s3.smoke.corpus: the first record of '{source}' has no field 'domain'; map a "
        "column to it in s3.smoke.corpus.fields (columns: id, label, text)"
    )


@pytest.mark.skipif(
    not (paths.MODELS / models.SMOLLM2 / "config.json").exists(), reason="data/models is absent"
)
def test_embedded_profile_passes_offline_with_data_models(cpu_only, offline):
    lines = preflight.run(profile("embedded"))
    assert lines[0] == "preflight ok: profile embedded"
    assert f"{models.SMOLLM2} (data/models)" in lines[2]
    assert not any("note:" in line for line in lines)


def test_command_line_exit_codes(tmp_path):
    """`--profile paper` with CUDA hidden fails with exit 2 and one line on stderr."""
    env = {"CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "privleak.pipeline.preflight", "--profile", "paper"],
        env=env | {"PYTHONPATH": str(paths.ROOT / "lib"), "HOME": str(tmp_path)},
        cwd=paths.ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("privleak: preflight: params models.paper.device = 'cuda'")
