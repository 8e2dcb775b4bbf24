"""Which tests does a backend package inherit to prove it honours the protocol?

`Conformance` is a test base class. A backend's test module subclasses it (the subclass name must
start with `Test` so pytest collects it) and the pytest plugin `interp_core.testing.plugin`
supplies its `interp_model` fixture, one model per family, built by the backend's own
`interp_model_factory` fixture. Every test delegates to a `check_*` function in
`interp_core.testing.checks`, passing the tolerances set on the subclass.
"""

from __future__ import annotations

from typing import Any, ClassVar

from interp_core.testing import checks, lens_generation_checks, readout_checks

__all__ = ["Conformance", "ReadoutConformance"]


class Conformance:
    """The conformance suite; subclass it as `Test...` in a backend's tests.

    Class attributes a subclass may set:

    * `interp_families` — model families to run on (or the `interp_families` ini option).
    * `prompt` — the text every check tokenizes.
    * `atol`, `rtol` — tolerance of the identities (logits unchanged by capture, zero steering,
      determinism, steer() vs steering=); exact by default.
    * `steer_atol`, `steer_rtol` — tolerance of steered activations against the float64
      reference arithmetic.
    * `captures` — False for a generate-only backend: every capture check then asserts the
      refusal instead (`check_captures_refused`), and generation is checked without capture.
    """

    interp_families: ClassVar[tuple[str, ...]] = ()
    prompt: ClassVar[str] = checks.DEFAULT_PROMPT
    atol: ClassVar[float] = 0.0
    rtol: ClassVar[float] = 0.0
    steer_atol: ClassVar[float] = 1e-4
    steer_rtol: ClassVar[float] = 1e-4
    captures: ClassVar[bool] = True

    def _refused(self, model: Any) -> bool:
        """On a generate-only backend, assert the refusal instead; True when that was done."""
        if self.captures:
            return False
        checks.check_captures_refused(model, prompt=self.prompt)
        return True

    def _exact(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "atol": self.atol, "rtol": self.rtol}

    def test_protocol_surface(self, interp_model: Any) -> None:
        checks.check_protocol_surface(interp_model, prompt=self.prompt)

    def test_shapes_match_the_registry(self, interp_model: Any) -> None:
        if self._refused(interp_model):
            return
        checks.check_shapes(interp_model, prompt=self.prompt)

    def test_absent_points_are_refused_with_a_reason(self, interp_model: Any) -> None:
        if self._refused(interp_model):
            return
        checks.check_refusals(interp_model, prompt=self.prompt)

    def test_capture_leaves_logits_unchanged(self, interp_model: Any) -> None:
        if self._refused(interp_model):
            return
        checks.check_capture_leaves_logits_unchanged(interp_model, **self._exact())

    def test_zero_steering_is_the_identity(self, interp_model: Any) -> None:
        if self._refused(interp_model):
            return
        checks.check_zero_steering_is_identity(interp_model, **self._exact())

    def test_steering_matches_the_reference_arithmetic(self, interp_model: Any) -> None:
        if self._refused(interp_model):
            return
        checks.check_steering_matches_reference(
            interp_model, prompt=self.prompt, atol=self.steer_atol, rtol=self.steer_rtol
        )

    def test_steer_context_matches_explicit_steering(self, interp_model: Any) -> None:
        if self._refused(interp_model):
            return
        checks.check_steer_context_matches_explicit(interp_model, **self._exact())

    def test_capture_is_deterministic(self, interp_model: Any) -> None:
        if self._refused(interp_model):
            return
        checks.check_capture_is_deterministic(interp_model, **self._exact())

    def test_generation_paths_agree(self, interp_model: Any) -> None:
        checks.check_generation(interp_model, prompt=self.prompt, capture=self.captures)

    def test_logit_lens(self, interp_model: Any) -> None:
        if self._refused(interp_model):
            return
        checks.check_logit_lens(interp_model, prompt=self.prompt)

    def test_bad_arguments_are_refused_as_the_core_words_them(self, interp_model: Any) -> None:
        checks.check_argument_refusals(interp_model, prompt=self.prompt, captures=self.captures)


class ReadoutConformance:
    """The read-outs beyond capture, each against its formula by hand
    (`interp_core.testing.readout_checks`): `unembed_rows`, `embed_rows`, `decode_residuals`
    (logits and top-k), `project`, a fitted lens (`set_lens_jacobians` + `LensSpec`) and the
    lens over a generation (`generate_with_lens`).
    Subclass it next to `Conformance` (same fixtures): `class TestMine(Conformance,
    ReadoutConformance)`. `readout_rtol` loosens the comparisons for a backend in a low dtype."""

    prompt: ClassVar[str] = checks.DEFAULT_PROMPT
    readout_rtol: ClassVar[float] = 1e-4
    # model_types whose forward over a longer sequence changes earlier positions' outputs: the
    # lens over their generated tokens has no one-forward reference and is held to its structure.
    decode_differs_from_prefill: ClassVar[frozenset[str]] = frozenset()

    def test_unembed_rows_are_the_unembedding(self, interp_model: Any) -> None:
        readout_checks.check_unembed_rows(interp_model, prompt=self.prompt, rtol=self.readout_rtol)

    def test_embed_rows_are_the_embedding(self, interp_model: Any) -> None:
        readout_checks.check_embed_rows(interp_model, prompt=self.prompt)

    def test_decode_residuals_is_the_models_readout(self, interp_model: Any) -> None:
        readout_checks.check_decode_residuals(
            interp_model, prompt=self.prompt, rtol=self.readout_rtol
        )

    def test_project_is_the_dot_product(self, interp_model: Any) -> None:
        readout_checks.check_project(interp_model, prompt=self.prompt, rtol=self.readout_rtol)

    def test_fitted_lens_decodes_j_bar_h(self, interp_model: Any) -> None:
        readout_checks.check_fitted_lens(interp_model, prompt=self.prompt)

    def test_lens_over_a_generation_is_the_prompt_lens(self, interp_model: Any) -> None:
        exact = interp_model.facts.model_type not in self.decode_differs_from_prefill
        lens_generation_checks.check_generate_with_lens(
            interp_model, prompt=self.prompt, decode_equals_prefill=exact
        )
