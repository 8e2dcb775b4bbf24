"""Shared plumbing for the sizer's tests.

Nothing here may reach the network: the Hub is switched off for the whole session, so a model the
sizer cannot find locally fails fast instead of waiting on DNS. Tests that need a resource this
environment may lack (transformers, vLLM, Streamlit, Chromium) call `require(name)` from
`sizer_helpers` (interp_core.testing.resources): it skips when the resource is absent, unless
INTERP_REQUIRE names it (CI sets it), and then it fails.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
