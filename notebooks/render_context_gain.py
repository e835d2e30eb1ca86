# %% [markdown]
# # Render: context gain by response position
# Reads only the cached scores of `context_gain`; no model runs here.

# %% tags=["parameters"]
figures = {"formats": ["png", "pdf"]}

# %% [markdown]
# ## Load

# %%
import json

import matplotlib.pyplot as plt
import pandas as pd

from privleak import paths
from privleak.figures import save_figure

scores = pd.read_parquet(paths.INTERIM / "foundation" / "context_gain.parquet")
scores["gain"] = scores["logprob_with"] - scores["logprob_without"]

# %% [markdown]
# ## Mean log-prob by response position, with and without the article

# %%
by_position = scores.groupby("position")[["logprob_with", "logprob_without", "gain"]].mean()
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(by_position.index, by_position["logprob_with"], label="with article")
ax.plot(by_position.index, by_position["logprob_without"], label="empty context")
ax.set_xlabel("response token position")
ax.set_ylabel("mean log p(token)")
ax.set_title(f"Reference highlights, {scores['example'].nunique()} articles")
ax.legend()
save_figure(
    fig, paths.FIGURES / "foundation" / "context_gain_by_position", tuple(figures["formats"])
)

# %% [markdown]
# ## Headline numbers

# %%
metrics = {
    "examples": int(scores["example"].nunique()),
    "response_tokens": int(len(scores)),
    "nll_with_context": float(-scores["logprob_with"].mean()),
    "nll_without_context": float(-scores["logprob_without"].mean()),
    "mean_gain_nats": float(scores["gain"].mean()),
    "share_tokens_helped": float((scores["gain"] > 0).mean()),
}
paths.METRICS.mkdir(exist_ok=True)
(paths.METRICS / "foundation.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
metrics
