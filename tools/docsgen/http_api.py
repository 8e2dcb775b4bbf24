"""The HTTP API reference page, generated from interp-serve's committed OpenAPI schema.

The schema (`packages/interp-serve/src/interp_serve/openapi.json`) is written from the routes by
`python -m interp_serve.openapi --write`, and interp-serve's suite fails when it drifts from
them; this page only renders it, so the docs build needs no FastAPI. Every route, its summary,
its request body's fields (with types, defaults and descriptions, nested objects expanded once)
and its answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docsgen.markup import code, esc, table

__all__ = ["HTTP_API", "SCHEMA", "http_api_page"]

HTTP_API = "reference/http-api.md"
SCHEMA = "packages/interp-serve/src/interp_serve/openapi.json"


def _ref_name(node: dict[str, Any]) -> str | None:
    ref = node.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _type(node: dict[str, Any]) -> str:
    name = _ref_name(node)
    if name:
        return name
    if "anyOf" in node:
        return " | ".join(_type(option) for option in node["anyOf"])
    kind = node.get("type")
    if kind == "array":
        return f"array of {_type(node.get('items', {}))}" if node.get("items") else "array"
    if kind == "object" and "additionalProperties" in node:
        return "object"
    return str(kind) if kind else "any"


def _fields(schema: dict[str, Any]) -> str:
    required = set(schema.get("required", []))
    rows = []
    for name, node in schema.get("properties", {}).items():
        default = node.get("default")
        if name in required:
            shown = "required"
        elif "default" in node:
            shown = json.dumps(default)
        else:
            shown = "empty"
        rows.append([code(name), esc(_type(node)), esc(shown), esc(node.get("description", ""))])
    return table(["field", "type", "default", "meaning"], rows)


def _referenced(schema: dict[str, Any]) -> list[str]:
    names: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            name = _ref_name(node)
            if name and name not in names:
                names.append(name)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema.get("properties", {}))
    return names


def http_api_page(root: Path) -> str:
    path = root / SCHEMA
    out = ["---\ntitle: HTTP API\n---\n\n# HTTP API\n\n"]
    if not path.is_file():
        out.append(f"<p>{code(SCHEMA)} is missing; interp-serve's suite writes it.</p>\n")
        return "".join(out)
    spec = json.loads(path.read_text())
    components = spec.get("components", {}).get("schemas", {})
    out.append(
        f"<p>Every route of <code>interp serve</code> (interp-serve {esc(spec['info']['version'])}"
        "), generated from its OpenAPI schema. Requests and answers are JSON, except "
        "<code>GET /v1/activations/{handle}</code> (safetensors bytes) and the SSE streams of "
        "<code>stream: true</code>. Every route but <code>/health</code> needs "
        "<code>Authorization: Bearer KEY</code> when the server holds keys. Unknown fields are "
        "refused. The serving guide shows them in use.</p>\n\n"
    )
    for route, operations in sorted(spec["paths"].items()):
        for method, operation in operations.items():
            out.append(f"## `{method.upper()} {route}`\n\n")
            out.append(f"<p>{esc(operation.get('summary', ''))}</p>\n\n")
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                name = _ref_name(body["schema"])
                schema = components.get(name or "", body["schema"])
                out.append(f"<p>Body: {code(name or 'object')}</p>\n\n")
                out.append(_fields(schema) + "\n\n")
                for nested in _referenced(schema):
                    if nested in components:
                        out.append(f"<p>{code(nested)}:</p>\n\n")
                        out.append(_fields(components[nested]) + "\n\n")
            rows = [
                [code(status), esc(answer.get("description", ""))]
                for status, answer in sorted(operation.get("responses", {}).items())
            ]
            out.append(table(["status", "answer"], rows) + "\n\n")
    return "".join(out)
