"""Brief full fine-tuning of a causal LM (torch AdamW, next-token loss) on a few documents.

Used by S0's "the model already knows the context" miniature (Flemings et al. §4.2: GPT-Neo saw
PubMed abstracts in pre-training, OPT did not): SmolLM2 is fine-tuned on half of the PubMedQA-like
documents, then influence and regurgitation are compared on the seen and the unseen half. S3's
AdamW targets (Public, Pub+Redacted, JFT's first phase, the redaction schedule) share the same
loop, `train_adamw`, fed with a different batch of token rows at each step.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from privleak.errors import require


def chunk_documents(documents: Sequence[Sequence[int]], seq_len: int) -> list[list[int]]:
    """Cut each document's token ids into consecutive pieces of <= seq_len tokens (>= 2 each)."""
    require(seq_len >= 2, f"seq_len must be >= 2, got {seq_len}")
    pieces = [
        list(doc[start : start + seq_len])
        for doc in documents
        for start in range(0, len(doc), seq_len)
    ]
    return [piece for piece in pieces if len(piece) >= 2]


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids [B, W], attention mask [B, W]) of token rows right-padded with pad_id to the longest
    row's length W; the mask is 1 on real tokens, 0 on padding."""
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, row in enumerate(rows):
        ids[k, : len(row)] = torch.tensor(row)
        mask[k, : len(row)] = 1
    return ids, mask


def shuffled_batches(
    n_examples: int, *, epochs: int, batch_size: int, seed: int
) -> list[list[int]]:
    """The example indices of every optimiser step: each epoch a fresh permutation of
    range(n_examples) (torch, seeded once with `seed`) cut into batches of <= batch_size."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(epochs):
        order = torch.randperm(n_examples, generator=generator).tolist()
        batches += [order[start : start + batch_size] for start in range(0, n_examples, batch_size)]
    return batches


def check_training_params(epochs: int, batch_size: int, learning_rate: float) -> None:
    require(epochs >= 1, f"epochs must be >= 1, got {epochs}")
    require(batch_size >= 1, f"batch_size must be >= 1, got {batch_size}")
    require(learning_rate > 0, f"learning_rate must be > 0, got {learning_rate}")


def train_adamw(
    model,
    step_rows: Iterable[Sequence[Sequence[int]]],
    *,
    learning_rate: float,
    pad_id: int,
    weight_decay: float = 0.0,
) -> list[float]:
    """Train `model` in place with AdamW, one optimiser step per item of `step_rows` (that step's
    token rows); returns each step's loss, the mean next-token loss over the batch's real tokens
    (padding is masked out of attention and loss). The model is left in eval mode."""
    optimiser = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=weight_decay)
    model.train()
    losses = []
    for rows in step_rows:
        ids, mask = pad_rows(rows, pad_id)
        labels = ids.masked_fill(mask == 0, -100)  # -100: ignored by the HF causal LM loss
        out = model(
            input_ids=ids.to(model.device),
            attention_mask=mask.to(model.device),
            labels=labels.to(model.device),
        )
        optimiser.zero_grad()
        out.loss.backward()
        optimiser.step()
        losses.append(float(out.loss.detach()))
    model.eval()
    return losses


def finetune_causal_lm(
    model,
    documents: Sequence[Sequence[int]],
    *,
    epochs: int,
    batch_size: int,
    seq_len: int,
    learning_rate: float,
    pad_id: int,
    seed: int = 0,
    weight_decay: float = 0.0,
) -> list[float]:
    """Train `model` in place on next-token loss over the documents' chunks; returns the mean
    loss of every optimiser step. Chunks are shuffled per epoch with `seed`; padding is masked
    out of attention and loss. The model is left in eval mode."""
    check_training_params(epochs, batch_size, learning_rate)
    chunks = chunk_documents(documents, seq_len)
    require(len(chunks) >= 1, "finetune needs at least one document with >= 2 tokens")
    batches = shuffled_batches(len(chunks), epochs=epochs, batch_size=batch_size, seed=seed)
    return train_adamw(
        model,
        ([chunks[i] for i in batch] for batch in batches),
        learning_rate=learning_rate,
        pad_id=pad_id,
        weight_decay=weight_decay,
    )
