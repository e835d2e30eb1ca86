"""Run one dvc.yaml stage's notebook: `python -m privleak.stage <stage>`.

The notebook is notebooks/<stage>.py (jupytext py:percent). It receives only the params the stage
declares, injected by papermill after its `parameters` cell. The executed copy is written to
reports/<stage>/<stage>.ipynb and .html, never over the source. On failure the stage's
declared outputs are removed, so nothing half-written looks complete, and the error is one line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

from privleak import params as params_module
from privleak import paths
from privleak.errors import PrivleakError, require


def _remove(outputs) -> None:
    for output in outputs:
        if output.is_dir():
            shutil.rmtree(output)
        elif output.exists():
            output.unlink()


def run(stage: str, profile: str | None = None) -> None:
    """Execute the stage notebook with its declared params; raise PrivleakError on failure.

    `profile` overrides params.yaml's selection for a manual run (dvc.yaml never passes it).
    """
    import jupytext
    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    params = params_module.load()
    if profile is not None:
        require(
            profile in params_module.PROFILES,
            f"--profile '{profile}' is unknown; allowed: {', '.join(params_module.PROFILES)}",
        )
        params["profile"] = profile
    values = params_module.stage_params(stage, params)
    outputs = params_module.stage_outputs(stage, params)
    source = paths.NOTEBOOKS / f"{stage}.py"
    require(source.exists(), f"stage '{stage}' has no notebook {source}")
    notebook = jupytext.read(source)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    _remove(outputs)
    report_dir = paths.REPORTS / stage
    report_dir.mkdir(parents=True, exist_ok=True)
    executed_path = report_dir / f"{stage}.ipynb"
    # The kernel inherits these: no tokenizer thread pool, and OpenMP threads that sleep instead
    # of spinning between ops (spinning made forwards ~3x slower on a shared 2-core machine).
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # Error messages in the notebook name params by their full path, profile included.
    os.environ[params_module.PROFILE_ENV] = params["profile"]
    started = time.perf_counter()
    try:
        papermill.execute_notebook(
            notebook,
            str(executed_path),
            parameters=values,
            kernel_name="python3",
            language="python",
            cwd=str(paths.ROOT),
            progress_bar=False,
            log_output=False,
        )
    except papermill.PapermillExecutionError as error:
        _remove(outputs)
        message = str(error.evalue).strip().splitlines()[-1] if str(error.evalue).strip() else ""
        raise PrivleakError(
            f"stage '{stage}' failed: {error.ename}: {message} (see {executed_path})"
        ) from None
    html, _ = HTMLExporter().from_notebook_node(nbformat.read(executed_path, as_version=4))
    (report_dir / f"{stage}.html").write_text(html)
    print(f"stage {stage}: {time.perf_counter() - started:.1f} s", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run one dvc.yaml stage notebook.")
    parser.add_argument("stage")
    parser.add_argument("--profile", help="override params.yaml's profile for a manual run")
    args = parser.parse_args(argv)
    try:
        run(args.stage, args.profile)
    except PrivleakError as error:
        print(f"privleak: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
