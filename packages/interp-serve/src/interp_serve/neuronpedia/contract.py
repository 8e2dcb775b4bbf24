"""Neuronpedia's inference-server contract, and a small validator for the JSON Schema it uses.

`contract.json` is that server's `openapi.json`, unchanged (its source commit is in this
folder's README). Requests are checked against its request schemas before any work is done,
and the tests check every answer against its response schemas, so the contract lives in one
file and nothing restates it by hand. The validator covers the part of JSON Schema the file
uses (type, properties, required, items, anyOf, enum, $ref, minimum, maximum, minItems, maxItems,
additionalProperties), with the standard library only.
"""

from __future__ import annotations

import functools
import json
import math
from importlib import resources
from typing import Any

__all__ = ["Problem", "apply_defaults", "contract", "problems", "request_schema", "schema"]

# One problem with an instance: where (a path of keys and indexes), what, and its type word.
Problem = tuple[tuple[Any, ...], str, str]


@functools.cache
def contract() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("contract.json").read_text(encoding="utf-8")
    return json.loads(text)


def schema(name: str) -> dict[str, Any]:
    """The component schema `name` (e.g. "ActivationSingleResponse")."""
    return contract()["components"]["schemas"][name]


def request_schema(path: str) -> dict[str, Any] | None:
    """The request body schema of `POST path` (e.g. "/v1/tokenize"), resolved; None if none."""
    operation = contract()["paths"].get(path, {}).get("post", {})
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    found = body.get("schema")
    return _resolve(found) if found else None


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    return schema(ref.rsplit("/", 1)[-1])


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return math.isfinite(value)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    message = f"the contract uses a type this validator lacks: {kind}"
    raise AssertionError(message)


def problems(value: Any, node: dict[str, Any], where: tuple[Any, ...] = ()) -> list[Problem]:
    """Everything about `value` that `node` (a schema of the contract) does not allow."""
    node = _resolve(node)
    if "anyOf" in node:
        options = [problems(value, option, where) for option in node["anyOf"]]
        if any(not found for found in options):
            return []
        # The closest option (fewest problems) says best what was meant.
        return min(options, key=len)
    kind = node.get("type")
    if kind is not None and not _type_ok(value, kind):
        return [(where, f"should be {kind}, got {type(value).__name__}", f"{kind}_type")]
    found: list[Problem] = []
    if "enum" in node and value not in node["enum"]:
        allowed = ", ".join(repr(v) for v in node["enum"])
        found.append((where, f"should be one of {allowed}", "enum"))
    if "minimum" in node and isinstance(value, (int, float)) and value < node["minimum"]:
        found.append((where, f"should be >= {node['minimum']}", "greater_than_equal"))
    if "maximum" in node and isinstance(value, (int, float)) and value > node["maximum"]:
        found.append((where, f"should be <= {node['maximum']}", "less_than_equal"))
    if isinstance(value, list):
        if "minItems" in node and len(value) < node["minItems"]:
            found.append((where, f"should have at least {node['minItems']} item(s)", "too_short"))
        if "maxItems" in node and len(value) > node["maxItems"]:
            found.append((where, f"should have at most {node['maxItems']} item(s)", "too_long"))
        if "items" in node:
            for index, item in enumerate(value):
                found += problems(item, node["items"], (*where, index))
    if isinstance(value, dict):
        properties = node.get("properties", {})
        for name in node.get("required", ()):
            if name not in value:
                found.append(((*where, name), "Field required", "missing"))
        extra = node.get("additionalProperties")
        for name, item in value.items():
            if name in properties:
                found += problems(item, properties[name], (*where, name))
            elif isinstance(extra, dict):
                found += problems(item, extra, (*where, name))
    return found


def apply_defaults(value: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """`value` with the schema's defaults filled in where a field is absent (top level)."""
    node = _resolve(node)
    filled = dict(value)
    for name, prop in node.get("properties", {}).items():
        if name not in filled and "default" in prop:
            filled[name] = prop["default"]
    return filled
