"""The params.yaml schema: every group and every profile block, checked before any stage runs.

`validate(params, source)` checks a loaded params mapping and returns the `Params` model;
`load_yaml(text, source)` parses the file and rejects a mapping key given twice. A failure is one
PrivleakError line:
    <source>: <key.path[i]> = <value>: <what is allowed>

base holds the rule machinery, one module per group family holds its blocks (foundation, data,
family, s0 to s4, audit, mia), crossgroup the rules that read more than one group, loading the
entry points.
Names that lib modules also define (generators, decoder kinds, dtypes, S0 tasks, ...) are
repeated here so that validating never imports torch; tests/test_schema.py keeps them in step.
"""

from privleak.pipeline.schema.base import DTYPES, PROFILES
from privleak.pipeline.schema.data import (
    DIALOG_DOMAINS,
    FILE_TYPES,
    GENERATOR_OPTIONS,
    GENERATORS,
    Slot,
)
from privleak.pipeline.schema.family import FAMILY_DIR, Mix
from privleak.pipeline.schema.foundation import CLAIM_METHODS, EMBEDDED_LMS, FIGURE_FORMATS
from privleak.pipeline.schema.loading import SAFE_LOADER, load_yaml, validate
from privleak.pipeline.schema.mia import MIA_METHODS, MIA_VARIANCES
from privleak.pipeline.schema.s0 import S0_TASKS, WINDOWS
from privleak.pipeline.schema.s1 import DECODER_KINDS
from privleak.pipeline.schema.s2 import FORWARD_MODES
from privleak.pipeline.schema.s3 import S3_SCHEDULES

__all__ = [
    "CLAIM_METHODS",
    "DECODER_KINDS",
    "DIALOG_DOMAINS",
    "DTYPES",
    "EMBEDDED_LMS",
    "FAMILY_DIR",
    "FIGURE_FORMATS",
    "FILE_TYPES",
    "FORWARD_MODES",
    "GENERATORS",
    "GENERATOR_OPTIONS",
    "MIA_METHODS",
    "MIA_VARIANCES",
    "PROFILES",
    "S0_TASKS",
    "S3_SCHEDULES",
    "SAFE_LOADER",
    "WINDOWS",
    "Mix",
    "Slot",
    "load_yaml",
    "validate",
]
