"""The offline LLM's generic answers, for requests no stage answerer reads.

With a schema: a schema-valid JSON instance (strings are short spans of the prompt; id-like
fields cite ids that occur in the prompt); without one, a short text ending with
``FINAL ANSWER: <...>``. Deterministic: the same prompt always gets the same answer.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from qemem.llm.types import LLMRequest

#: qemem memory ids as they appear in prompts: LoCoMo turns ``D3:12``, ``T..``, ``E12``, ``S7``.
ID_PATTERN = re.compile(
    r"(?<![\w:])(?:D\d+:\d+|[TES]\d+(?::\d+)*|[TES][-_][\w-]*\d+(?::\d+)*)(?![\w])"
)

_ID_FIELD = re.compile(r"^(ids?|sources?|.*_ids?|.*_sources?)$")


def _digest(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x00".join(parts).encode()).digest()[:8], "big")


class _Generator:
    """Builds a schema-valid instance from a prompt, deterministically."""

    def __init__(self, prompt: str, schema: dict[str, Any]) -> None:
        self.prompt = prompt
        self.root = schema
        self.words = re.findall(r"\S+", prompt) or ["fake"]
        self.ids = list(dict.fromkeys(ID_PATTERN.findall(prompt)))

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            target: Any = self.root
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part]
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        if "allOf" in node:
            merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
            for sub in node["allOf"]:
                sub = self.resolve(sub)
                for key, value in sub.items():
                    if key == "properties":
                        merged.setdefault("properties", {}).update(value)
                    elif key == "required":
                        merged["required"] = sorted({*merged.get("required", []), *value})
                    else:
                        merged.setdefault(key, value)
            node = merged
        return node

    def span(self, path: str, n_words: int = 6) -> str:
        start = _digest(self.prompt, path) % len(self.words)
        return " ".join(self.words[start : start + n_words]).strip("\"'{}[](),") or "fake"

    def value(self, node: dict[str, Any], path: str, name: str) -> Any:
        node = self.resolve(node)
        if "const" in node:
            return node["const"]
        if "enum" in node:
            return node["enum"][_digest(self.prompt, path) % len(node["enum"])]
        for key in ("anyOf", "oneOf"):
            if key in node:
                options = [self.resolve(o) for o in node[key]]
                non_null = [o for o in options if o.get("type") != "null"] or options
                return self.value(non_null[0], path, name)
        kind = node.get("type", "object" if "properties" in node else "string")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind == "object":
            return self.obj(node, path)
        if kind == "array":
            return self.array(node, path, name)
        if kind == "string":
            return self.string(node, path, name)
        if kind in ("integer", "number"):
            return self.number(node, kind)
        if kind == "boolean":
            return True
        return None

    def obj(self, node: dict[str, Any], path: str) -> dict[str, Any]:
        props: dict[str, Any] = node.get("properties", {})
        out = {key: self.value(sub, f"{path}.{key}", key) for key, sub in props.items()}
        for key in node.get("required", []):
            out.setdefault(key, "fake")
        return out

    def array(self, node: dict[str, Any], path: str, name: str) -> list[Any]:
        if "prefixItems" in node:
            return [
                self.value(sub, f"{path}[{i}]", name) for i, sub in enumerate(node["prefixItems"])
            ]
        lo = int(node.get("minItems", 0))
        hi = int(node.get("maxItems", max(lo, 2)))
        count = max(lo, min(hi, 2))
        items = self.resolve(node.get("items", {}))
        if _ID_FIELD.match(name) and items.get("type", "string") == "string" and self.ids:
            start = _digest(self.prompt, path) % len(self.ids)
            picked = [self.ids[(start + i) % len(self.ids)] for i in range(count)]
            unique = list(dict.fromkeys(picked))
            return unique if len(unique) >= lo else picked
        values = [self.value(items, f"{path}[{i}]", name) for i in range(count)]
        if node.get("uniqueItems"):
            values = list({json.dumps(v, sort_keys=True): v for v in values}.values())
        return values

    def string(self, node: dict[str, Any], path: str, name: str) -> str:
        fmt = node.get("format")
        if fmt == "date":
            return "2023-05-08"
        if fmt == "date-time":
            return "2023-05-08T13:56:00"
        if _ID_FIELD.match(name) and self.ids:
            text = self.ids[_digest(self.prompt, path) % len(self.ids)]
        else:
            text = self.span(path)
        lo, hi = int(node.get("minLength", 0)), node.get("maxLength")
        if len(text) < lo:
            text = (text + " ") * (lo // max(len(text), 1) + 1)
        return str(text[: int(hi)] if hi is not None else text)

    def number(self, node: dict[str, Any], kind: str) -> float | int:
        lo = node.get("minimum", node.get("exclusiveMinimum"))
        hi = node.get("maximum", node.get("exclusiveMaximum"))
        value: float = 1
        if lo is not None:
            value = max(value, lo + (1 if "exclusiveMinimum" in node and kind == "integer" else 0))
            if "exclusiveMinimum" in node and kind == "number":
                value = max(value, lo + 0.5)
        if hi is not None and value > hi:
            value = hi - (1 if "exclusiveMaximum" in node else 0)
        return int(value) if kind == "integer" else float(value)


def generic_instance(schema: dict[str, Any], prompt: str) -> Any:
    """A deterministic instance of ``schema`` whose strings and ids come from ``prompt``."""
    gen = _Generator(prompt, schema)
    return gen.value(schema, "$", "$")


def generic_text(request: LLMRequest) -> str:
    """A short deterministic free-text answer ending with ``FINAL ANSWER: <...>``."""
    content = request.messages[-1].content if request.messages else request.system
    lines = [ln.strip() for ln in content.splitlines() if ln.strip()]
    cited = [ln for ln in lines if ID_PATTERN.search(ln)]
    source = cited[0] if cited else (lines[0] if lines else "nothing")
    words = ID_PATTERN.sub("", source).split()
    answer = " ".join(words[:8]).strip(" :-[]()") or "unknown"
    return f"Based on the available memories: {source[:200]}\nFINAL ANSWER: {answer}"
