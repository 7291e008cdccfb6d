package sandbox

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
)

func TestHandedOut(t *testing.T) {
	const uid = types.UID("3f1c2a9e-0000-4000-8000-000000000001")
	bound := func(edit func(*agentsv1beta1.Sandbox)) *agentsv1beta1.Sandbox {
		yes := true
		sb := &agentsv1beta1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: "sb", Labels: map[string]string{agentsv1beta1.LabelClaimUID: string(uid)},
				OwnerReferences: []metav1.OwnerReference{{Kind: "SandboxClaim", Name: "c", UID: uid, Controller: &yes}}},
			Status: agentsv1beta1.SandboxStatus{PodIPs: []string{"10.0.0.9"}, Conditions: []metav1.Condition{{
				Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "DependenciesReady"}}},
		}
		if edit != nil {
			edit(sb)
		}
		return sb
	}
	now := metav1.Now()
	tests := []struct {
		name string
		sb   *agentsv1beta1.Sandbox
		want bool
	}{
		{"bound and Ready", bound(nil), true},
		{"other claim's label", bound(func(s *agentsv1beta1.Sandbox) { s.Labels[agentsv1beta1.LabelClaimUID] = "x" }), false},
		{"no label", bound(func(s *agentsv1beta1.Sandbox) { s.Labels = nil }), false},
		{"no owner", bound(func(s *agentsv1beta1.Sandbox) { s.OwnerReferences = nil }), false},
		{"owner not controller", bound(func(s *agentsv1beta1.Sandbox) { s.OwnerReferences[0].Controller = nil }), false},
		{"controlled by another", bound(func(s *agentsv1beta1.Sandbox) { s.OwnerReferences[0].UID = "x" }), false},
		{"being deleted", bound(func(s *agentsv1beta1.Sandbox) { s.DeletionTimestamp = &now }), false},
		{"suspended", bound(func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.OperatingModeSuspended }), false},
		{"no pod IP", bound(func(s *agentsv1beta1.Sandbox) { s.Status.PodIPs = nil }), false},
		{"not Ready", bound(func(s *agentsv1beta1.Sandbox) { s.Status.Conditions[0].Status = metav1.ConditionFalse }), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := handedOut(tc.sb, uid); got != tc.want {
				t.Fatalf("handedOut = %v, want %v", got, tc.want)
			}
		})
	}
	env := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{UID: uid}}
	if handoutUID(env) != uid {
		t.Fatal("a claim without env is handed out early")
	}
	env.Spec.Env = []extv1beta1.EnvVar{{Name: "A", Value: "1"}}
	if handoutUID(env) != "" {
		t.Fatal("a claim with env must wait for the claim's Ready")
	}
}
