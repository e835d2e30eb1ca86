"""The family group: the model family train_family trains, one folder per size."""

from typing import Annotated, Self

from pydantic import model_validator

from privleak.pipeline.schema.base import (
    COUNT,
    INDEX,
    NAME,
    POSITIVE,
    Strict,
    at_least,
    fail,
)

FAMILY_DIR = "data/family/"  # train_family's output: one folder per size


class Size(Strict):
    hidden: Annotated[int, COUNT]
    layers: Annotated[int, COUNT]
    heads: Annotated[int, COUNT]
    intermediate: Annotated[int, COUNT]

    @model_validator(mode="after")
    def _head_dim(self) -> Self:
        # RoPE rotates pairs of dimensions: each head needs an even width.
        if self.hidden % (2 * self.heads):
            raise fail(
                f"must divide hidden ({self.hidden}) into heads of even width",
                "heads",
                value=self.heads,
            )
        return self


class Mix(Strict):  # extra synthetic articles per generator (train_family's MIX_FIELDS)
    cnn_dm: Annotated[int, INDEX] = 0
    pubmedqa: Annotated[int, INDEX] = 0


class Family(Strict):
    vocab_size: Annotated[int, at_least(300)]  # 256 bytes + specials
    block_size: Annotated[int, at_least(2)]
    window: Annotated[int, COUNT]
    sizes: dict[str, Size]
    epochs: Annotated[int, COUNT]
    batch_size: Annotated[int, COUNT]
    lr: Annotated[float, POSITIVE]
    warmup_steps: Annotated[int, INDEX]
    mix: Mix
    mix_seed_offset: Annotated[int, INDEX]
    # training runs: train_family trains seed, train_family_seeds seed + 1 .. seed + seeds - 1
    seeds: Annotated[int, COUNT] = 1
    workers: Annotated[int, COUNT] = 1  # members trained at once, one process and thread each

    @model_validator(mode="after")
    def _fits(self) -> Self:
        if self.window < self.block_size:
            raise fail(f"must be >= block_size ({self.block_size})", "window", value=self.window)
        if not self.sizes:
            raise fail("must list at least one size", "sizes", value={})
        for name in self.sizes:
            if not NAME.fullmatch(name):
                raise fail("unusable as a folder name", f"sizes.{name}")
        return self
