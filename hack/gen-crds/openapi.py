# SPDX-License-Identifier: Apache-2.0
"""Translate Kubernetes OpenAPI v3 component schemas into inline CRD structural schemas.

The API server's /openapi/v3 documents describe types with $ref (often wrapped in
allOf), oneOf for int-or-string values and a few annotations that a
CustomResourceDefinition does not accept. resolve() returns a self-contained
schema in the CRD dialect (apiextensions.k8s.io/v1 JSONSchemaProps):

  * every $ref / allOf:[{$ref}] is replaced by the converted target, inline;
  * IntOrString becomes x-kubernetes-int-or-string (anyOf integer|string);
  * Quantity becomes x-kubernetes-int-or-string with the quantity pattern;
  * an object without properties or additionalProperties (FieldsV1,
    RawExtension) keeps unknown fields (x-kubernetes-preserve-unknown-fields);
  * defaults that only restate Go zero values ("", 0, false, {}, []) are
    dropped, because in a CRD they would be materialized into stored objects and
    would hide missing required fields; other defaults (e.g. protocol: TCP) stay;
    a zero default is kept where a list-map key needs one to be valid;
  * list types, list-map keys, map types, enums, formats and required lists are
    kept; patch-strategy, union and GVK annotations are dropped;
  * descriptions are dropped unless keep_descriptions is set.

Unknown keywords raise OpenAPIError, so a new construct in a future Kubernetes
release is noticed instead of being silently mistranslated.
"""

import copy

__all__ = ["OpenAPIError", "Resolver", "REF_PREFIX"]

REF_PREFIX = "#/components/schemas/"

INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"

# The canonical quantity grammar (sign, number, then a binary-SI, decimal-SI or
# exponent suffix), as a regular expression.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

# Keywords copied through unchanged (after their values are converted).
PASSTHROUGH = {
    "type",
    "format",
    "enum",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "uniqueItems",
    "nullable",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
}

# Keywords a CRD does not accept (or that carry no validation): dropped.
DROPPED = {
    "x-kubernetes-patch-strategy",
    "x-kubernetes-patch-merge-key",
    "x-kubernetes-unions",
    "x-kubernetes-group-version-kind",
    "example",
    "externalDocs",
}


class OpenAPIError(Exception):
    """A schema could not be translated."""


def _is_zero(value):
    if isinstance(value, bool):
        return value is False
    if isinstance(value, (int, float)):
        return value == 0
    return value in ("", {}, [])


def _zero_for(schema):
    return {"string": "", "integer": 0, "number": 0, "boolean": False}.get(schema.get("type"))


class Resolver:
    """Resolves named component schemas from one or more OpenAPI v3 documents."""

    def __init__(self, documents, keep_descriptions=False):
        self.schemas = {}
        for doc in documents:
            for name, schema in doc.get("components", {}).get("schemas", {}).items():
                self.schemas.setdefault(name, schema)
        self.keep_descriptions = keep_descriptions
        self.used = set()

    def resolve(self, name):
        """Return a new inline structural schema for component `name`."""
        return strip_markers(self._named(name, ()))

    # --- internals ---------------------------------------------------------------

    def _named(self, name, stack):
        if name in stack:
            raise OpenAPIError("recursive schema: " + " -> ".join(stack + (name,)))
        if name not in self.schemas:
            raise OpenAPIError(f"schema {name} not found (referenced via {'/'.join(stack)})")
        self.used.add(name)
        src = self.schemas[name]
        if name == INT_OR_STRING:
            out = self._int_or_string()
        elif name == QUANTITY:
            out = self._int_or_string()
            out["pattern"] = QUANTITY_PATTERN
        else:
            out = self._convert(src, stack + (name,), name)
        if self.keep_descriptions and src.get("description") and "description" not in out:
            out["description"] = src["description"]
        return out

    @staticmethod
    def _int_or_string():
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
        }

    def _ref_target(self, node, where):
        """The component name when node is a $ref or allOf:[{$ref}] wrapper, else None."""
        if "$ref" in node:
            ref = node["$ref"]
        elif "allOf" in node:
            parts = node["allOf"]
            if len(parts) != 1 or set(parts[0]) != {"$ref"}:
                raise OpenAPIError(f"{where}: unsupported allOf {parts!r}")
            ref = parts[0]["$ref"]
        else:
            return None
        if not ref.startswith(REF_PREFIX):
            raise OpenAPIError(f"{where}: unsupported $ref {ref}")
        return ref[len(REF_PREFIX) :]

    def _convert(self, node, stack, where):
        target = self._ref_target(node, where)
        if target is not None:
            out = self._named(target, stack)
            rest = {k: v for k, v in node.items() if k not in ("$ref", "allOf")}
            if set(rest) - {"description", "default"}:
                raise OpenAPIError(f"{where}: unexpected keys beside $ref: {sorted(rest)}")
            self._merge_annotations(out, rest)
            return out
        if "oneOf" in node or "anyOf" in node:
            raise OpenAPIError(f"{where}: unsupported oneOf/anyOf outside IntOrString/Quantity")
        out = {}
        for key, value in node.items():
            self._convert_key(out, key, value, stack, where)
        free_form = "properties" not in out and "additionalProperties" not in out
        if out.get("type") == "object" and free_form:
            out["x-kubernetes-preserve-unknown-fields"] = True
        if out.get("x-kubernetes-list-type") == "map":
            self._fix_list_map_keys(out, where)
        return out

    def _convert_key(self, out, key, value, stack, where):
        if key == "properties":
            out[key] = {
                p: self._convert(s, stack, f"{where}.{p}") for p, s in sorted(value.items())
            }
        elif key in ("items", "additionalProperties"):
            if isinstance(value, bool):
                out[key] = value
            else:
                out[key] = self._convert(value, stack, f"{where}[]")
        elif key == "required":
            out[key] = sorted(value)
        elif key == "default":
            if not _is_zero(value):
                out[key] = copy.deepcopy(value)
            else:
                out["x-zero-default"] = True  # removed again by _fix_list_map_keys / _strip
        elif key == "description":
            if self.keep_descriptions:
                out[key] = value
        elif key in PASSTHROUGH:
            out[key] = copy.deepcopy(value)
        elif key in DROPPED:
            pass
        else:
            raise OpenAPIError(f"{where}: unsupported keyword {key!r}")

    def _merge_annotations(self, out, rest):
        if "default" in rest and not _is_zero(rest["default"]):
            out["default"] = copy.deepcopy(rest["default"])
        if self.keep_descriptions and rest.get("description"):
            out["description"] = rest["description"]

    @staticmethod
    def _fix_list_map_keys(array, where):
        """A list-map key must be required or defaulted: restore a zero default if needed."""
        items = array.get("items", {})
        props = items.get("properties", {})
        for key in array.get("x-kubernetes-list-map-keys", []):
            if key in items.get("required", []) or "default" in props.get(key, {}):
                continue
            zero = _zero_for(props.get(key, {}))
            if key not in props or zero is None or not props[key].get("x-zero-default"):
                raise OpenAPIError(f"{where}: list-map key {key} is neither required nor defaulted")
            props[key]["default"] = zero


def strip_markers(schema):
    """Remove the internal x-zero-default markers (in place); returns schema."""
    if isinstance(schema, dict):
        schema.pop("x-zero-default", None)
        for value in schema.values():
            strip_markers(value)
    elif isinstance(schema, list):
        for value in schema:
            strip_markers(value)
    return schema
