"""The SAE guide's format -> address table, from `interp_sae.hooks` (the mapping the loader uses).

Each row: the format, the hook name as that format writes it (`{L}` for the layer) and the
address it loads at, linked to the point's page. Only `interp_sae.hooks` is imported, which
needs the core alone, so the docs build stays free of torch.
"""

from __future__ import annotations

from docsgen.markup import code, link, table
from docsgen.page_parts import point_src

__all__ = ["sae_hook_table"]


def sae_hook_table(src: str) -> str:
    from interp_sae.hooks import hook_table

    rows = []
    for row in hook_table():
        point = row.address.partition(".")[0]
        rows.append(
            [row.format, code(row.hook), link(src, point_src(point), row.address, is_code=True)]
        )
    return table(["format", "hook name", "address"], rows)
