"""How the activations job's shards are encoded and named, per output layout.

The job (`interp_harvest.activations`) owns the packing, the forwards, the manifest and its
checksums, resume and the atomic writes; a layout owns only what differs between formats: a
shard's bytes, its file name, and the files the format keeps beside the shards.

- `safetensors`: `shard-NNNNN.safetensors`, one tensor per point plus `token_ids` and `source`.
- `saelens`: SAELens's cached-activations `datasets` folder (`interp_harvest.saelens_layout`):
  `data-NNNNN-of-MMMMM.arrow` with `dataset_info.json` and `state.json` rewritten after every
  shard, so the finished part of a killed run loads as a dataset.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from interp_core.facts import ModelFacts
from interp_harvest.plan import ActivationsPlan
from interp_harvest.shards import shard_name

__all__ = ["SAELENS_FORMAT", "SAFETENSORS_FORMAT", "Layout", "layout_for"]

SAFETENSORS_FORMAT = "interp-harvest/activations"
SAELENS_FORMAT = "interp-harvest/saelens"


class Layout:
    """The safetensors layout; `SaeLensLayout` overrides what SAELens's folder needs."""

    format = SAFETENSORS_FORMAT

    def __init__(self, plan: ActivationsPlan) -> None:
        self.plan = plan

    def describe(self) -> dict[str, Any]:
        """What the manifest records about the layout beyond the plan."""
        return {}

    def name(self, index: int) -> str:
        return shard_name(index)

    def encode(self, tensors: dict[str, Any], token_ids: Any, first_context: int) -> bytes:
        from safetensors.torch import save

        # One metadata key: safetensors writes the metadata map in hash order, so two keys could
        # come out in either order and a redone shard would differ from the first by its header.
        header = json.dumps({"format": self.format, "first_context": first_context}, sort_keys=True)
        return save({**tensors, "token_ids": token_ids}, metadata={"interp_harvest": header})

    def after_shards(self, folder: Path, shards: Sequence[dict[str, Any]]) -> None:
        """Bring the files beside the shards up to date with the listed `shards`."""

    def finish(self, folder: Path, shards: list[dict[str, Any]]) -> None:
        """The job ended with `shards` (fewer than planned when the corpus ran out)."""


class SaeLensLayout(Layout):
    format = SAELENS_FORMAT

    def __init__(self, plan: ActivationsPlan, facts: ModelFacts) -> None:
        from interp_harvest.saelens_layout import check_dtype, hook_columns

        super().__init__(plan)
        check_dtype(plan.dtype)
        self.columns = hook_columns(facts, plan.points, plan.row_shapes)

    def describe(self) -> dict[str, Any]:
        return {"columns": dict(self.columns)}

    def name(self, index: int) -> str:
        from interp_harvest.saelens_layout import data_file_name

        return data_file_name(index, self.plan.shards)

    def encode(self, tensors: dict[str, Any], token_ids: Any, first_context: int) -> bytes:
        from interp_harvest.saelens_layout import arrow_shard

        # SAELens's rows carry no source column; the sources are in the safetensors layout only.
        tensors = {k: v for k, v in tensors.items() if k != "source"}
        return arrow_shard(self.columns, self.plan.row_shapes, self.plan.dtype, tensors, token_ids)

    def after_shards(self, folder: Path, shards: Sequence[dict[str, Any]]) -> None:
        from interp_harvest.saelens_layout import write_dataset_files

        write_dataset_files(
            folder,
            self.columns,
            self.plan.row_shapes,
            self.plan.dtype,
            self.plan.context_size,
            shards,
        )

    def finish(self, folder: Path, shards: list[dict[str, Any]]) -> None:
        from interp_harvest.saelens_layout import data_file_name

        # A corpus that ran out early leaves fewer files than the names count: renamed, so
        # `-of-MMMMM` is the true count as `datasets` writes it. A kill between renames leaves
        # a listed file missing, which a resume finds and redoes.
        for index, entry in enumerate(shards):
            name = data_file_name(index, len(shards))
            if entry["file"] != name:
                (folder / entry["file"]).replace(folder / name)
                entry["file"] = name
        self.after_shards(folder, shards)


def layout_for(name: str, plan: ActivationsPlan, facts: ModelFacts) -> Layout:
    return SaeLensLayout(plan, facts) if name == "saelens" else Layout(plan)
