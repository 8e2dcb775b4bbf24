"""How does a backend prove it honours the interp-core protocol?

The conformance kit. `Conformance` is the test suite a backend subclasses; the pytest plugin
`interp_core.testing.plugin` provides its fixtures (see that module for the three-line setup);
`checks` holds the individual checks, callable from any runner; `compare` compares tensors of any
library through `.shape` and `.tolist()`. `hostile` and `hostile_strategies` are the
hostile-input harness: hypothesis-drawn mixes of valid and malformed requests, and the checks a
backend's suite runs after each mix; `cli` checks that a command-line tool ends quietly when its
reader is gone; `engines` holds a suite's shared engine for a module, `ray_cluster` a two-node
Ray cluster on this machine (psutil imported in its functions), `purity` imports a package where
undeclared libraries cannot be found, and `published_shapes` holds the published config shapes
the facts and sizer tests read (none of these is imported here).

This package imports nothing outside the standard library and interp-core; only the plugin
module imports pytest, and only the functions of `hostile_strategies` import hypothesis.
"""

from __future__ import annotations

from interp_core.testing.checks import CHECKS, DEFAULT_PROMPT, run_checks
from interp_core.testing.compare import assert_close, assert_equal, flatten, shape_of, to_nested
from interp_core.testing.conformance import Conformance, ReadoutConformance

__all__ = [
    "CHECKS",
    "DEFAULT_PROMPT",
    "Conformance",
    "ReadoutConformance",
    "assert_close",
    "assert_equal",
    "flatten",
    "run_checks",
    "shape_of",
    "to_nested",
]
