# %% [markdown]
# # The report: every artifact beside the paper's own numbers
# One self-contained page, `reports/index.html`. For each paper (S0 ... S4) a card per artifact in
# the paper's order: our figure or table, the paper's numbers beside ours (data/papers/<paper>.yaml,
# each transcribed once from the paper), the claims the artifact tests with effect, 95 % interval,
# verdict and note, and the stage and executed notebook that made it. At the top: verdict counts
# per paper and what moved since the committed metrics. Figures are embedded, so the page shows
# them offline and alone; links to tables, PDFs and notebooks need `figures/` and `reports/`
# beside it.

# %% tags=["parameters"]
profile = "smoke"

# %%
import pandas as pd

from privleak.pipeline import params as params_module
from privleak.pipeline import paths
from privleak.report import cards, page, papers, run

# %% [markdown]
# ## Load: the paper files, the judged claims, the params and the run

# %%
paper_files = papers.load_all()
claims = pd.read_csv(paths.FIGURES / "claims" / "claims.csv").fillna({"quote": ""})  # extensions
params = params_module.load()
outputs = run.outputs()
built = cards.build(paper_files, claims, paths.FIGURES, outputs)
changes = run.changes(profile)

# %% [markdown]
# ## Show: per paper, claims by verdict and cards by agreement with the paper

# %%
print(changes["headline"])
pd.DataFrame({key: cards.summary(built[key]) for key in paper_files}).T

# %% [markdown]
# ## Save: reports/index.html

# %%
this_run = {"profile": profile, "commit": run.commit(), "changes": changes, "outputs": outputs}
context = page.context(paper_files, built, params, paths.FIGURES, this_run)
(paths.REPORTS / "index.html").write_text(page.render(context))
