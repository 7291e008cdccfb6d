package v1beta1_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1beta1 "agent-sandbox.dev/sdk/go/apis/extensions/v1beta1"
	"agent-sandbox.dev/sdk/go/internal/apitest"
)

func TestExamplesRoundTrip(t *testing.T) {
	dir := apitest.ExamplesDir(t)
	tests := []struct {
		file string
		obj  any
	}{
		{"sandboxtemplate-minimal.yaml", &v1beta1.SandboxTemplate{}},
		{"sandboxtemplate-full.yaml", &v1beta1.SandboxTemplate{}},
		{"sandboxclaim-minimal.yaml", &v1beta1.SandboxClaim{}},
		{"sandboxclaim-full.yaml", &v1beta1.SandboxClaim{}},
		{"sandboxwarmpool-minimal.yaml", &v1beta1.SandboxWarmPool{}},
		{"sandboxwarmpool-full.yaml", &v1beta1.SandboxWarmPool{}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			apitest.RoundTrip(t, filepath.Join(dir, tc.file), tc.obj)
		})
	}
}

func TestDeepCopy(t *testing.T) {
	apitest.DeepCopyCheck(t, func() *v1beta1.SandboxTemplate { return &v1beta1.SandboxTemplate{} },
		func(s *v1beta1.SandboxTemplate) *v1beta1.SandboxTemplate { return s.DeepCopy() })
	apitest.DeepCopyCheck(t, func() *v1beta1.SandboxTemplateList { return &v1beta1.SandboxTemplateList{} },
		func(s *v1beta1.SandboxTemplateList) *v1beta1.SandboxTemplateList { return s.DeepCopy() })
	apitest.DeepCopyCheck(t, func() *v1beta1.SandboxClaim { return &v1beta1.SandboxClaim{} },
		func(s *v1beta1.SandboxClaim) *v1beta1.SandboxClaim { return s.DeepCopy() })
	apitest.DeepCopyCheck(t, func() *v1beta1.SandboxClaimList { return &v1beta1.SandboxClaimList{} },
		func(s *v1beta1.SandboxClaimList) *v1beta1.SandboxClaimList { return s.DeepCopy() })
	apitest.DeepCopyCheck(t, func() *v1beta1.SandboxWarmPool { return &v1beta1.SandboxWarmPool{} },
		func(s *v1beta1.SandboxWarmPool) *v1beta1.SandboxWarmPool { return s.DeepCopy() })
	apitest.DeepCopyCheck(t, func() *v1beta1.SandboxWarmPoolList { return &v1beta1.SandboxWarmPoolList{} },
		func(s *v1beta1.SandboxWarmPoolList) *v1beta1.SandboxWarmPoolList { return s.DeepCopy() })
}

func TestScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"SandboxTemplate", "SandboxClaim", "SandboxWarmPool",
		"SandboxTemplateList", "SandboxClaimList", "SandboxWarmPoolList"} {
		if !s.Recognizes(v1beta1.SchemeGroupVersion.WithKind(kind)) {
			t.Errorf("scheme does not know %s", kind)
		}
	}
}

func TestJSONShape(t *testing.T) {
	zero := int32(0)
	tests := []struct {
		name string
		obj  any
		want []string // substrings of the JSON
		not  []string
	}{
		{"unset rules are left out", v1beta1.SandboxTemplateSpec{NetworkPolicy: &v1beta1.NetworkPolicySpec{}},
			[]string{`"networkPolicy":{}`}, []string{`"ingress"`}},
		{"deny-all rules are kept", v1beta1.SandboxTemplateSpec{NetworkPolicy: &v1beta1.NetworkPolicySpec{
			Ingress: []networkingv1.NetworkPolicyIngressRule{}, Egress: []networkingv1.NetworkPolicyEgressRule{}}},
			[]string{`"ingress":[]`, `"egress":[]`}, nil},
		{"zero replicas are sent", v1beta1.SandboxWarmPoolSpec{Replicas: &zero},
			[]string{`"replicas":0`}, nil},
		{"unset replicas take the default", v1beta1.SandboxWarmPoolSpec{}, nil, []string{`"replicas"`}},
		{"unbound claim has no sandbox", v1beta1.SandboxClaim{}, nil, []string{`"sandbox"`, `"status"`}},
		{"bound claim", v1beta1.SandboxClaim{Status: v1beta1.SandboxClaimStatus{
			Sandbox:    v1beta1.SandboxReference{Name: "s", PodIPs: []string{"10.0.0.1"}},
			Conditions: []metav1.Condition{{Type: "Ready", Status: "True"}}}},
			[]string{`"sandbox":{"name":"s","podIPs":["10.0.0.1"]}`}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("%s lacks %s", b, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(string(b), n) {
					t.Errorf("%s has %s", b, n)
				}
			}
		})
	}
}
