"""The shareable report: the papers' own numbers (data/papers/*.yaml), our artifacts beside them
and the claims each artifact tests, rendered to one self-contained page, reports/index.html."""
