"""Which architecture families does the site describe, and from which facts?

Two sources, both already in the repository, so nothing here restates a fact:

- the real checkpoint configs bundled with interp-core (`interp_core.known_models`), grouped by
  the text model's `model_type`;
- the tiny test configs of the test-model factory (`interp_testmodels.configs`), one per family
  the engines are tested on. Importing that module costs nothing: it holds configs as plain
  mappings and imports transformers only when a config object is asked for.

A family is named as the factory names it (its `model_type`, except `gemma3` for Gemma-3's text
model). Its facts come from a real checkpoint when one is bundled (the smallest, which keeps
layer lists short), else from the tiny test config, and the page says which.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from interp_core.facts import ModelFacts
from interp_core.known_models import facts_for, known_model_ids

__all__ = ["Checkpoint", "Family", "families", "family_for_model_type"]


@dataclass(frozen=True)
class Checkpoint:
    """One bundled real config: its repo id and the facts read from it."""

    model_id: str
    facts: ModelFacts


@dataclass(frozen=True)
class Family:
    """An architecture family as the site shows it."""

    key: str  # the page name: the factory's family name, else the model_type
    model_type: str
    checkpoints: tuple[Checkpoint, ...] = ()
    test_facts: ModelFacts | None = None  # the tiny factory config, when the family has one
    test_notes: str = ""  # what the tiny config exercises, in the factory's words
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def primary(self) -> Checkpoint | None:
        """The bundled checkpoint whose facts the page draws (the smallest), if any."""
        if not self.checkpoints:
            return None
        return min(self.checkpoints, key=lambda c: (c.facts.n_layers * c.facts.d_model, c.model_id))

    @property
    def facts(self) -> ModelFacts:
        primary = self.primary
        if primary is not None:
            return primary.facts
        assert self.test_facts is not None  # a family always has one source or the other
        return self.test_facts

    @property
    def facts_source(self) -> str:
        primary = self.primary
        return primary.model_id if primary is not None else "tiny test config"

    @property
    def architectures(self) -> tuple[str, ...]:
        """The HF classes of the bundled checkpoints (empty when only a test config exists)."""
        return tuple(sorted({c.facts.architecture for c in self.checkpoints}))


def _factory() -> dict[str, tuple[str, str, ModelFacts]]:
    """family name -> (model_type, notes, facts) from the test-model factory's tiny configs."""
    from interp_testmodels.configs import FAMILIES, FAMILY_NAMES

    found: dict[str, tuple[str, str, ModelFacts]] = {}
    for name in FAMILY_NAMES:
        spec = FAMILIES[name]
        facts = ModelFacts.from_config({"model_type": spec.model_type, **spec.config})
        found[name] = (spec.model_type, spec.notes, facts)
    return found


@cache
def families() -> tuple[Family, ...]:
    """Every family, in the factory's order, then bundled-only families by name."""
    factory = _factory()
    key_of_type = {model_type: name for name, (model_type, _, _) in factory.items()}
    bundled: dict[str, list[Checkpoint]] = {}
    for model_id in known_model_ids():
        facts = facts_for(model_id)
        key = key_of_type.get(facts.model_type, facts.model_type)
        bundled.setdefault(key, []).append(Checkpoint(model_id, facts))
    result: list[Family] = []
    for name, (model_type, notes, facts) in factory.items():
        result.append(
            Family(
                key=name,
                model_type=model_type,
                checkpoints=tuple(bundled.pop(name, ())),
                test_facts=facts,
                test_notes=notes,
            )
        )
    for key in sorted(bundled):
        checkpoints = tuple(bundled[key])
        result.append(Family(key, checkpoints[0].facts.model_type, checkpoints))
    return tuple(result)


def family_for_model_type(model_type: str) -> Family | None:
    """The family a config's `model_type` belongs to, if the site has a page for it."""
    for family in families():
        types = {family.model_type, *(c.facts.model_type for c in family.checkpoints)}
        if model_type in types:
            return family
    return None
