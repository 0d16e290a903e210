"""Inlining `$ref`s so every served schema is self-contained."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from codegen.schema_walk import map_subschemas, unescape_pointer_token

# Annotations that may sit beside a `$ref` without changing what it validates are still refused:
# the contract rule is "no sibling keywords", which keeps inlining a pure substitution.


class BundleError(Exception):
    """A `$ref` cannot be inlined: unknown target, sibling keywords, or recursion."""


def resolve_pointer(document: Any, fragment: str) -> Any:
    """The value a JSON Pointer fragment (without '#') names in a document."""
    if fragment == "":
        return document
    if not fragment.startswith("/"):
        raise BundleError(f"unsupported fragment {fragment!r}: only JSON Pointers are allowed")
    node = document
    for raw_token in fragment[1:].split("/"):
        token = unescape_pointer_token(raw_token)
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise BundleError(f"pointer #{fragment} does not resolve")
    return node


class Bundler:
    """Inlines refs between named documents (for example tools list and schemas.json)."""

    def __init__(self, documents: Mapping[str, Any]) -> None:
        self._documents = documents

    def bundle(self, schema: Any, base_document: str) -> Any:
        """A deep copy of schema with every `$ref` inlined and `$defs` dropped."""
        return self._inline(schema, base_document, ())

    def _target(self, ref: str, base_document: str) -> tuple[str, str, Any]:
        document_part, _, fragment = ref.partition("#")
        document_name = document_part.removeprefix("./") or base_document
        if document_name not in self._documents:
            raise BundleError(f"$ref {ref!r} names an unknown document {document_name!r}")
        target = resolve_pointer(self._documents[document_name], fragment)
        return document_name, fragment, target

    def _inline(self, schema: Any, base_document: str, stack: tuple[str, ...]) -> Any:
        if not isinstance(schema, dict):
            return schema
        ref = schema.get("$ref")
        if isinstance(ref, str):
            siblings = sorted(key for key in schema if key != "$ref")
            if siblings:
                raise BundleError(f"$ref {ref!r} has sibling keywords {siblings}")
            document_name, fragment, target = self._target(ref, base_document)
            key = f"{document_name}#{fragment}"
            if key in stack:
                cycle = " -> ".join((*stack[stack.index(key) :], key))
                raise BundleError(f"recursive $ref cannot be inlined: {cycle}")
            return self._inline(target, document_name, (*stack, key))
        copied = map_subschemas(
            schema, lambda sub, _pointer: self._inline(sub, base_document, stack)
        )
        copied.pop("$defs", None)
        copied.pop("definitions", None)
        return copied
