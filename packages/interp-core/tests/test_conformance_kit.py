"""The conformance kit passes on a correct backend and fails, specifically, on broken ones.

Three layers: the kit run through its own pytest plugin on the pure-Python fake (as a backend
package would run it); every check called directly on a model with one deliberate flaw; and
pytester sessions proving the plugin's wiring (families, factory, refusals of a misconfigured
suite) and that a flawed backend really turns the suite red.
"""

from __future__ import annotations

import math
import unittest
from pathlib import Path
from typing import Any

import pytest
from fake_backend import FLAWS, FakeModel

from interp_core.testing import (
    CHECKS,
    Conformance,
    assert_close,
    assert_equal,
    flatten,
    run_checks,
    shape_of,
    to_nested,
)
from interp_core.testing import checks as kit

pytest_plugins = ["pytester", "interp_core.testing.plugin"]

HERE = Path(__file__).parent


# --- the kit on a correct backend, through the plugin -------------------------------------------
@pytest.fixture(scope="session")
def interp_model_factory() -> Any:
    return FakeModel


class TestFakeBackendConformance(Conformance):
    interp_families = ("tiny", "wide")


def test_every_check_passes_on_a_correct_model() -> None:
    for family in ("tiny", "wide"):
        assert run_checks(FakeModel(family)) == dict.fromkeys(CHECKS)


# --- each flaw is caught by the check meant for it ----------------------------------------------
EXPECTED = {
    "shape": ("shapes", "embeddings has shape (10, 6); the registry says (1, 10, 6)"),
    "logits": ("capture_leaves_logits_unchanged", "lm_head captured with"),
    "zero_steer": ("zero_steering_is_identity", "under a zero add at resid_post.1"),
    "nondeterministic": ("capture_is_deterministic", "on a repeated capture"),
    "silent_absent": ("refusals", "returned a tensor, but the model refuses the point"),
    "mute_refusal": ("refusals", "does not name the point"),
    "ignores_context": ("steer_context_matches_explicit", "inside steer() vs steering="),
    "wrong_orthogonal": ("steering_matches_reference", "op='orthogonal'"),
    "stream_text": ("generation", "generate_stream texts join to"),
    "own_refusals": (
        "argument_refusals",
        "generate(temperature=-1.0) raised CapabilityUnsupported",
    ),
}


def test_every_flaw_has_an_expectation() -> None:
    assert set(EXPECTED) == set(FLAWS)


@pytest.mark.parametrize("flaw", sorted(EXPECTED))
def test_the_check_for_each_flaw_fails_with_a_precise_message(flaw: str) -> None:
    check_name, fragment = EXPECTED[flaw]
    model = FakeModel("tiny", flaw=flaw)
    with pytest.raises(AssertionError) as excinfo:
        CHECKS[check_name](model)
    text = str(excinfo.value)
    assert fragment in text
    assert text.startswith(f"{CHECKS[check_name].__name__} failed on the fake model tiny:")


@pytest.mark.parametrize("flaw", sorted(EXPECTED))
def test_a_flawed_model_never_passes_the_whole_kit(flaw: str) -> None:
    results = run_checks(FakeModel("tiny", flaw=flaw))
    failed = {name for name, outcome in results.items() if outcome}
    assert EXPECTED[flaw][0] in failed


def test_a_model_missing_protocol_members_fails_the_surface_check() -> None:
    class Bare:
        backend_name = "bare"
        model_id = "bare"

    with pytest.raises(AssertionError, match="missing protocol members: facts, n_layers"):
        kit.check_protocol_surface(Bare())


def test_sync_work_methods_fail_the_surface_check() -> None:
    class SyncCapture(FakeModel):
        def capture(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return None

    with pytest.raises(AssertionError, match="capture must be an async method"):
        kit.check_protocol_surface(SyncCapture())


def test_a_model_claiming_points_its_architecture_lacks_fails() -> None:
    from interp_core.points import get_point

    class Boastful(FakeModel):
        def points(self) -> Any:
            return (*super().points(), get_point("q_norm_in"))

    with pytest.raises(AssertionError, match="points\\(\\) lists q_norm_in"):
        kit.check_protocol_surface(Boastful())


def test_a_model_without_writable_points_skips_the_steering_checks() -> None:
    class ReadOnly(FakeModel):
        def supports(self, point: Any) -> Any:
            from interp_core.address import to_address
            from interp_core.results import Support

            if to_address(point).name in ("lm_head", "final_norm", "embeddings"):
                return super().supports(point)
            return Support.no("read-only fake")

    with pytest.raises(unittest.SkipTest, match="no writable vector point at layer 1"):
        kit.check_zero_steering_is_identity(ReadOnly())


# --- tensor comparison helpers ------------------------------------------------------------------
class _Tensorish:
    def __init__(self, data: Any, shape: tuple[int, ...]) -> None:
        self._data, self.shape = data, shape

    def tolist(self) -> Any:
        return self._data


def test_shape_and_values_through_duck_typing() -> None:
    tensor = _Tensorish([[1, 2], [3, 4]], (2, 2))
    assert shape_of(tensor) == (2, 2)
    assert shape_of([[1.0, 2.0, 3.0]]) == (1, 3)
    assert shape_of(5.0) == ()
    assert to_nested((1, (2, 3))) == [1, [2, 3]]
    assert flatten(tensor) == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="ragged"):
        shape_of([[1.0], [1.0, 2.0]])


def test_assert_close_is_exact_by_default_and_reports_the_first_mismatch() -> None:
    assert_equal([[1.0, math.nan]], [[1.0, math.nan]])
    assert_close([1.0, math.inf], [1.0, math.inf])
    with pytest.raises(AssertionError) as excinfo:
        assert_equal([1.0, 2.0, 3.0], [1.0, 2.5, 3.5], what="resid_post.1")
    text = str(excinfo.value)
    assert text.startswith("resid_post.1: 2 of 3 elements differ")
    assert "first at flat index 1: 2.0 vs expected 2.5" in text
    assert_close([1.0, 2.0], [1.0, 2.0 + 1e-9], atol=1e-8)
    assert_close([100.0], [100.001], rtol=1e-4)
    with pytest.raises(AssertionError, match="shape \\(2,\\) where \\(1, 2\\) was expected"):
        assert_close([1.0, 2.0], [[1.0, 2.0]])
    with pytest.raises(AssertionError):
        assert_close([math.nan], [1.0], atol=1.0)


# --- the plugin, in its own pytest sessions -----------------------------------------------------
CONFTEST = """
import json
from pathlib import Path

import pytest
from fake_backend import FakeModel

pytest_plugins = ["interp_core.testing.plugin"]
BUILT = []

@pytest.fixture(scope="session")
def interp_model_factory():
    def factory(family):
        model = FakeModel(family, flaw={flaw!r})
        BUILT.append(model)
        return model
    return factory

def pytest_unconfigure(config):
    record = [{{"family": m.model_id, "warmed": m.warmed, "shut_down": m.shut_down}} for m in BUILT]
    Path("built.json").write_text(json.dumps(record))
"""

SUITE = """
from interp_core.testing import Conformance

class TestMine(Conformance):
    interp_families = ("tiny", "wide")
"""

N_CHECKS = len([name for name in vars(Conformance) if name.startswith("test_")])


def _session(pytester: pytest.Pytester, flaw: str | None, suite: str = SUITE) -> Any:
    pytester.syspathinsert(HERE)
    pytester.makeconftest(CONFTEST.format(flaw=flaw))
    pytester.makepyfile(test_mine=suite)
    return pytester.runpytest("-p", "no:cacheprovider")


def test_plugin_runs_the_suite_per_family_and_manages_models(pytester: pytest.Pytester) -> None:
    import json

    result = _session(pytester, None)
    result.assert_outcomes(passed=2 * N_CHECKS)
    result.stdout.no_fnmatch_line("*FAILED*")
    built = json.loads((pytester.path / "built.json").read_text())
    # One model per family for the whole session, warmed up first and shut down at the end.
    assert sorted(m["family"] for m in built) == ["tiny", "wide"]
    assert all(m["warmed"] and m["shut_down"] for m in built)


def test_a_flawed_backend_turns_the_suite_red(pytester: pytest.Pytester) -> None:
    result = _session(pytester, "ignores_context")
    result.assert_outcomes(passed=2 * (N_CHECKS - 1), failed=2)
    result.stdout.fnmatch_lines(
        ["*test_steer_context_matches_explicit_steering[[]tiny[]]*"], consecutive=False
    )


def test_families_may_come_from_the_ini_file(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ninterp_families = wide\n")
    suite = (
        "from interp_core.testing import Conformance\n\nclass TestMine(Conformance):\n    pass\n"
    )
    result = _session(pytester, None, suite)
    result.assert_outcomes(passed=N_CHECKS)


def test_a_suite_without_families_is_a_usage_error_not_a_silent_pass(
    pytester: pytest.Pytester,
) -> None:
    suite = (
        "from interp_core.testing import Conformance\n\nclass TestMine(Conformance):\n    pass\n"
    )
    result = _session(pytester, None, suite)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error stops the session
    result.stdout.fnmatch_lines(
        ["*TestMine runs the interp conformance kit but names no model families*"]
    )


def test_a_missing_factory_fails_with_instructions(pytester: pytest.Pytester) -> None:
    pytester.syspathinsert(HERE)
    pytester.makeconftest('pytest_plugins = ["interp_core.testing.plugin"]\n')
    pytester.makepyfile(test_mine=SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "protocol_surface")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*needs an `interp_model_factory` fixture*"])
