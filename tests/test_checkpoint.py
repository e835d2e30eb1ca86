"""Per-unit stage checkpoints: the fingerprint, resuming after an interruption, atomic unit
writes, clear(), and bit-identical results of the batched library loops run through a cache."""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from privleak.batching import ForwardCounter
from privleak.cid import cid_generate
from privleak.errors import PrivleakError
from privleak.metrics import sequence as seq
from privleak.pipeline import checkpoint, paths
from privleak.prompts import ContextPrompt
from privleak.scoring import continuation_logprobs

REPO = Path(__file__).resolve().parents[1]
VALUES = {"seed": 3, "context_gain": {"n_examples": 2}}


class Interrupted(Exception):
    """Stands in for a crash, Ctrl-C or a timeout in the middle of a stage."""


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A one-stage project on a copy of the real params.yaml (profile smoke): stage `toy`
    declares seed and context_gain.${profile}, and depends on one file and one folder."""
    params_text = (REPO / "params.yaml").read_text()
    params_text = re.sub(r"^profile: .*$", "profile: smoke", params_text, count=1, flags=re.M)
    (tmp_path / "params.yaml").write_text(params_text)
    stage = {
        "cmd": "x",
        "deps": ["code.py", "inputs", "not_built_yet"],
        "params": ["seed", "context_gain.${profile}"],
        "outs": ["out"],
    }
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"toy": stage}}))
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "inputs" / "nested").mkdir(parents=True)
    (tmp_path / "inputs" / "nested" / "weights.bin").write_bytes(b"\0" * 64)
    (tmp_path / "elsewhere.txt").write_text("not a dep\n")
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    monkeypatch.setattr(paths, "DATA", tmp_path / "data")
    monkeypatch.setattr(paths, "PARAMS_FILE", tmp_path / "params.yaml")
    return tmp_path


def fingerprint(values=VALUES) -> str:
    return checkpoint.fingerprint(checkpoint.fingerprint_inputs("toy", values))


def test_fingerprint_follows_declared_params_and_deps_only(project):
    base = fingerprint()
    assert fingerprint() == base
    # Not part of the stage: an undeclared param, a notebook variable, a file outside the deps.
    text = (project / "params.yaml").read_text()
    assert "formats: [png, pdf]" in text
    (project / "params.yaml").write_text(text.replace("formats: [png, pdf]", "formats: [png, svg]"))
    (project / "elsewhere.txt").write_text("changed\n")
    assert fingerprint(VALUES | {"scratch": 7}) == base
    # A declared param's value, a dep file's content, a file in a dep folder, a missing dep.
    assert fingerprint(VALUES | {"context_gain": {"n_examples": 3}}) != base
    assert fingerprint(VALUES | {"seed": 4}) != base
    (project / "code.py").write_text("x = 2\n")
    changed_code = fingerprint()
    assert changed_code != base
    weights = project / "inputs" / "nested" / "weights.bin"
    weights.write_bytes(b"\0" * 65)
    assert fingerprint() != changed_code
    grown = fingerprint()
    os.utime(weights, ns=(1, 1))
    assert fingerprint() != grown
    touched = fingerprint()
    (project / "not_built_yet").write_text("now built\n")
    assert fingerprint() != touched


def test_missing_declared_param_is_a_one_line_error(project):
    lacks = r"stage 'toy': the notebook lacks .*\['context_gain'\]"
    with pytest.raises(PrivleakError, match=lacks) as info:
        checkpoint.open_stage("toy", {"seed": 3})
    assert "\n" not in str(info.value)


def test_a_stored_unit_is_not_recomputed(project):
    calls = []

    def compute(item):
        calls.append(item)
        return {"item": item, "square": item * item}

    store = checkpoint.open_stage("toy", VALUES)
    first = store.map("squares", [1, 2, 3], compute)
    again = checkpoint.open_stage("toy", VALUES).map("squares", [1, 2, 3], compute)
    assert again == first == [{"item": i, "square": i * i} for i in (1, 2, 3)]
    assert calls == [1, 2, 3]
    # Another param value is another fingerprint: nothing is resumed from the old units.
    other = checkpoint.open_stage("toy", VALUES | {"seed": 9})
    other.map("squares", [1], compute)
    assert calls == [1, 2, 3, 1] and other.folder != store.folder


def test_interrupted_map_resumes_only_the_missing_units(project):
    calls = []

    def compute(item, fail_at=None):
        if item == fail_at:
            raise Interrupted
        calls.append(item)
        return np.arange(item, dtype=np.float64) / 3

    items = list(range(1, 7))
    with pytest.raises(Interrupted):
        checkpoint.open_stage("toy", VALUES).map("units", items, lambda i: compute(i, fail_at=4))
    assert calls == [1, 2, 3]
    store = checkpoint.open_stage("toy", VALUES)
    resumed = store.map("units", items, compute)
    assert calls == [1, 2, 3, 4, 5, 6]
    for got, want in zip(resumed, [np.arange(i, dtype=np.float64) / 3 for i in items], strict=True):
        assert got.tobytes() == want.tobytes()
    assert store.summary().startswith("toy: resumed 3 of 6 units from checkpoint data/")
    assert "(units 3/6)" in store.summary()


class FailsToPickle:
    def __reduce__(self):
        raise Interrupted


def test_a_crash_while_saving_leaves_no_unit(project, monkeypatch):
    store = checkpoint.open_stage("toy", VALUES)
    key = ("units", 1)

    def crash(*_):
        raise Interrupted

    # Crashes while pickling, after part of the bytes reached the temporary file, and between
    # writing and renaming: the unit never appears under its name, no temporary file remains.
    with pytest.raises(Interrupted):
        store.get_or_compute(key, lambda: [b"x" * 1000, FailsToPickle()])
    for step in ("fsync", "replace"):
        with monkeypatch.context() as patch:
            patch.setattr(checkpoint.os, step, crash)
            with pytest.raises(Interrupted):
                store.get_or_compute(key, lambda: b"x" * 300_000)
    assert not store.path(key).exists()
    assert sorted(p.name for p in store.folder.iterdir()) == ["fingerprint.json"]
    # A hard kill leaves its half-written temporary file behind; it is never read as the unit.
    leftover = store.folder / f".{store.path(key).name}.abc.tmp"
    leftover.write_bytes(pickle.dumps((repr(key), b"x" * 300_000))[:1000])
    calls = []
    assert store.get_or_compute(key, lambda: calls.append(1) or "complete") == "complete"
    assert checkpoint.open_stage("toy", VALUES).get_or_compute(key, lambda: "again") == "complete"
    assert calls == [1]


def test_an_unreadable_unit_is_recomputed(project):
    store = checkpoint.open_stage("toy", VALUES)
    store.get_or_compute(("units", 1), lambda: "first")
    store.path(("units", 1)).write_bytes(b"\x80\x05 truncated")
    assert store.get_or_compute(("units", 1), lambda: "again") == "again"
    assert pickle.loads(store.path(("units", 1)).read_bytes()) == (repr(("units", 1)), "again")


def test_clear_removes_every_checkpoint_of_the_stage(project):
    for seed in (3, 4):
        checkpoint.open_stage("toy", VALUES | {"seed": seed}).get_or_compute(("u", 1), lambda: 1)
    folder = project / "data" / "checkpoints" / "toy"
    assert len(list(folder.iterdir())) == 2
    checkpoint.clear("toy")
    assert not folder.exists()
    checkpoint.clear("toy")  # nothing left to clear is fine


# ------------------------------------------------ batched library loops through a unit cache


def interrupting(store, scope, after):
    """store.cache(scope) that dies before computing unit number `after` + 1."""
    cache, computed = store.cache(scope), []

    def guarded(key, compute):
        def counted():
            if len(computed) == after:
                raise Interrupted
            computed.append(key)
            return compute()

        return cache(key, counted)

    return guarded


def run_interrupted(project, scope, call, after=1):
    """call(cache) dies after `after` units, then runs again on a fresh store: (result, store)."""
    with pytest.raises(Interrupted):
        call(interrupting(checkpoint.open_stage("toy", VALUES), scope, after))
    store = checkpoint.open_stage("toy", VALUES)
    return call(store.cache(scope)), store


def test_interrupted_cid_generate_resumes_bit_identical(project, tiny_lm):
    prompts = [
        ContextPrompt([1, 4], [5, 6, 7, 8, 9, 10, 11], [12]),
        ContextPrompt([1], [13, 14], [12]),
        ContextPrompt([1, 4], [15, 16, 17], [12, 3]),
    ]
    settings = [(0.5, 0.8), (1.5, 1.0)]

    def call(cache=None):
        return cid_generate(
            tiny_lm, prompts, settings, max_new_tokens=6, min_new_tokens=2, eos_token_id=2,
            seed=3, example_ids=["a", "b", "c"], max_batch_streams=4, cache=cache,
        )  # fmt: skip

    whole = call()
    resumed, store = run_interrupted(project, "generate", call)
    assert (store.resumed["generate"], store.computed["generate"]) == (1, 2)  # 6 groups, 2 a chunk
    for name in ("tokens", "lengths", "logp_context", "logp_prior", "stream_logp", "lam_used"):
        assert torch.equal(getattr(resumed, name), getattr(whole, name)), name
    assert torch.equal(resumed.tau, whole.tau)
    assert resumed.prefill_counter == whole.prefill_counter
    assert resumed.step_counter == whole.step_counter


def test_interrupted_scoring_loops_resume_bit_identical(project, tiny_lm):
    gen = torch.Generator().manual_seed(5)
    prefixes = [torch.randint(3, 30, (k,), generator=gen).tolist() for k in (6, 4, 9, 5, 7)]
    suffixes = [torch.randint(3, 30, (3,), generator=gen).tolist() for _ in prefixes]
    decoders = seq.decoder_table([{"name": "sampling", "kind": "sampling"},
                                  {"name": "top-k 5", "kind": "top_k", "value": 5}])  # fmt: skip
    args = (tiny_lm, prefixes, suffixes)

    def counted(score):
        """score(cache, counter) -> (its result as flat tensors, the forward count)."""

        def call(cache):
            counter = ForwardCounter()
            return score(cache, counter), counter

        return call

    loops = {
        "suffix": counted(
            lambda cache, counter: [
                row
                for rows in seq.suffix_logprobs(
                    *args, decoders, batch_size=2, counter=counter, cache=cache
                ).values()
                for row in rows
            ]
        ),
        "continuation": counted(
            lambda cache, counter: continuation_logprobs(
                *args, batch_size=2, counter=counter, cache=cache
            )
        ),
        "isp": lambda cache: isp_tensors(
            seq.approximate_isp(*args, 1, decoders["top-k 5"], expand=3, batch_size=2, cache=cache)
        ),
    }
    for scope, call in loops.items():
        whole, whole_counter = call(None)
        (resumed, counter), store = run_interrupted(project, scope, call)
        assert (store.resumed[scope], store.computed[scope]) == (1, 2), scope  # 5 rows, 2 a batch
        assert counter == whole_counter and whole_counter.tokens > 0, scope
        assert len(resumed) == len(whole), scope
        assert all(torch.equal(g, w) for g, w in zip(resumed, whole, strict=True)), scope


def isp_tensors(result):
    """(approx, bound and every leaf's log ESP and tokens as tensors, the forward count)."""
    leaves = [leaf for rows in result.leaves for leaf in rows]
    tensors = [torch.from_numpy(result.approx), torch.from_numpy(result.bound)]
    tensors += [torch.tensor([lp for _, lp, _ in leaves], dtype=torch.float64)]
    tensors += [torch.tensor([list(tokens) + list(where) for tokens, _, where in leaves])]
    return tensors, result.counter
