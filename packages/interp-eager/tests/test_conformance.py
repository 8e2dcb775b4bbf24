"""The interp-core conformance kit, run against the eager backend on the tiny families.

The kit (`interp_core.testing.Conformance`) is what any backend runs to prove it honours the
protocol and the point definitions; `interp_model_factory` in conftest.py supplies the models,
the same session-wide ones the other eager tests use.

The plugin is enabled here rather than in conftest.py: pytest refuses `pytest_plugins` in a
conftest below the rootdir, and a plain `pytest` from the repository root collects this folder.
"""

from __future__ import annotations

from interp_core.testing import Conformance, ReadoutConformance
from interp_testmodels.families import FAMILY_NAMES

pytest_plugins = ["interp_core.testing.plugin"]


class TestEagerConformance(Conformance):
    interp_families = FAMILY_NAMES


class TestEagerReadoutConformance(ReadoutConformance):
    interp_families = FAMILY_NAMES
    # DeepSeek-V4's compressed attention: a forward over prompt + generation changes the logits
    # of prompt positions 14 on (measured: the prompt alone reads as the stream does), so one
    # forward over the whole sequence is no reference for the stream.
    decode_differs_from_prefill = frozenset({"deepseek_v4"})
