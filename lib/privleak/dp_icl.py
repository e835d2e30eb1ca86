"""DP in-context learning (DP-RAG, Grislain): the next token from an exponential mechanism over
one stream per retrieved document plus one public stream.

Each retrieved document d_i gets its own stream (question + d_i + response so far) and one public
stream has the question alone. With L_i the document stream's next-token distribution:
    l_norm_i(r)    = (exp(alpha * (ln L_i(r) - max_s ln L_i(s))) - 1) / alpha      in [-1/alpha, 0]
    l_centered_i   = l_norm_i - (max_s l_norm_i + min_s l_norm_i) / 2
    l_clipped_i    = l_centered_i * min(1, C / max_s |l_centered_i(s)|)             (inf-norm <= C)
    U(r)           = theta * ln L_pub(r) + sum_i l_clipped_i(r)
    P(next = r)    ∝ exp(epsilon * U(r) / (2C))
Adding or removing one document changes U by at most C at every token, so each token is
epsilon-DP (the exponential mechanism with sensitivity C); the public term does not depend on the
documents. `DPICLMix` is the shared decoder's `mix`: groups are padded to one stream count, and
each group's own number of documents says which streams count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from privleak.accounting import check_epsilon
from privleak.decoding import GroupSettings
from privleak.decoding.mix import one_or_per_group
from privleak.errors import require


def check_dp_icl(alpha: float, clip: float, theta: float) -> None:
    require(alpha > 0, f"alpha (DP-ICL l_norm) must be > 0, got {alpha}")
    require(clip > 0, f"C (DP-ICL clipping) must be > 0, got {clip}")
    require(theta >= 0, f"theta (DP-ICL public weight) must be >= 0, got {theta}")


def clipped_scores(logprobs: torch.Tensor, alpha: float, clip: float) -> torch.Tensor:
    """[..., V] l_clipped of next-token log-probs [..., V] (module docstring). Tokens with
    log-prob -inf (a padded vocabulary) sit at l_norm = -1/alpha, the floor every token can reach.
    """
    top = logprobs.amax(-1, keepdim=True)
    norm = torch.expm1(alpha * (logprobs - top)) / alpha
    centered = norm - (norm.amax(-1, keepdim=True) + norm.amin(-1, keepdim=True)) / 2
    largest = centered.abs().amax(-1, keepdim=True)
    return centered * torch.clamp(clip / largest, max=1.0)


def dp_icl_utility(
    public_logprobs: torch.Tensor,
    document_logprobs: torch.Tensor,
    present: torch.Tensor,
    alpha: float,
    clip: float,
    theta: float | torch.Tensor,
) -> torch.Tensor:
    """[g, V] U = theta * public_logprobs [g, V] + the sum of l_clipped over the documents
    [g, k, V] whose `present` [g, k] flag is set (absent slots pad groups with fewer documents).
    theta: one weight, or one per group [g]. The documents' rows may be log-probs or logits:
    l_norm reads only their differences from the top token.

    `clipped_scores` summed, without building it: l_norm's largest value is 0 (the top token), so
    l_centered = l_norm - min/2 and its largest magnitude is |min|/2; each document's clipped row
    is then one scale times (l_norm - min/2), and the sum over documents one batched product."""
    shifted = document_logprobs - document_logprobs.amax(-1, keepdim=True)
    norm = torch.expm1(shifted if alpha == 1 else alpha * shifted)  # alpha * l_norm
    low = norm.amin(-1)  # [g, k] alpha * min l_norm
    scale = torch.clamp(clip / (low.abs() / (2 * alpha)), max=1.0) / alpha * present
    documents = torch.bmm(scale[:, None, :], norm)[:, 0] - (scale * low).sum(1, keepdim=True) / 2
    theta = torch.as_tensor(theta, dtype=public_logprobs.dtype, device=public_logprobs.device)
    # theta = 0 must not turn a -inf log-prob into NaN: the public term is then exactly 0
    weighted = theta.reshape(-1, 1) * public_logprobs
    public = torch.where(theta.reshape(-1, 1) == 0, 0.0, weighted)
    return torch.where(torch.isfinite(public_logprobs), public + documents, float("-inf"))


@dataclass
class DPICLMix:
    """The decoder's `mix` for DP-ICL: stream log-probs [g, 1 + k, V] (public stream first, then k
    document slots, which may hold logits instead) -> logits epsilon * U / (2C) [g, V], sampled
    as they are (no transforms).

    documents: how many of the k slots each group fills (one value, or one per group);
    epsilon: the per-token budget (one value, or one per group);
    theta: the public stream's weight (one value, or one per group).
    Records per step: documents [g] (the slots that counted). Call `check_slots` with the stream
    count before decoding: the mix itself never syncs with the device to check it."""

    documents: Sequence[int] | int
    epsilon: Sequence[float] | float
    alpha: float = 1.0
    clip: float = 1.0
    theta: Sequence[float] | float = 1.0

    def __post_init__(self) -> None:
        documents, epsilons = one_or_per_group(self.documents), one_or_per_group(self.epsilon)
        thetas = one_or_per_group(self.theta)
        for theta in thetas:
            check_dp_icl(self.alpha, self.clip, theta)
        for count in documents:
            require(count >= 0, f"a group's document count must be >= 0, got {count}")
        for value in epsilons:
            check_epsilon(value, "DP-ICL epsilon per token")
        self._settings = GroupSettings(
            {
                "documents": torch.tensor(documents),
                "epsilons": torch.tensor(epsilons, dtype=torch.float32),
                "thetas": torch.tensor(thetas, dtype=torch.float32),
            }
        )

    def check_slots(self, slots: int) -> None:
        """One line when a group has more documents than the `slots` streams it is given."""
        most = int(self._settings.columns["documents"].max())
        require(most <= slots, f"a group has {most} documents but only {slots} stream slots")

    def __call__(self, stream_logprobs: torch.Tensor, groups: torch.Tensor, step: int):
        slots = stream_logprobs.shape[1] - 1
        documents = self._settings.rows("documents", groups)
        present = torch.arange(slots, device=groups.device)[None, :] < documents[:, None]
        thetas = self._settings.rows("thetas", groups)
        utility = dp_icl_utility(
            stream_logprobs[:, 0], stream_logprobs[:, 1:], present, self.alpha, self.clip, thetas
        )
        epsilons = self._settings.rows("epsilons", groups)
        return epsilons[:, None] * utility / (2 * self.clip), {"documents": documents}
