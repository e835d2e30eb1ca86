"""An executed notebook rendered as the stage's HTML report (nbconvert's HTML exporter, its default
template): `python -m privleak.pipeline.report_html EXECUTED.ipynb REPORT.html`.

The stage runner runs it in a process forked from the kernels' zygote (`privleak.pipeline.zygote`),
where nbconvert is imported and its templates, lexers and patterns are warm: about 0.2 s a report
instead of about 1.3 s in the runner's own process.
"""

from __future__ import annotations

import sys
from pathlib import Path


def render(executed: Path) -> str:
    """The HTML of the notebook file `executed`."""
    import nbformat
    from nbconvert import HTMLExporter

    html, _ = HTMLExporter().from_notebook_node(nbformat.read(executed, as_version=4))
    return html


def warm() -> None:
    """Render a one-cell notebook once: what every later rendering in this process (or a fork of
    it) reuses is compiled and loaded."""
    import nbformat
    from nbconvert import HTMLExporter

    cell = nbformat.v4.new_code_cell("x = 1", outputs=[nbformat.v4.new_output("stream", text="1")])
    HTMLExporter().from_notebook_node(nbformat.v4.new_notebook(cells=[cell]))


def main(argv: list[str]) -> int:
    executed, report = map(Path, argv)
    report.write_text(render(executed))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
