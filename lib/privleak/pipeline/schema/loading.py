"""Reading params.yaml: `load_yaml` parses the text, rejecting a mapping key given twice (DVC
rejects those; plain YAML silently keeps the last), and `validate` checks the loaded mapping.
Either fails with one PrivleakError line that names the source.
"""

from typing import Any

import yaml
from pydantic import ValidationError

from privleak.errors import PrivleakError
from privleak.pipeline.schema.base import error_line
from privleak.pipeline.schema.crossgroup import Params


def validate(params: Any, source: str = "params.yaml") -> Params:
    """The validated Params model of a loaded params mapping; PrivleakError (one line naming
    `source`, the key path, the value and what is allowed) at the first problem."""
    try:
        return Params.model_validate(params)
    except ValidationError as error:
        line = error_line(error)
        raise PrivleakError(f"{source}: {line}") from None


SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""yaml.safe_load's loader, in libyaml's C where PyYAML was built with it (about 8x faster)."""


class _UniqueKeyLoader(SAFE_LOADER):
    """SafeLoader that rejects a mapping key given twice (merge keys `<<` may still override)."""

    source = "params.yaml"

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                seen = first.get(key)
            except TypeError:  # an unhashable key; SafeLoader reports it below
                continue
            if seen is not None:
                raise PrivleakError(
                    f"{self.source}: line {line}: key '{key}' is given twice (first at line "
                    f"{seen}); DVC rejects duplicate keys"
                )
            first[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, source: str = "params.yaml") -> Any:
    """Parse YAML text like yaml.safe_load, rejecting duplicate mapping keys; one-line
    PrivleakError naming `source` (and the line) otherwise."""
    loader = _UniqueKeyLoader(text)
    loader.source = source
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}: " if mark else ""
        raise PrivleakError(f"{source}: {where}not valid YAML: {error.problem}") from None
    except yaml.YAMLError as error:
        raise PrivleakError(f"{source}: not valid YAML: {error}".replace("\n", " ")) from None
    finally:
        loader.dispose()
