"""privleak.pipeline.schema: the real params.yaml passes, its repeated lib names stay in step with
lib,
and the YAML loader and error lines behave (the bad-input catalogue is test_bad_inputs.py)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import matplotlib.figure
import pytest

from privleak import decoding, figures, models, ngrams, prompts
from privleak.data import dialogs, loaders, synthetic
from privleak.errors import PrivleakError
from privleak.metrics import sequence
from privleak.mia import attacks
from privleak.mia import metrics as mia_metrics
from privleak.pipeline import paths, schema
from privleak.training import corpus, schedules
from tests.test_dvc_deps import LIB, imported_modules, module_file


def params() -> dict:
    return schema.load_yaml(paths.PARAMS_FILE.read_text())


def test_the_repository_params_pass_under_every_profile():
    for profile in schema.PROFILES:
        assert schema.validate(params() | {"profile": profile}).profile == profile


def test_repeated_names_match_the_library():
    assert schema.GENERATORS == tuple(sorted(synthetic.GENERATORS))
    assert schema.FILE_TYPES == loaders.FILE_TYPES
    assert schema.EMBEDDED_LMS == models.EMBEDDED_LMS
    assert set(schema.DTYPES) == set(models.DTYPES)
    assert schema.DECODER_KINDS == sequence.DECODER_KINDS
    assert set(schema.S0_TASKS) == set(prompts.TASKS)
    assert set(schema.FIGURE_FORMATS) == set(figures._METADATA)
    assert set(loaders.SPEC_KEYS) == set(schema.Slot.model_fields)
    assert schema.CLAIM_METHODS == mia_metrics.METHODS
    assert schema.MIA_VARIANCES == attacks.VARIANCES
    assert schema.MIA_METHODS == mia_metrics.METHODS
    assert schema.WINDOWS == ngrams.WINDOWS
    assert schema.FORWARD_MODES == decoding.FORWARD_MODES
    assert schema.DIALOG_DOMAINS == dialogs.DOMAINS
    assert {name: set(rules) for name, rules in schema.S3_SCHEDULES.items()} == {
        name: set(options) for name, options in schedules.SCHEDULE_OPTIONS.items()
    }


def test_figure_formats_are_ones_matplotlib_writes():
    supported = matplotlib.figure.Figure().canvas.get_supported_filetypes()
    assert set(schema.FIGURE_FORMATS) <= set(supported)


@pytest.mark.parametrize("generator", synthetic.GENERATORS)
def test_generator_options_match_the_generators(generator):
    keyword_only = {
        p.name: p.default
        for p in inspect.signature(synthetic.GENERATORS[generator]).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    fields = schema.GENERATOR_OPTIONS[generator].model_fields
    assert {name: list(d) if isinstance(d, tuple) else d for name, d in keyword_only.items()} == {
        name: field.default for name, field in fields.items()
    }


def test_family_mix_keys_are_the_generators_train_family_mixes():
    assert set(corpus.MIX_FIELDS) == set(schema.Mix.model_fields)


def test_duplicate_key_in_a_flow_mapping_names_key_and_line():
    with pytest.raises(PrivleakError, match=r"^x.yaml: line 2: key 'a' is given twice \(first"):
        schema.load_yaml("top: 1\nb: {a: 1, a: 2}\n", source="x.yaml")


def test_merge_keys_may_override_and_aliases_are_shared():
    loaded = schema.load_yaml("base: &b {a: 1, c: 2}\nover: {<<: *b, a: 3}\nsame: *b\n")
    assert loaded["over"] == {"a": 3, "c": 2}
    assert loaded["same"] is loaded["base"]


def test_an_unselected_profile_block_is_validated_too():
    bad = params() | {"profile": "smoke"}
    bad["s1"]["paper"]["isp"]["max_nodes"] = 0
    with pytest.raises(PrivleakError, match=r"s1\.paper\.isp\.max_nodes = 0: must be an integer"):
        schema.validate(bad)


def test_not_a_mapping_is_one_line():
    with pytest.raises(PrivleakError, match="^params.yaml: must be a mapping$"):
        schema.validate(None)


def test_no_pipeline_module_is_part_of_an_import_cycle():
    """params reads the schema and the schema never reads params back (lazy imports count)."""
    pipeline = [
        ".".join(file.relative_to(LIB).with_suffix("").parts).removesuffix(".__init__")
        for file in (LIB / "privleak" / "pipeline").rglob("*.py")
    ]
    for module in pipeline:
        pending, seen = list(imported_modules(module_file(module).read_text())), set()
        while pending:
            name = pending.pop()
            assert name != module, f"{module} is part of an import cycle"
            if name not in seen and module_file(name) is not None:
                seen.add(name)
                pending.extend(imported_modules(module_file(name).read_text()))


def test_load_imports_no_numerical_library():
    # The stage runner and preflight load params before any stage work: they stay light (~0.2 s)
    # because loading imports only yaml and pydantic, not torch, transformers, pandas or numpy.
    code = (
        "import sys; from privleak.pipeline import params; params.load(); "
        "print(' '.join(m for m in ('torch', 'transformers', 'pandas', 'numpy', 'scipy') "
        "if m in sys.modules))"
    )
    env_lib = str(paths.ROOT / "lib")
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": env_lib, "PATH": "/usr/bin:/bin"},
        cwd=paths.ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split() == []


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("per_family", 0, "per_family = 0: must be null or an integer >= 1"),
        ("max_windows", 2.5, "max_windows = 2.5: must be null or an integer >= 1"),
        ("stride", 0, "stride = 0: must be an integer >= 1"),
        ("min_distinct_tokens", 0, "min_distinct_tokens = 0: must be an integer >= 1"),
        ("min_distinct_tokens", 51, r"min_distinct_tokens = 51: must be <= suffix_tokens \(50\)"),
        ("min_esp", 0.0, r"min_esp = 0.0: must be a number in \(0, 1\]"),
        ("min_esp", 1.5, r"min_esp = 1.5: must be a number in \(0, 1\]"),
        (
            "min_esp",
            "1e-3",
            r"min_esp = '1e-3': must be a number in \(0, 1\] \(YAML reads 1e-3 as text",
        ),
        ("per_license", 1, "per_license: unknown key"),
    ],
)
def test_public_text_selection_params_are_one_line_errors(key, value, message):
    bad = params() | {"profile": "smoke"}
    bad["s1"]["smoke"]["public"][key] = value
    with pytest.raises(PrivleakError, match=r"^params.yaml: s1\.smoke\.public\." + message) as err:
        schema.validate(bad)
    assert "\n" not in str(err.value)
