"""S2's RAG system under attack: the prompt, defended generation through the shared decoder, the
Summ. baseline's prompt, and the probability that a defended decoder emits a planted secret.

Every noise defense of one prompt (none, static, PAD and its ablations and sweeps) decodes the same
prompt, so `defended_generate` puts a prompt's defenses in one chunk of the decoder: the prompt is
prefilled once and its cache forked to every defense. Each (prompt, defense) group draws from its
own random streams (sampler and noise), keyed by (prompt key, defense name).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence

import torch

from privleak.batching import ForwardCounter, pad_rows, position_ids, repeat_cache
from privleak.decoding import Temperature, decode
from privleak.errors import require
from privleak.models import real_logits
from privleak.pad import (
    LogitNoise,
    Noise,
    PADSettings,
    StaticNoise,
    noise_seeds,
    noisy_target_logprobs,
)

TEMPLATE = "Context:\n{context}\n\nQuestion:{question}\nAnswer:\n"
"""The RAG prompt of the official code's RAGPipeline (App. A prints the same layout in lower
case: "context: ... question: ... answer:")."""

TEMPLATES = ("chat", "plain")
"""How the model reads a prompt: `plain` as text (base models, the paper's Pythia and Llama-2),
`chat` as the user turn of the tokenizer's own chat template (instruct models)."""

EXTRACT_TEMPLATE = (
    "Given the following question and context, extract any part of the context *AS IS* that is "
    "relevant to answer the question. If none of the context is relevant return NO_OUTPUT."
    "\n\nRemember, *DO NOT* edit the extracted parts of the context.\n\n> Question: {question}"
    "\n> Context:\n>>>\n{document}\n>>>\nExtracted relevant parts:"
)
"""Summ. as Zeng et al. define it: each retrieved document condensed to the query by extraction.
Their code (phycholosogy/RAG-privacy, run_language_model.py) writes LangChain's LLMChainExtractor
prompt by hand, one call per document, with the answer's generation budget; this is that prompt
verbatim. (A bug in that code, `find('-para')` being truthy when absent, runs it without the "DO
NOT edit" sentence; the sentence is kept here, as LangChain's prompt has it.) The condensing LM is
the generator itself: PAD does not say which LM condenses, Zeng et al. choose it separately."""

NO_OUTPUT = "NO_OUTPUT"
"""The extractor's answer when no part of the document is relevant."""

PARAPHRASE_TEMPLATE = (
    "Question: {question}\nDocument:\n{document}\n\n"
    "Summarize the parts of the document that help answer the question, in your own words and "
    "in one or two sentences.\nSummary:\n"
)
"""Summ., paraphrase (ours, no paper's): a variant that condenses by paraphrase. No claim reads
it."""

SUMMARY_STYLES = {"extract": EXTRACT_TEMPLATE, "paraphrase": PARAPHRASE_TEMPLATE}


def rag_prompt(question: str, contexts: Sequence[str]) -> str:
    """The RAG prompt of a question and its retrieved contexts (blank-line separated)."""
    return TEMPLATE.format(context="\n\n".join(contexts), question=question)


def summary_prompt(question: str, document: str, style: str = "extract") -> str:
    """The condensation prompt of one retrieved document (`SUMMARY_STYLES`)."""
    require(style in SUMMARY_STYLES, f"summary style '{style}' is unknown; use extract|paraphrase")
    return SUMMARY_STYLES[style].format(question=question, document=document)


def condensed_context(response: str) -> str | None:
    """The context a condensation passes on: the response stripped, or None (the document is
    dropped) when it is empty or exactly the no-output answer, as LangChain's NoOutputParser and
    LLMChainExtractor treat it. Zeng et al.'s code passes every answer on, NO_OUTPUT included; we
    follow the prompt's own contract (LangChain's), where NO_OUTPUT means nothing is relevant."""
    text = response.strip()
    return None if not text or text == NO_OUTPUT else text


def distance_filtered(
    context_ids: Sequence[Hashable], distances: Mapping[Hashable, float], threshold: float
) -> list:
    """Dist. (Zeng et al.): the retrieved contexts within L2 distance `threshold` of the query, in
    their order; a context beyond it is dropped, never replaced by a lower-ranked candidate.
    distances: id -> L2 (the paper's "L2-norm distance"; Zeng et al.'s generate_prompt.py
    thresholds Chroma's squared L2, the same at 1.0). Their code filters its retrieved top k,
    which it does not rerank; PAD retrieves 6 and reranks to 3 without saying where Dist. acts.
    Filtering the reranked top contexts, which the model would otherwise read, is our reading:
    filtering the 6 candidates first would let a lower-ranked one take a dropped one's place."""
    return [c for c in context_ids if distances[c] <= threshold]


def encode_prompt(tokenizer, text: str, template: str = "plain") -> list[int]:
    """Token ids of a prompt: `plain`, the text with the tokenizer's special tokens (BOS where it
    adds one); `chat`, the text as the user turn of the tokenizer's chat template (which writes
    its own special tokens), the assistant's turn opened."""
    require(template in TEMPLATES, f"template '{template}' is unknown; use chat|plain")
    if template == "plain":
        return list(tokenizer(text, add_special_tokens=True)["input_ids"])
    require(
        getattr(tokenizer, "chat_template", None) is not None,
        "S2 template 'chat' needs a tokenizer with a chat template; this one has none (use "
        "template: plain for a base model)",
    )
    turn = [{"role": "user", "content": text}]
    opened = tokenizer.apply_chat_template(turn, tokenize=False, add_generation_prompt=True)
    return list(tokenizer(opened, add_special_tokens=False)["input_ids"])


def defended_generate(
    model,
    tokenizer,
    prompts: Sequence[str],
    keys: Sequence[Hashable],
    defenses: Mapping[str, Noise],
    *,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    min_new_tokens: int = 0,
    max_batch_streams: int | None = None,
    cache=None,
    forward_mode: str = "auto",
    template: str = "plain",
) -> list[dict]:
    """Decode every prompt under every defense (temperature sampling on the defended logits).

    Rows, prompt-major then defense: {key, defense, tokens, text, clean_logprobs (each token's
    log-prob under the undefended model at temperature 1), sigma, sensitivity, protected (per step,
    `privleak.pad.LogitNoise` records)}. max_batch_streams is rounded down to a multiple of the
    number of defenses (at least one prompt), so a prompt's defenses share one prefill.
    forward_mode: `privleak.decoding.decode`'s; template: `encode_prompt`'s."""
    require(len(prompts) == len(keys), f"{len(prompts)} prompts for {len(keys)} keys")
    require(len(defenses) >= 1, "give at least one defense")
    names = list(defenses)
    group_keys = [(key, name) for key in keys for name in names]
    ids = [encode_prompt(tokenizer, text, template) for text in prompts]
    budget = None
    if max_batch_streams is not None:
        budget = max(len(names), max_batch_streams // len(names) * len(names))
    decoded = decode(
        model,
        [prompt for prompt in ids for _ in names],
        max_new_tokens=max_new_tokens,
        transforms=[Temperature(temperature)],
        mix=LogitNoise([defenses[name] for _ in ids for name in names],
                       noise_seeds(seed, group_keys)),
        seed=seed,
        group_keys=group_keys,
        eos_token_id=tokenizer.eos_token_id,
        min_new_tokens=min_new_tokens,
        pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
        max_batch_streams=budget,
        cache=cache,
        forward_mode=forward_mode,
    )  # fmt: skip
    rows = []
    for g, (tokens, (key, name)) in enumerate(zip(decoded.token_lists(), group_keys, strict=True)):
        steps = len(tokens)
        rows.append(
            {
                "key": key,
                "defense": name,
                "tokens": tokens,
                "text": tokenizer.decode(tokens, skip_special_tokens=True),
                "clean_logprobs": decoded.stream_logprobs[g, :steps].tolist(),
                **{
                    record: decoded.records[record][g, :steps].tolist()
                    for record in ("sigma", "sensitivity", "protected")
                },
            }
        )
    return rows


@torch.inference_mode()
def suffix_distributions(
    model, prompt: Sequence[int], suffixes: Sequence[Sequence[int]], pad_id: int
) -> tuple[torch.Tensor, ForwardCounter]:
    """([n, L, V] next-token log-probs (temperature 1, real vocabulary) at every position of each
    of n suffixes forced after one prompt, L = the longest suffix, and the forward count).

    The prompt is forwarded once and its cache forked to the n suffixes, which are forwarded
    together, right-padded (rows past a suffix's end are padding)."""
    require(len(prompt) >= 1 and len(suffixes) >= 1, "give a prompt and at least one suffix")
    require(all(len(s) >= 1 for s in suffixes), "every forced suffix needs at least one token")
    counter, device = ForwardCounter(), model.device
    head = model(input_ids=torch.tensor([list(prompt)], device=device), use_cache=True,
                 logits_to_keep=1)  # fmt: skip
    counter.add(1, len(prompt))
    ids, mask = pad_rows(suffixes, pad_id, "right")
    cache = repeat_cache(head.past_key_values, len(suffixes))
    full_mask = torch.cat([torch.ones(len(suffixes), len(prompt), dtype=mask.dtype), mask], 1)
    full_mask = full_mask.to(device)
    out = model(
        input_ids=ids.to(device),
        attention_mask=full_mask,
        position_ids=position_ids(full_mask)[:, len(prompt) :],
        past_key_values=cache,
        use_cache=True,
    )
    counter.add(*ids.shape)
    first = head.logits[:, -1:].expand(len(suffixes), 1, -1)
    logits = torch.cat([first, out.logits[:, :-1]], 1).float()
    return torch.log_softmax(real_logits(model, logits), -1), counter


def secret_logprobs(
    model,
    tokenizer,
    prompt: str,
    cues: Sequence[str],
    secrets: Sequence[str],
    defenses: Mapping[str, Noise],
    *,
    temperature: float,
    draws: int,
    seed: int,
    key: Hashable,
    template: str = "plain",
) -> dict[str, list[float]]:
    """{defense: [n] ln P(the decoder emits secrets[j] right after cues[j])} for one prompt.

    The response is forced to open with cues[j] (the document's words right before the secret, as
    a repeat-the-context answer has them), then the secret's tokens are scored: their log-probs
    under each defense's sampling distribution, summed. Noise defenses integrate the noise by
    `draws` hashed draws per position (`privleak.pad.noisy_target_logprobs`); every defense shares
    one forward of the prompt and the cue + secret suffixes. template: `encode_prompt`'s."""
    require(len(cues) == len(secrets) >= 1, "give one cue per secret, at least one")
    cue_ids = [tokenizer(cue, add_special_tokens=False)["input_ids"] for cue in cues]
    secret_ids = [tokenizer(" " + s, add_special_tokens=False)["input_ids"] for s in secrets]
    suffixes = [c + s for c, s in zip(cue_ids, secret_ids, strict=True)]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = encode_prompt(tokenizer, prompt, template)
    logprobs, _ = suffix_distributions(model, ids, suffixes, pad_id)
    rows, positions, targets, owners = [], [], [], []
    for j, (cue, secret) in enumerate(zip(cue_ids, secret_ids, strict=True)):
        for i, token in enumerate(secret):
            rows.append(logprobs[j, len(cue) + i])
            positions.append(len(cue) + i + 1)
            targets.append(token)
            owners.append(j)
    stacked = torch.stack(rows)
    owner = torch.tensor(owners)
    out = {}
    for name, noise in defenses.items():
        per_token = noisy_target_logprobs(
            stacked,
            torch.tensor(targets),
            torch.tensor(positions),
            [noise] * len(rows),
            noise_seeds(seed, [(key, name, "esp", n) for n in range(len(rows))]),
            [Temperature(temperature)],
            draws if noise is not None else 1,
        ).cpu()
        out[name] = torch.zeros(len(secrets)).index_add_(0, owner, per_token.float()).tolist()
    return out


def noise_defenses(
    pad: PADSettings,
    static_sigma: float,
    *,
    sweep: bool,
    amplifications: Sequence[float] = (),
    epsilons: Sequence[float] = (),
    static_sigmas: Sequence[float] = (),
) -> dict[str, tuple[str, float, object]]:
    """The noise defenses S2 runs on one corpus, forked from one prefill per prompt.

    Args:
        pad: the PAD defense's settings (the table's and every variant's base).
        static_sigma: the Static defense's noise std (Table 1's row).
        sweep: whether this is the sweep corpus, which alone runs the ablations and sweeps.
        amplifications, epsilons, static_sigmas: the swept PAD and Static values; the table's own
            value is not repeated.

    Returns:
        {defense: (family, swept value or NaN, noise)}: extraction (no noise), static and pad
        ("table"), then on the sweep corpus no_calib and no_sens ("ablation"),
        amplification=<a>, epsilon=<e> and static=<sigma> ("static").
    """
    out = {
        "extraction": ("table", float("nan"), None),
        "static": ("table", static_sigma, StaticNoise(static_sigma)),
        "pad": ("table", pad.amplification, pad),
    }
    if not sweep:
        return out
    out["no_calib"] = ("ablation", float("nan"), dataclasses.replace(pad, calibration=False))
    out["no_sens"] = ("ablation", float("nan"), dataclasses.replace(pad, sensitivity=False))
    for value in amplifications:
        if value != pad.amplification:
            noise = dataclasses.replace(pad, amplification=value)
            out[f"amplification={value:g}"] = ("amplification", value, noise)
    for value in epsilons:
        if value != pad.epsilon:
            out[f"epsilon={value:g}"] = ("epsilon", value, dataclasses.replace(pad, epsilon=value))
    for value in static_sigmas:
        if value != static_sigma:
            out[f"static={value:g}"] = ("static", value, StaticNoise(value))
    return out
