"""MkDocs hook: add the generated pages to the site at build time (see `tools/docsgen`).

Registered in mkdocs.yml under `hooks:`. It runs the generator once per build, adds each page
(and each generated asset, such as the validator's committed plot) as a virtual file (a
generated path that also exists under docs/ is an error: generated pages are never
hand-copied), expands the generated sections of the nav, and replaces `<!-- interp:NAME ... -->`
markers in hand-written pages with generated tables.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))

from docsgen import expand_markers, generate, generated_assets, nav_entries  # noqa: E402
from mkdocs.exceptions import PluginError  # noqa: E402
from mkdocs.structure.files import File, Files  # noqa: E402

# Nav sections whose generated pages are appended after the section's index page.
_SECTIONS = {
    "reference/points/index.md": "points",
    "reference/architectures/index.md": "architectures",
}
_generated: dict[str, str] = {}


def _expand(items: list[Any]) -> list[Any]:
    expanded: list[Any] = []
    for item in items:
        if isinstance(item, dict):
            expanded.append({key: _expand_value(value) for key, value in item.items()})
        else:
            expanded.append(item)
    return expanded


def _expand_value(value: Any) -> Any:
    if isinstance(value, list):
        extra: list[Any] = []
        for entry in value:
            target = entry if isinstance(entry, str) else None
            if target in _SECTIONS:
                extra.extend(nav_entries(_SECTIONS[target]))
        return _expand(value) + extra
    return value


def on_config(config: Any) -> Any:
    _generated.clear()
    _generated.update(generate(ROOT))
    if config.get("nav"):
        config["nav"] = _expand(config["nav"])
    return config


def on_files(files: Files, config: Any) -> Files:
    generated: dict[str, Any] = dict(_generated)
    for src, path in generated_assets(ROOT).items():
        generated[src] = path
    for src, text in generated.items():
        if files.get_file_from_path(src) is not None:
            message = (
                f"docs/{src} exists, but that page is generated from the code at build time; "
                "delete the file (generated pages are never committed)"
            )
            raise PluginError(message)
        if isinstance(text, Path):  # a committed binary (the validator's plot), served as is
            files.append(File.generated(config, src, abs_src_path=str(text)))
        else:
            files.append(File.generated(config, src, content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    try:
        return expand_markers(markdown, page.file.src_uri)
    except ValueError as exc:
        raise PluginError(str(exc)) from exc
