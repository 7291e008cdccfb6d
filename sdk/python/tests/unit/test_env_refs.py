"""create(env=...) with Secret and ConfigMap key references (late-bound claim env)."""

from __future__ import annotations

import pytest

from agent_sandbox_sdk import ConfigMapKeyRef, SecretKeyRef, _k8s


def test_claim_env_refs() -> None:
    b = _k8s.claim_body(
        "c1",
        "pool",
        env={"PLAIN": "v", "API_KEY": SecretKeyRef("creds", "api-key"), "MODE": ConfigMapKeyRef("cfg", "mode")},
    )
    assert b["spec"]["env"] == [
        {"name": "PLAIN", "value": "v"},
        {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "api-key"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
    ]


def test_pod_spec_env_refs_override_same_name() -> None:
    spec = {"containers": [{"name": "c", "env": [{"name": "API_KEY", "value": "old"}, {"name": "K", "value": "1"}]}]}
    b = _k8s.sandbox_body("s1", spec, env={"API_KEY": SecretKeyRef("creds", "api-key")})
    env = b["spec"]["podTemplate"]["spec"]["containers"][0]["env"]
    assert env == [
        {"name": "K", "value": "1"},
        {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "api-key"}}},
    ]
    # The caller's spec is not modified.
    assert spec["containers"][0]["env"][0] == {"name": "API_KEY", "value": "old"}


def test_env_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="env N"):
        _k8s.claim_body("c1", "pool", env={"N": 1})  # type: ignore[dict-item]
