# SPDX-License-Identifier: Apache-2.0
"""Tests of the OpenAPI -> CRD structural schema translation (no API server)."""

import openapi
from support import check

P = "#/components/schemas/"


def doc(schemas):
    return {"components": {"schemas": schemas}}


def resolve(schemas, name, **kw):
    return openapi.Resolver([doc(schemas)], **kw).resolve(name)


def raises(fn, text):
    try:
        fn()
    except openapi.OpenAPIError as e:
        check(text in str(e), f"error {e!r} does not mention {text!r}")
        return
    raise AssertionError(f"no OpenAPIError (want one mentioning {text!r})")


def test_allof_ref_is_inlined_and_zero_default_dropped():
    out = resolve(
        {
            "A": {
                "type": "object",
                "required": ["z", "b"],
                "properties": {
                    "b": {"allOf": [{"$ref": P + "B"}], "default": {}, "description": "x"},
                    "z": {"type": "string", "default": ""},
                },
            },
            "B": {"type": "object", "properties": {"n": {"type": "integer", "default": 0}}},
        },
        "A",
    )
    want = {
        "type": "object",
        "required": ["b", "z"],
        "properties": {
            "b": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "z": {"type": "string"},
        },
    }
    check(out == want, f"got {out}")


def test_meaningful_default_kept():
    out = resolve({"A": {"type": "string", "default": "TCP", "enum": ["TCP", "UDP"]}}, "A")
    check(out == {"type": "string", "default": "TCP", "enum": ["TCP", "UDP"]}, f"got {out}")


def test_int_or_string_and_quantity():
    schemas = {
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
            "format": "int-or-string",
            "oneOf": [{"type": "integer"}, {"type": "string"}],
        },
        "io.k8s.apimachinery.pkg.api.resource.Quantity": {
            "oneOf": [{"type": "string"}, {"type": "number"}],
        },
        "A": {
            "type": "object",
            "properties": {
                "port": {"$ref": P + "io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
                "limits": {
                    "type": "object",
                    "additionalProperties": {
                        "$ref": P + "io.k8s.apimachinery.pkg.api.resource.Quantity"
                    },
                },
            },
        },
    }
    out = resolve(schemas, "A")
    port = out["properties"]["port"]
    check(port == {"anyOf": [{"type": "integer"}, {"type": "string"}],
                   "x-kubernetes-int-or-string": True}, f"port {port}")
    q = out["properties"]["limits"]["additionalProperties"]
    check(q.get("x-kubernetes-int-or-string") is True, f"quantity {q}")
    check(q.get("pattern", "").startswith("^(\\+|-)?"), f"quantity pattern {q}")
    check("type" not in q and "oneOf" not in q, f"quantity {q}")


def test_free_form_object_preserves_unknown_fields():
    out = resolve({"F": {"type": "object"}}, "F")
    check(out == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}, f"got {out}")


def test_list_annotations_kept_patch_annotations_dropped():
    out = resolve(
        {
            "A": {
                "type": "array",
                "items": {"allOf": [{"$ref": P + "I"}], "default": {}},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "x-kubernetes-patch-strategy": "merge",
                "x-kubernetes-patch-merge-key": "name",
            },
            "I": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string", "default": ""}},
                "x-kubernetes-map-type": "atomic",
                "x-kubernetes-unions": [{"discriminator": "name"}],
            },
        },
        "A",
    )
    check(out["x-kubernetes-list-type"] == "map", f"got {out}")
    check(out["x-kubernetes-list-map-keys"] == ["name"], f"got {out}")
    check(not any(k.startswith("x-kubernetes-patch") for k in out), f"got {out}")
    check(out["items"]["x-kubernetes-map-type"] == "atomic", f"got {out}")
    check("x-kubernetes-unions" not in out["items"], f"got {out}")


def test_list_map_key_keeps_zero_default_when_not_required():
    out = resolve(
        {
            "A": {
                "type": "array",
                "items": {"$ref": P + "I"},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
            "I": {"type": "object", "properties": {"name": {"type": "string", "default": ""}}},
        },
        "A",
    )
    check(out["items"]["properties"]["name"] == {"type": "string", "default": ""}, f"got {out}")
    check("x-zero-default" not in str(out), "internal marker leaked")


def test_list_map_key_without_default_is_an_error():
    raises(
        lambda: resolve(
            {
                "A": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"k": {"type": "string"}}},
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["k"],
                }
            },
            "A",
        ),
        "neither required nor defaulted",
    )


def test_descriptions_dropped_or_kept():
    schemas = {"A": {"type": "string", "description": "hello"}}
    check(resolve(schemas, "A") == {"type": "string"}, "description not dropped")
    out = resolve(schemas, "A", keep_descriptions=True)
    check(out == {"type": "string", "description": "hello"}, f"got {out}")


def test_unknown_keyword_recursion_and_missing_ref_are_errors():
    raises(lambda: resolve({"A": {"type": "string", "x-new-thing": 1}}, "A"), "x-new-thing")
    raises(
        lambda: resolve(
            {"A": {"type": "object", "properties": {"a": {"$ref": P + "A"}}}}, "A"
        ),
        "recursive",
    )
    raises(lambda: resolve({"A": {"$ref": P + "Nope"}}, "A"), "Nope not found")
    raises(lambda: resolve({"A": {"oneOf": [{"type": "string"}]}}, "A"), "oneOf")


def test_result_is_independent_copy():
    schemas = {"B": {"type": "string", "enum": ["x"]}, "A": {"$ref": P + "B"}}
    r = openapi.Resolver([doc(schemas)])
    first = r.resolve("A")
    first["enum"].append("y")
    check(r.resolve("A") == {"type": "string", "enum": ["x"]}, "shared state between results")
    check(schemas["B"]["enum"] == ["x"], "source document modified")
