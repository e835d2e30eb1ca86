# %% [markdown]
# # Gallery
# One page, `reports/index.html`, linking every executed stage notebook, every table and every
# figure (shown as PNG, with links to each format in `figures.formats`). Built last, from the
# files the other stages wrote; links are relative to `reports/`.

# %% tags=["parameters"]
figures = {"formats": ["png", "pdf"]}

# %%
import html

from privleak.pipeline import paths

reports = sorted(p for p in paths.REPORTS.glob("*/*.html") if p.parent.name != "gallery")
tables = sorted(paths.FIGURES.rglob("*.md"))
figure_stems = sorted(
    p.relative_to(paths.FIGURES).with_suffix("") for p in paths.FIGURES.rglob("*.png")
)


# %%
def link(href: str, label: str) -> str:
    return f'<a href="{html.escape(href)}">{html.escape(label)}</a>'


sections = ["<h2>Executed notebooks</h2><ul>"]
sections += [f"<li>{link(p.relative_to(paths.REPORTS).as_posix(), p.stem)}</li>" for p in reports]
sections += ["</ul><h2>Tables</h2><ul>"]
sections += [
    f"<li>{link('../figures/' + p.relative_to(paths.FIGURES).as_posix(), p.stem)}</li>"
    for p in tables
]
sections += ["</ul><h2>Figures</h2>"]
for stem in figure_stems:
    name = stem.as_posix()
    downloads = " ".join(link(f"../figures/{name}.{fmt}", fmt) for fmt in figures["formats"])
    sections.append(
        f'<figure><img src="../figures/{html.escape(name)}.png" width="480">'
        f"<figcaption>{html.escape(name)} {downloads}</figcaption></figure>"
    )
page = (
    "<!doctype html><html><head><meta charset='utf-8'><title>privleak reports</title></head>"
    "<body><h1>privleak: reports and figures</h1>" + "\n".join(sections) + "</body></html>\n"
)
(paths.REPORTS / "index.html").write_text(page)
print(f"{len(reports)} reports, {len(tables)} tables, {len(figure_stems)} figures")
