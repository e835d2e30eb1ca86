"""Decoding: one sampler loop for N grouped streams, with logit transforms, exact per-decoder
log-probs, randomness that belongs to the group, and the per-group settings of the mixes.

    transforms  the logit transforms (temperature, top-k, top-p, greedy) and the sampled
                distribution;
    kernels     exact log-probs of given tokens under each decoder, without building it;
    rng         the group's random stream and the inverse-CDF draw;
    mix         the `mix` hook and the per-group settings cache of CID, DP-ICL and PAD;
    engine      the decode loop: prefill, chunks, forward modes, records.
"""

from privleak.decoding.engine import (
    FORWARD_MODES,
    Decoded,
    decode,
    prefill,
    resolve_forward_mode,
)
from privleak.decoding.kernels import decoder_logprobs, target_logprobs
from privleak.decoding.mix import GroupSettings, Mix
from privleak.decoding.rng import group_seed, group_uniforms, sample_inverse_cdf
from privleak.decoding.transforms import (
    Greedy,
    Temperature,
    TopK,
    TopP,
    Transform,
    greedy,
    sampling_logprobs,
    standard_transforms,
    temperature,
    top_k,
    top_p,
)

__all__ = [
    "FORWARD_MODES",
    "Decoded",
    "Greedy",
    "GroupSettings",
    "Mix",
    "Temperature",
    "TopK",
    "TopP",
    "Transform",
    "decode",
    "decoder_logprobs",
    "greedy",
    "group_seed",
    "group_uniforms",
    "prefill",
    "resolve_forward_mode",
    "sample_inverse_cdf",
    "sampling_logprobs",
    "standard_transforms",
    "target_logprobs",
    "temperature",
    "top_k",
    "top_p",
]
