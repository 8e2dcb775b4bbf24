"""`import interpoint` must expose the same public API as the core, object for object."""

from __future__ import annotations

import interp_core
import interpoint


def test_every_core_name_is_re_exported_as_the_same_object() -> None:
    for name in interp_core.__all__:
        if name == "__version__":
            continue
        assert getattr(interpoint, name) is getattr(interp_core, name), name


def test_the_umbrella_has_its_own_version() -> None:
    from interpoint.__about__ import __version__

    assert interpoint.__version__ == __version__


def test_the_readme_example_names_exist() -> None:
    from interpoint import Address, load_model, run_with_cache  # noqa: F401

    assert str(Address("resid_post", 10)) == "resid_post.10"
