"""Per-unit checkpoints of one stage run, so an interrupted long stage resumes (docs/design.md §9).

A long stage splits its work into units (an example, a chunk of examples, one forward batch),
each deterministic given its key: decoders draw a group's randomness from (seed, group key), and
a batch's numbers depend only on its own rows. The first run saves every finished unit; a rerun
after an interruption loads those and computes only the missing ones, with results bit-identical
to an uninterrupted run.

Units live in data/checkpoints/<stage>/<fingerprint>/, outside every DVC output (gitignored and
dvcignored). The fingerprint hashes everything that determines the results: the stage's declared
param values as the notebook runs them (the profile enters through the values it selects; not
`workers`, which sets only how fast) and
its dvc.yaml deps (files by content; folders by the relative path, size and mtime of each file,
cheap for gigabytes of models). A changed param, code or data file therefore opens a fresh
folder and never resumes stale units. `clear(stage)` drops a stage's checkpoints once it has
succeeded.

Values are pickled, one file per unit: an exact round trip of tensors, arrays, DataFrames and
lists of dicts (parquet would turn list columns into arrays, and a resumed run must equal an
uninterrupted one byte for byte). The files are written by this code on this machine and read
back only by it. A unit is written to a temporary file and renamed into place, so a crash never
leaves a half-written unit under a unit's name; an unreadable unit is recomputed.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tqdm import tqdm

from privleak.errors import require
from privleak.pipeline import params as params_module
from privleak.pipeline import paths
from privleak.pipeline.workers import completed

T = TypeVar("T")
FOLDER = "checkpoints"  # under data/
SPEED_ONLY = ("workers",)  # declared params that set how fast a stage runs, never its results


def root(stage: str) -> Path:
    """The folder holding every checkpoint of `stage` (one subfolder per fingerprint)."""
    return paths.DATA / FOLDER / stage


def declared_values(stage: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The stage's declared params (dvc.yaml) by name, taken from `values` (a notebook's
    globals(): the values it runs with, whatever the profile or a manual override)."""
    names = params_module.stage_params(stage)
    missing = [name for name in names if name not in values]
    require(
        not missing,
        f"checkpoint for stage '{stage}': the notebook lacks its declared params {missing}",
    )
    return {name: values[name] for name in names}


def dep_digest(path: Path) -> str:
    """A file's content hash; for a folder, a hash of (relative path, size, mtime_ns) of every
    file under it; 'missing' when the path does not exist."""
    digest = hashlib.blake2b(digest_size=16)
    if path.is_file():
        with path.open("rb") as stream:
            while block := stream.read(1 << 20):
                digest.update(block)
    elif path.is_dir():
        for folder, dirs, files in os.walk(path, followlinks=True):
            dirs.sort()
            for name in sorted(files):
                file = Path(folder) / name
                stat = file.stat()
                entry = (file.relative_to(path).as_posix(), stat.st_size, stat.st_mtime_ns)
                digest.update(repr(entry).encode())
    else:
        return "missing"
    return digest.hexdigest()


def fingerprint_inputs(stage: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """What a stage's results depend on: its declared param values and its deps' digests."""
    loaded = params_module.load()
    deps = params_module.stage_definition(stage).get("deps", [])
    resolved = [params_module.resolve(dep, loaded) for dep in deps]
    return {
        "stage": stage,
        "params": {
            name: value
            for name, value in declared_values(stage, values).items()
            if name not in SPEED_ONLY
        },
        "deps": {dep: dep_digest(paths.ROOT / dep) for dep in resolved},
    }


def fingerprint(inputs: Mapping[str, Any]) -> str:
    """A 16-hex-digit hash of `fingerprint_inputs` (params compared as sorted JSON)."""
    text = json.dumps(inputs, sort_keys=True, default=repr)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def open_stage(stage: str, values: Mapping[str, Any]) -> StageStore:
    """The checkpoint store of this run of `stage`; `values` holds the notebook's params
    (pass globals()). The folder records its inputs in fingerprint.json."""
    inputs = fingerprint_inputs(stage, values)
    folder = root(stage) / fingerprint(inputs)
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "fingerprint.json"
    if not manifest.exists():
        _write_atomic(manifest, json.dumps(inputs, indent=1, default=repr).encode())
    return StageStore(stage, folder)


def clear(stage: str) -> None:
    """Delete every checkpoint of `stage` (the runner calls this once the stage has succeeded)."""
    shutil.rmtree(root(stage), ignore_errors=True)


def _write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to a temporary file beside `path`, then rename it into place."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@dataclass
class StageStore:
    """Units of one stage run, one pickle per unit key, in `folder`.

    Keys are tuples whose first item names the loop (map and cache add it), compared by repr:
    use strings, ints, floats and tuples of them. `resumed` and `computed` count units per name.
    """

    stage: str
    folder: Path
    resumed: Counter = field(default_factory=Counter)
    computed: Counter = field(default_factory=Counter)

    def path(self, key: Hashable) -> Path:
        digest = hashlib.blake2b(repr(key).encode(), digest_size=16).hexdigest()
        return self.folder / f"{digest}.pkl"

    def _stored(self, key: Hashable) -> tuple[bool, Any]:
        """(True, the stored value of unit `key`), or (False, None) when none is readable."""
        path = self.path(key)
        if path.exists():
            try:
                stored_key, value = pickle.loads(path.read_bytes())
            except Exception as error:  # a unit from a crashed disk or an older library
                print(f"checkpoint {path.name} unreadable ({type(error).__name__}); recomputing")
            else:
                if stored_key == repr(key):
                    return True, value
        return False, None

    def _save(self, key: Hashable, value: Any) -> None:
        _write_atomic(
            self.path(key), pickle.dumps((repr(key), value), protocol=pickle.HIGHEST_PROTOCOL)
        )

    def get_or_compute(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The stored value of unit `key`, else compute() saved atomically and returned."""
        name = key[0] if isinstance(key, tuple) and key else key
        found, value = self._stored(key)
        if found:
            self.resumed[name] += 1
            return value
        value = compute()
        self._save(key, value)
        self.computed[name] += 1
        return value

    def map(
        self,
        name: str,
        items: Iterable[Any],
        compute: Callable[[Any], T],
        key: Callable[[Any], Hashable] = lambda item: item,
        workers: int | None = None,
        priority: Callable[[Any], float] | None = None,
    ) -> list[T]:
        """[compute(item) for item in items], each item one unit keyed (name, key(item)), with a
        progress bar (stderr: the executed notebook shows it).

        workers: None computes the missing units here, as this process is set up; an integer
        computes them as `privleak.pipeline.workers.completed` runs jobs (1: here, one thread;
        more: that many processes of one thread each, and `compute` must be importable), each
        unit saved as soon as it finishes; `priority` orders the processes' jobs (`completed`).
        """
        items = list(items)
        bar = tqdm(total=len(items), desc=f"{self.stage} {name}", mininterval=5)
        if workers is None:
            values = []
            for item in items:
                values.append(
                    self.get_or_compute((name, key(item)), lambda item=item: compute(item))
                )
                bar.update()
            bar.close()
            return values
        results: dict[int, T] = {}
        for index, item in enumerate(items):
            found, value = self._stored((name, key(item)))
            if found:
                results[index] = value
                self.resumed[name] += 1
                bar.update()
        missing = [index for index in range(len(items)) if index not in results]
        jobs = [items[index] for index in missing]
        for position, value in completed(compute, jobs, workers=workers, priority=priority):
            index = missing[position]
            self._save((name, key(items[index])), value)
            self.computed[name] += 1
            results[index] = value
            bar.update()
        bar.close()
        return [results[index] for index in range(len(items))]

    def cache(self, *scope: Hashable) -> Callable[[Hashable, Callable[[], T]], T]:
        """A unit cache for a batched library loop (`privleak.batching.UnitCache`): its keys are
        prefixed with `scope`, whose first item names the loop."""
        require(bool(scope), "StageStore.cache needs a scope name")
        return lambda key, compute: self.get_or_compute((*scope, key), compute)

    def summary(self) -> str:
        """One line: units resumed from the checkpoint out of all units, per loop name."""
        names = sorted(set(self.resumed) | set(self.computed), key=str)
        total = sum(self.resumed.values()) + sum(self.computed.values())
        parts = ", ".join(
            f"{name} {self.resumed[name]}/{self.resumed[name] + self.computed[name]}"
            for name in names
        )
        return (
            f"{self.stage}: resumed {sum(self.resumed.values())} of {total} units from "
            f"checkpoint {self.folder.relative_to(paths.ROOT)}" + (f" ({parts})" if parts else "")
        )
