"""Brief full fine-tuning (AdamW, next-token loss): chunking, masking and memorisation."""

from __future__ import annotations

import pytest
import torch

from privleak.errors import PrivleakError
from privleak.scoring import continuation_logprobs
from privleak.training.finetune import chunk_documents, finetune_causal_lm
from tests.conftest import tiny_llama


def test_chunks_are_consecutive_pieces_of_at_most_seq_len():
    assert chunk_documents([[1, 2, 3, 4, 5], [6, 7], [8]], 2) == [[1, 2], [3, 4], [6, 7]]
    with pytest.raises(PrivleakError, match="seq_len"):
        chunk_documents([[1, 2]], 1)


def _mean_logprob(model, doc):
    return float(continuation_logprobs(model, [doc[:1]], [doc[1:]])[0].mean())


def test_finetuning_memorises_the_seen_document_more_than_an_unseen_one():
    torch.manual_seed(0)
    model = tiny_llama(vocab_size=32, window=64, seed=1)
    seen = torch.randint(4, 32, (24,)).tolist()
    unseen = torch.randint(4, 32, (24,)).tolist()
    before_seen, before_unseen = _mean_logprob(model, seen), _mean_logprob(model, unseen)
    losses = finetune_causal_lm(
        model, [seen], epochs=30, batch_size=1, seq_len=24, learning_rate=1e-2, pad_id=0
    )
    assert losses[-1] < losses[0] / 2
    gain_seen = _mean_logprob(model, seen) - before_seen
    gain_unseen = _mean_logprob(model, unseen) - before_unseen
    assert gain_seen > 1.0 and gain_seen > gain_unseen
    assert not model.training


def test_padding_is_masked_out_of_the_loss():
    # One batch of a short and a long document: the first step's loss equals the token-weighted
    # mean next-token loss computed on each document alone (pads contribute nothing).
    docs = [[5, 6, 7], [8, 9, 10, 11, 12, 13]]
    reference = tiny_llama(seed=2)
    with torch.no_grad():
        nll = [
            -continuation_logprobs(reference, [d[:1]], [d[1:]], padding_side="right")[0].sum()
            for d in docs
        ]
    expected = float(sum(nll) / sum(len(d) - 1 for d in docs))
    model = tiny_llama(seed=2)
    losses = finetune_causal_lm(
        model, docs, epochs=1, batch_size=2, seq_len=8, learning_rate=1e-9, pad_id=0
    )
    assert losses[0] == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"epochs": 0}, "epochs"),
        ({"batch_size": 0}, "batch_size"),
        ({"learning_rate": 0}, "learning_rate"),
    ],
)
def test_bad_training_params_name_the_param(kwargs, param):
    args = {"epochs": 1, "batch_size": 1, "seq_len": 4, "learning_rate": 1e-3, "pad_id": 0} | kwargs
    with pytest.raises(PrivleakError, match=param):
        finetune_causal_lm(tiny_llama(), [[1, 2, 3]], **args)


def test_documents_too_short_to_train_on_are_rejected():
    with pytest.raises(PrivleakError, match="at least one document"):
        finetune_causal_lm(
            tiny_llama(), [[1]], epochs=1, batch_size=1, seq_len=4, learning_rate=1e-3, pad_id=0
        )
