"""Definition digests: workflow YAML parsed under YAML 1.2 core-schema rules, then hashed.

The loader (PyYAML with a custom resolver and constructor) gives YAML 1.2 core meaning:
only true/false (also True/TRUE/False/FALSE) are booleans, so yes/no/on/off stay strings;
unquoted timestamps stay strings; ints and floats follow the 1.2 core regexes (``017`` is
seventeen, ``0o17`` is fifteen, ``1_000`` is a string); ``<<`` is an ordinary key, not a merge;
``~``, ``null`` and an empty value are null. Duplicate keys, non-string keys, aliases, tags other
than the core ones, NaN/infinities, integers outside +/-(2^53 - 1), texts over
`MAX_DEFINITION_BYTES` and nesting over `MAX_DEPTH` are refused.

Digest profile (`definition-digest-v1`): ``sha256:`` + hex SHA-256 of the RFC 8785 form of
the document, with one documented extension. RFC 8785 writes the float 1.0 as ``1``, but the
seed requires the YAML texts ``1`` and ``1.0`` to give different digests (the reference
implementation hashes serde_json output, which keeps ``1.0``). So a YAML float whose RFC 8785
form is integral (no ``.`` and no exponent) is written with a ``.0`` suffix; every other float,
and every int, string, boolean and null, is written exactly as RFC 8785 (via the `rfc8785`
library) writes it, and object members are ordered by UTF-16 code units as RFC 8785 requires.
Because integers never exceed 2^53 - 1, an int and a float can never share a spelling.
"""

from __future__ import annotations

import re
from io import BytesIO
from typing import Any

import rfc8785
import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from runtime.canonical.errors import CanonicalError
from runtime.canonical.safe_json import SAFE_INTEGER_MAX, sha256_digest

DIGEST_PROFILE = "definition-digest-v1"
MAX_DEFINITION_BYTES = 1_048_576
MAX_DEPTH = 64

_TAG = "tag:yaml.org,2002:"
_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL_RE = re.compile(r"^(?:~|null|Null|NULL|)$")
_INT_RE = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT_RE = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)


def _scalar_text(node: Node) -> str:
    if not isinstance(node, ScalarNode):
        raise CanonicalError("invalid-yaml", f"{node.tag} must be a scalar")
    return str(node.value)


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _checked_text(text: str) -> str:
    # Escapes ("\0", "\ud800") can produce what neither jsonb nor UTF-8 can store.
    if "\x00" in text:
        raise CanonicalError("nul-character", "definition text contains a NUL character (U+0000)")
    if _SURROGATE_RE.search(text):
        raise CanonicalError("lone-surrogate", "definition text contains a lone UTF-16 surrogate")
    return text


class _CoreLoader(yaml.BaseLoader):
    """PyYAML loader with YAML 1.2 core typing that builds JSON values only, without aliases."""

    _depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        # Aliases are refused outright so no alias bomb can expand; depth keeps recursion bounded.
        if self.check_event(AliasEvent):
            raise CanonicalError("alias-refused", "YAML aliases are not accepted in definitions")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise CanonicalError("too-deep", f"nesting deeper than {MAX_DEPTH}")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_core_null(self, node: Node) -> None:
        if not _NULL_RE.match(_scalar_text(node)):
            raise CanonicalError("invalid-yaml", "!!null value must be null, ~ or empty")

    def construct_core_bool(self, node: Node) -> bool:
        text = _scalar_text(node)
        if not _BOOL_RE.match(text):
            raise CanonicalError("invalid-yaml", f"{text!r} is not a YAML 1.2 boolean")
        return text.lower() == "true"

    def construct_core_int(self, node: Node) -> int:
        text = _scalar_text(node)
        if not _INT_RE.match(text) or len(text) > 24:
            raise CanonicalError("unsupported-number", f"{text!r} is not a safe YAML 1.2 int")
        if text.startswith(("0o", "0x")):
            value = int(text[2:], 8 if text[1] == "o" else 16)
        else:
            value = int(text)
        if abs(value) > SAFE_INTEGER_MAX:
            raise CanonicalError("unsupported-number", "integer outside +/-(2^53 - 1)")
        return value

    def construct_core_float(self, node: Node) -> float:
        text = _scalar_text(node)
        if not _FLOAT_RE.match(text) and not _INT_RE.match(text):
            raise CanonicalError("unsupported-number", f"{text!r} is not a YAML 1.2 float")
        if text.lstrip("+-").lower() in (".inf", ".nan"):
            raise CanonicalError("unsupported-number", "NaN and infinities are not JSON numbers")
        value = float(int(text, 0) if text.startswith(("0o", "0x")) else text)
        if value in (float("inf"), float("-inf")):
            raise CanonicalError("unsupported-number", "float overflows a double")
        return value

    def construct_core_str(self, node: Node) -> str:
        return _checked_text(_scalar_text(node))

    def construct_core_seq(self, node: Node) -> list[Any]:
        if not isinstance(node, SequenceNode):
            raise CanonicalError("invalid-yaml", "!!seq must be a sequence")
        return [self.construct_object(child, deep=True) for child in node.value]

    def construct_core_map(self, node: Node) -> dict[str, Any]:
        if not isinstance(node, MappingNode):
            raise CanonicalError("invalid-yaml", "!!map must be a mapping")
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                raise CanonicalError("non-string-key", "mapping keys must be strings; quote them")
            if key in mapping:
                raise CanonicalError("duplicate-key", f"duplicate mapping key {key!r}")
            mapping[key] = self.construct_object(value_node, deep=True)
        return mapping

    def construct_unknown(self, node: Node) -> Any:
        raise CanonicalError("unsupported-tag", f"YAML tag {node.tag!r} is not accepted")


# No timestamp, merge, value or YAML 1.1 boolean resolvers: the 1.2 core schema only.
_CoreLoader.add_implicit_resolver(_TAG + "bool", _BOOL_RE, list("tTfF"))
_CoreLoader.add_implicit_resolver(_TAG + "null", _NULL_RE, ["~", "n", "N", ""])
_CoreLoader.add_implicit_resolver(_TAG + "int", _INT_RE, list("-+0123456789"))
_CoreLoader.add_implicit_resolver(_TAG + "float", _FLOAT_RE, list("-+0123456789."))
_CoreLoader.add_constructor(_TAG + "null", _CoreLoader.construct_core_null)
_CoreLoader.add_constructor(_TAG + "bool", _CoreLoader.construct_core_bool)
_CoreLoader.add_constructor(_TAG + "int", _CoreLoader.construct_core_int)
_CoreLoader.add_constructor(_TAG + "float", _CoreLoader.construct_core_float)
_CoreLoader.add_constructor(_TAG + "str", _CoreLoader.construct_core_str)
_CoreLoader.add_constructor(_TAG + "seq", _CoreLoader.construct_core_seq)
_CoreLoader.add_constructor(_TAG + "map", _CoreLoader.construct_core_map)
_CoreLoader.add_constructor(None, _CoreLoader.construct_unknown)


def load_yaml_core(text: str | bytes) -> Any:
    """Parse one YAML document to a JSON value under YAML 1.2 core rules (bounded, no aliases)."""
    if isinstance(text, str):
        _checked_text(text)
    raw = text.encode("utf-8") if isinstance(text, str) else text
    if len(raw) > MAX_DEFINITION_BYTES:
        raise CanonicalError("too-large", f"definition exceeds {MAX_DEFINITION_BYTES} bytes")
    try:
        source = _checked_text(raw.decode("utf-8")) if isinstance(text, bytes) else text
        loader = _CoreLoader(source)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except CanonicalError:
        raise
    except UnicodeDecodeError as error:
        raise CanonicalError("invalid-yaml", "definition text is not UTF-8") from error
    except yaml.MarkedYAMLError as error:
        where = f" at line {error.problem_mark.line + 1}" if error.problem_mark else ""
        raise CanonicalError("invalid-yaml", f"{error.problem or 'invalid YAML'}{where}") from error
    except (yaml.YAMLError, RecursionError) as error:
        raise CanonicalError("invalid-yaml", "definition text is not valid YAML") from error


def load_definition_yaml(text: str | bytes) -> dict[str, Any]:
    """Parse workflow definition YAML into its JSON document; the root must be a mapping."""
    document = load_yaml_core(text)
    if not isinstance(document, dict):
        raise CanonicalError("unsupported-value", "a workflow definition must be a YAML mapping")
    return document


def _dump(value: Any, sink: BytesIO) -> None:
    if isinstance(value, dict):
        sink.write(b"{")
        ordered = sorted(value.items(), key=lambda item: item[0].encode("utf-16be"))
        for index, (key, member) in enumerate(ordered):
            if index:
                sink.write(b",")
            sink.write(rfc8785.dumps(key))
            sink.write(b":")
            _dump(member, sink)
        sink.write(b"}")
    elif isinstance(value, list):
        sink.write(b"[")
        for index, item in enumerate(value):
            if index:
                sink.write(b",")
            _dump(item, sink)
        sink.write(b"]")
    elif isinstance(value, float):
        number: bytes = rfc8785.dumps(value)
        # Keep a float distinct from the int of the same value (see the module docstring).
        sink.write(number + b".0" if number.lstrip(b"-").isdigit() else number)
    else:
        sink.write(rfc8785.dumps(value))


def document_canonical_bytes(document: Any) -> bytes:
    """The `definition-digest-v1` canonical bytes of a loaded definition (or part of one)."""
    sink = BytesIO()
    try:
        _dump(document, sink)
    except rfc8785.CanonicalizationError as error:
        raise CanonicalError("unsupported-value", str(error)) from error
    except UnicodeEncodeError as error:
        raise CanonicalError("lone-surrogate", "a text holds a lone UTF-16 surrogate") from error
    return sink.getvalue()


# Where AI-authoring provenance lives (seed 001 Phase 3): document.metadata.aiAuthoring.
PROVENANCE_KEY = "aiAuthoring"


def without_provenance(document: dict[str, Any]) -> dict[str, Any]:
    """The document without document.metadata.aiAuthoring (and without a metadata map that
    held nothing else); the same object when there is no provenance.

    Seed 001 Phase 3: the semantic definition digest is recomputed "after removing only
    provenance metadata", so recording the reviewer's evidence does not change the digest the
    reviewer approved, while any other edit does. A definition without provenance is untouched,
    so its digest is exactly the `definition-digest-v1` one.
    """
    header = document.get("document")
    metadata = header.get("metadata") if isinstance(header, dict) else None
    if not isinstance(metadata, dict) or PROVENANCE_KEY not in metadata:
        return document
    assert isinstance(header, dict)
    kept_metadata = {key: value for key, value in metadata.items() if key != PROVENANCE_KEY}
    kept_header = {key: value for key, value in header.items() if key != "metadata"}
    if kept_metadata:
        kept_header["metadata"] = kept_metadata
    return {**document, "document": kept_header}


def definition_digest(definition: str | bytes | dict[str, Any]) -> str:
    """`sha256:<hex>` of a definition, given as YAML text or as a loaded document: the
    semantic digest, which leaves out document.metadata.aiAuthoring (see without_provenance)."""
    document = definition if isinstance(definition, dict) else load_definition_yaml(definition)
    return sha256_digest(document_canonical_bytes(without_provenance(document)))


def input_schema_of(document: dict[str, Any]) -> Any:
    """The JSON Schema a definition checks its input with; `{}` (accept anything) when none."""
    section = document.get("input")
    schema = section.get("schema") if isinstance(section, dict) else None
    if schema is None:
        return {}
    if isinstance(schema, dict) and "document" in schema:
        return schema["document"]
    # An external `resource` schema is refused by definition validation; digest what was written.
    return schema


def schema_digest(document: dict[str, Any]) -> str:
    """`sha256:<hex>` of the definition's input schema, in the definition digest profile."""
    return sha256_digest(document_canonical_bytes(input_schema_of(document)))
