"""The tiny in-pipeline model family: one BPE tokenizer and several Llama sizes trained from
scratch on the same corpus for the same number of tokens.

Each member is saved as a Hugging Face folder (safetensors + tokenizer), so
`privleak.models.load(folder)` loads it. The family folder holds one sub-folder per size and a
`manifest.json` recording, per size, the architecture, parameter count and tokens seen, plus the
sha256 of the training corpus and of the shared tokenizer; `check_family` compares those against
a corpus before anyone scores planted sequences with the family.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from privleak.errors import require
from privleak.pipeline.workers import check_workers, run_jobs

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>")
SIZE_KEYS = ("hidden", "layers", "heads", "intermediate")
MANIFEST = "manifest.json"


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (GPT-2 style: a leading space belongs to the next word) trained
    on texts. Ids 0, 1, 2 are <pad>, <s>, </s>; no special token is added on encode, like
    SmolLM2, so a prefix's token ids are exactly those of its text."""
    require(
        isinstance(vocab_size, int) and vocab_size >= 300,
        f"family.vocab_size must be an integer >= 300 (256 bytes + specials), got {vocab_size!r}",
    )
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", bos_token="<s>", eos_token="</s>"
    )


def llama_config(size: dict, vocab_size: int, window: int) -> LlamaConfig:
    """LlamaConfig for one family size {hidden, layers, heads, intermediate}."""
    missing = [key for key in SIZE_KEYS if key not in size]
    require(not missing, f"family size {size} lacks {missing}; each size needs {list(SIZE_KEYS)}")
    require(
        size["hidden"] % size["heads"] == 0,
        f"family size hidden={size['hidden']} is not divisible by heads={size['heads']}",
    )
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=size["hidden"],
        intermediate_size=size["intermediate"],
        num_hidden_layers=size["layers"],
        num_attention_heads=size["heads"],
        num_key_value_heads=size["heads"],
        max_position_embeddings=window,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=True,
    )


def pack(token_lists: Sequence[Sequence[int]], block_size: int, eos_id: int) -> torch.Tensor:
    """[N, block_size] training blocks: documents joined with EOS after each, cut into equal
    blocks; the incomplete tail block is dropped."""
    require(block_size >= 2, f"family.block_size must be >= 2, got {block_size}")
    stream = [t for ids in token_lists for t in [*ids, eos_id]]
    n_blocks = len(stream) // block_size
    require(n_blocks >= 1, f"the corpus has {len(stream)} tokens, fewer than one block")
    return torch.tensor(stream[: n_blocks * block_size], dtype=torch.long).view(n_blocks, -1)


def train_lm(
    config: LlamaConfig,
    blocks: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    warmup_steps: int,
    seed: int,
) -> tuple[LlamaForCausalLM, list[float]]:
    """Train a fresh LlamaForCausalLM on blocks [N, L] for `epochs` passes with AdamW (linear
    warmup then cosine decay to 10% of lr). The batch order depends only on seed and N, so every
    size sees the same tokens in the same order. Returns (model in eval mode, loss per step)."""
    require(epochs >= 1, f"family.epochs must be >= 1, got {epochs}")
    require(batch_size >= 1, f"family.batch_size must be >= 1, got {batch_size}")
    require(lr > 0, f"family.lr must be > 0, got {lr}")
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    order = torch.Generator().manual_seed(seed)
    steps_per_epoch = math.ceil(len(blocks) / batch_size)
    total = epochs * steps_per_epoch

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total - warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    losses: list[float] = []
    for _ in range(epochs):
        permutation = torch.randperm(len(blocks), generator=order)
        for start in range(0, len(blocks), batch_size):
            batch = blocks[permutation[start : start + batch_size]]
            loss = model(input_ids=batch, labels=batch).loss
            require(torch.isfinite(loss).item(), f"family training diverged (loss {loss.item()})")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
    model.eval()
    return model, losses


def _train_member(job: dict, blocks: torch.Tensor, tokenizer, options: dict) -> dict:
    """Train and save one (size, seed) member; its summary row."""
    started = time.perf_counter()
    model, losses = train_lm(job["config"], blocks, seed=job["seed"], **options)
    require(
        all(math.isfinite(loss) for loss in losses),
        f"family member {job['folder']} (seed {job['seed']}): training loss is not finite",
    )
    save_member(model, tokenizer, job["folder"])
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "final_loss": sum(losses[-10:]) / len(losses[-10:]),
        "losses": losses,
        "seconds": time.perf_counter() - started,
    }


def _weight(job: dict) -> int:
    """A member's parameters in its matrices: how long it trains, relative to the others."""
    c = job["config"]
    per_layer = 4 * c.hidden_size**2 + 3 * c.hidden_size * c.intermediate_size
    return c.num_hidden_layers * per_layer + c.vocab_size * c.hidden_size


def train_members(
    jobs: Sequence[dict], blocks: torch.Tensor, tokenizer, *, workers: int, **options
) -> list[dict]:
    """Train and save each job {config, seed, folder} with `train_lm(**options)`, `workers`
    members at a time, each on one thread (`privleak.pipeline.workers`), so its weights do not
    depend on `workers`. Returns one summary per job, in job order: {parameters, final_loss
    (mean of the last 10 steps), losses, seconds}."""
    check_workers(workers, "family.workers")
    train = partial(_train_member, blocks=blocks, tokenizer=tokenizer, options=options)
    return run_jobs(train, jobs, workers=workers, priority=_weight)


def sha256_file(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerFast) -> str:
    """sha256 of the tokenizer's serialised vocabulary and merges (what fixes every token id)."""
    return hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode()).hexdigest()


def save_member(model, tokenizer, folder: str | Path) -> Path:
    """Save one size as an HF folder (safetensors + tokenizer) loadable by privleak.models.load."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def write_manifest(family_dir: str | Path, manifest: dict) -> Path:
    path = Path(family_dir) / MANIFEST
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return path


def read_manifest(family_dir: str | Path) -> dict:
    path = Path(family_dir) / MANIFEST
    require(path.exists(), f"model family {family_dir} has no {MANIFEST}; run stage train_family")
    return json.loads(path.read_text())


def check_family(family_dir: str | Path, corpus: str | Path, tokenizer=None) -> dict:
    """The manifest, after checking that `corpus` is the file the family was trained on and,
    when given, that `tokenizer` is the family's tokenizer. One-line PrivleakError otherwise:
    token ids of planted sequences only mean something under the tokenizer and corpus that
    produced the model."""
    manifest = read_manifest(family_dir)
    require(
        sha256_file(corpus) == manifest["corpus_sha256"],
        f"corpus {corpus} is not the corpus model family {family_dir} was trained on "
        "(sha256 differs); rerun stage train_family",
    )
    if tokenizer is not None:
        require(
            tokenizer_fingerprint(tokenizer) == manifest["tokenizer_sha256"],
            f"tokenizer mismatch: the given tokenizer is not model family {family_dir}'s "
            "tokenizer; load the family member's own tokenizer",
        )
    return manifest


def member_dirs(family_dir: str | Path) -> list[Path]:
    """The size folders of a family, smallest (fewest parameters) first."""
    sizes = read_manifest(family_dir)["sizes"]
    return [Path(family_dir) / name for name in sorted(sizes, key=lambda s: sizes[s]["parameters"])]
