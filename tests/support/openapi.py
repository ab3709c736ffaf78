"""The served OpenAPI schema (drf-spectacular, OpenAPI 3.0) as JSON Schema, strict: what a real
answer of an endpoint is validated against. Strict means every object declares all its fields
(``additionalProperties: false`` unless it declares a map), so an answer field the schema
does not know fails, and ``required`` holds as the schema says."""

from __future__ import annotations

import copy
import re
from typing import Any

import jsonschema

REF = re.compile(r"^#/components/schemas/(?P<name>.+)$")


def _convert(node: Any) -> Any:
    """OpenAPI 3.0's dialect to JSON Schema: ``nullable`` becomes a null alternative, refs
    point at ``$defs``, objects are closed."""
    if isinstance(node, list):
        return [_convert(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _convert(v) for k, v in node.items()
           if k not in ("nullable", "discriminator", "readOnly", "writeOnly", "example")}
    if "$ref" in out:
        out["$ref"] = "#/$defs/" + REF.match(out["$ref"])["name"]
    if out.get("type") == "object" or "properties" in out:
        out.setdefault("additionalProperties", False)
    if node.get("nullable"):
        out = {"anyOf": [out, {"type": "null"}]}
    return out


class Schema:
    """The served schema, and a validator for the answers of each operation."""

    def __init__(self, served: dict[str, Any]) -> None:
        self.served = served
        self.defs = {name: _convert(s) for name, s in served["components"]["schemas"].items()}

    def component(self, name: str) -> dict[str, Any]:
        return self.served["components"]["schemas"][name]

    def response(self, path: str, method: str, status: int) -> dict[str, Any]:
        """The JSON Schema of ``method path``'s answer with ``status``; KeyError when the
        schema declares none (an undeclared answer is a failure too)."""
        responses = self.served["paths"][path][method.lower()]["responses"]
        content = responses[str(status)]["content"]["application/json"]["schema"]
        return {**_convert(copy.deepcopy(content)), "$defs": self.defs}

    def validate(self, path: str, method: str, status: int, body: Any) -> None:
        schema = self.response(path, method, status)
        jsonschema.Draft202012Validator(schema).validate(body)
