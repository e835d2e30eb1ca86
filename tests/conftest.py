"""Shared fixtures: tiny random models and tokenizers built in memory, so tests run offline."""

from __future__ import annotations

import os
import time

# Tests never reach a model hub; fail fast instead of waiting on the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import psutil  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers, processors  # noqa: E402
from transformers import (  # noqa: E402
    LlamaConfig,
    LlamaForCausalLM,
    OPTConfig,
    OPTForCausalLM,
    PreTrainedTokenizerFast,
)

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "to", "park", "alice", "bob"]


def tiny_llama(vocab_size: int = 32, window: int = 64, seed: int = 0) -> LlamaForCausalLM:
    """A 2-layer random Llama (GQA, RoPE): the same code paths as SmolLM2 at toy size."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=window,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    return _peaked(LlamaForCausalLM(config).eval())


def copying_llama(vocab_size: int = 16, strength: float = 60.0) -> LlamaForCausalLM:
    """A 1-layer Llama with hand-set weights whose next-token logits are `strength` times the
    tokens' frequencies in the whole prompt (uniform attention: q = k = 0; values copy each
    token's one-hot): a model that reacts to a context document as strongly as asked, so a
    privacy audit on it has something to find."""
    hidden = 2 * vocab_size
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=8,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=512, bos_token_id=1, eos_token_id=2,
                         pad_token_id=0, tie_word_embeddings=False)  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    eye = torch.eye(vocab_size)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        for norm in (
            model.model.norm,
            *(
                m
                for layer in model.model.layers
                for m in (layer.input_layernorm, layer.post_attention_layernorm)
            ),
        ):
            norm.weight.fill_(1.0)  # fmt: skip
        model.model.embed_tokens.weight[:, :vocab_size] = eye  # token t -> dim t
        attention = model.model.layers[0].self_attn
        attention.v_proj.weight[:vocab_size, :vocab_size] = eye  # copy the one-hot
        attention.o_proj.weight[vocab_size:, :vocab_size] = eye  # into the upper half
        model.lm_head.weight[:, vocab_size:] = strength * eye  # logits read the frequencies
    return model


def family_llama(seed: int = 0, vocab_size: int = 300) -> LlamaForCausalLM:
    """The repo's tiny Llama family at toy size (`privleak.training.family.llama_config`): tied
    embeddings, RMSNorm, RoPE; the architecture S3 fine-tunes."""
    from privleak.training.family import llama_config

    torch.manual_seed(seed)
    size = {"hidden": 32, "layers": 2, "heads": 2, "intermediate": 64}
    return LlamaForCausalLM(llama_config(size, vocab_size, window=64))


@pytest.fixture(scope="module")
def one_torch_thread():
    """Toy training gains nothing from threads, and on shared cores OpenMP threads spinning for
    work slowed it several-fold; the process's setting is restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_opt(vocab_size: int = 32, window: int = 64, seed: int = 0) -> OPTForCausalLM:
    """A 2-layer random OPT: learned absolute positions, so a wrong position id under left
    padding changes the output (RoPE models are blind to a constant shift)."""
    torch.manual_seed(seed)
    config = OPTConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        ffn_dim=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=window,
        word_embed_proj_dim=32,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    return _peaked(OPTForCausalLM(config).eval())


def _peaked(model):
    # Larger weights than the default init make the distributions peaked, so a wrong position or
    # mask shows up as a large log-prob difference rather than hiding in a near-uniform output.
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(8.0 if parameter.dim() > 1 else 1.0)
    return model


def word_tokenizer(add_bos: bool) -> PreTrainedTokenizerFast:
    """A whitespace word-level tokenizer; with add_bos it prepends <s> like Llama-2 does."""
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3} | {w: i + 4 for i, w in enumerate(WORDS)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if add_bos:
        backend.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", 1)]
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
    )


@pytest.fixture(scope="session", params=["llama", "opt"])
def tiny_lm(request):
    """Each model-level test runs on a RoPE model and on an absolute-position model."""
    return tiny_llama() if request.param == "llama" else tiny_opt()


@pytest.fixture
def rng() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


def tiny_bert_classifier(num_labels: int = 2, vocab_size: int = 16):
    """A 1-layer random BERT sequence classifier (FactKB's architecture family) whose vocabulary
    covers word_tokenizer's ids (by default) or vocab_size ids."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=64,
        num_labels=num_labels,
    )
    return BertForSequenceClassification(config).eval()


class PeakForward:
    """A model proxy recording the largest forward it was asked for: rows, and rows × attended
    positions (cache slots included), so a test can show memory follows a budget."""

    def __init__(self, model):
        self.model, self.rows, self.area = model, 0, 0

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, **inputs):
        rows, attended = inputs.get("attention_mask", inputs["input_ids"]).shape
        self.rows, self.area = max(self.rows, rows), max(self.area, rows * attended)
        return self.model(**inputs)


def gone(pid: int, within: float = 10.0) -> bool:
    """Whether the process exits (or is a zombie) within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False
