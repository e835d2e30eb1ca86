"""Brief full fine-tuning of a causal LM (torch AdamW, next-token loss) on a few documents.

Used by S0's "the model already knows the context" miniature (Flemings et al. §4.2: GPT-Neo saw
PubMed abstracts in pre-training, OPT did not): SmolLM2 is fine-tuned on half of the PubMedQA-like
documents, then influence and regurgitation are compared on the seen and the unseen half.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    require(epochs >= 1, f"epochs must be >= 1, got {epochs}")
    require(batch_size >= 1, f"batch_size must be >= 1, got {batch_size}")
    require(learning_rate > 0, f"learning_rate must be > 0, got {learning_rate}")
    chunks = chunk_documents(documents, seq_len)
    require(len(chunks) >= 1, "finetune needs at least one document with >= 2 tokens")
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=weight_decay)
    model.train()
    losses = []
    for _ in range(epochs):
        order = torch.randperm(len(chunks), generator=generator).tolist()
        for start in range(0, len(order), batch_size):
            rows = [chunks[i] for i in order[start : start + batch_size]]
            width = max(len(row) for row in rows)
            ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for k, row in enumerate(rows):
                ids[k, : len(row)] = torch.tensor(row)
                mask[k, : len(row)] = 1
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
