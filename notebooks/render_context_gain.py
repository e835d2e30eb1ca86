# %% [markdown]
# # Render: context gain by response position
# Reads only the cached scores of `context_gain`; no model runs here. Curves are means over
# articles with 95% bootstrap confidence intervals (fixed seed: the same figure on every run).

# %% tags=["parameters"]
figures = {"formats": ["png", "pdf"]}

# %% [markdown]
# ## Load

# %%
import json

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from privleak.figures import BOOTSTRAP, check_formats, outside_legend, save_figure, style
from privleak.pipeline import paths

style()
FORMATS = check_formats(figures["formats"])
scores = pd.read_parquet(paths.INTERIM / "foundation" / "context_gain.parquet")
scores["gain"] = scores["logprob_with"] - scores["logprob_without"]

# %% [markdown]
# ## Mean log-prob by response position, with and without the article
# Right: the per-token gain, whose interval (paired per article) the two left bands cannot show.

# %%
long = scores.melt(
    id_vars=["example", "position"], value_vars=["logprob_with", "logprob_without"],
    var_name="context", value_name="logprob",
)  # fmt: skip
long["context"] = long["context"].map(
    {"logprob_with": "with article", "logprob_without": "empty context"}
)
fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3))
sns.lineplot(
    data=long, x="position", y="logprob", hue="context",
    hue_order=["with article", "empty context"], ax=left, **BOOTSTRAP,
)  # fmt: skip
left.set(xlabel="response token position", ylabel="mean log p(token)", title="log-prob")
outside_legend(fig, left, below=True)
sns.lineplot(data=scores, x="position", y="gain", color="grey", ax=right, **BOOTSTRAP)
right.axhline(0, color="black", lw=0.8)
right.set(xlabel="response token position", ylabel="mean gain (nats)", title="gain: with − without")
fig.suptitle(f"Reference highlights, {scores['example'].nunique()} articles")
save_figure(fig, paths.FIGURES / "foundation" / "context_gain_by_position", FORMATS)

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
