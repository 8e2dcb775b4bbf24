"""The generated reference pages: the points cheat sheet, one page per point and per family, the
backend support matrix, the name translations and the compatibility table.

Every sentence that states a fact about a point, a model or a backend comes from interp-core
(the registry, `ModelFacts`, the backends' `supports`, `all_known_issues`); the prose here only
frames it. Pages are Markdown with raw HTML tables (see `docsgen.markup`). The builders live in
`point_pages`, `architecture_pages` and `matrix_pages`, on the shared parts in `page_parts`;
`PAGE_BUILDERS` lists the pages with a fixed path.
"""

from __future__ import annotations

from collections.abc import Callable

from docsgen.architecture_pages import architecture_page, architectures_index
from docsgen.matrix_pages import (
    compatibility_page,
    support_matrix_page,
    translation_page,
    translation_table,
)
from docsgen.page_parts import (
    ARCH_DIR,
    COMPAT,
    ENGINE_TITLES,
    MATRIX,
    POINTS_DIR,
    TRANSLATION,
    BackendColumn,
    arch_src,
    backend_columns,
    first_sentence,
    point_src,
    trait_rows,
    trait_tags,
)
from docsgen.point_pages import point_page, points_index

__all__ = [
    "ARCH_DIR",
    "ENGINE_TITLES",
    "PAGE_BUILDERS",
    "POINTS_DIR",
    "BackendColumn",
    "arch_src",
    "architecture_page",
    "architectures_index",
    "backend_columns",
    "compatibility_page",
    "first_sentence",
    "point_page",
    "point_src",
    "points_index",
    "support_matrix_page",
    "trait_rows",
    "trait_tags",
    "translation_page",
    "translation_table",
]

PAGE_BUILDERS: dict[str, Callable[[], str]] = {
    f"{POINTS_DIR}/index.md": points_index,
    f"{ARCH_DIR}/index.md": architectures_index,
    MATRIX: support_matrix_page,
    TRANSLATION: translation_page,
    COMPAT: compatibility_page,
}
