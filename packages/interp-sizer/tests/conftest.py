"""Shared plumbing for the sizer's tests.

Nothing here may reach the network: the Hub is switched off for the whole session, so a model the
sizer cannot find locally fails fast instead of waiting on DNS. Tests that need a resource this
environment may lack (transformers, vLLM, Streamlit, Chromium) call `require(name)` from
`sizer_helpers` (interp_core.testing.resources): it skips when the resource is absent, unless
INTERP_REQUIRE names it (CI sets it), and then it fails.
"""

from __future__ import annotations

import os

from interp_core.testing.suite_imports import helpers_importable

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

helpers_importable(__file__)
