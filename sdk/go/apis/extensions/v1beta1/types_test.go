package v1beta1_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
	"github.com/agent-sandbox-dev/agent-sandbox/sdk/go/internal/apitest"
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
		{"testdata/sandboxtemplate-latebind.yaml", &v1beta1.SandboxTemplate{}},
		{"testdata/sandboxclaim-valuefrom.yaml", &v1beta1.SandboxClaim{}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			file := filepath.Join(dir, tc.file)
			if strings.HasPrefix(tc.file, "testdata/") {
				file = tc.file
			}
			apitest.RoundTrip(t, file, tc.obj)
		})
	}
}

func TestExtensionFieldsDecode(t *testing.T) {
	var tpl v1beta1.SandboxTemplate
	apitest.RoundTrip(t, "testdata/sandboxtemplate-latebind.yaml", &tpl)
	d := tpl.Spec.ClaimConfigDelivery
	if d == nil || d.Mode != v1beta1.ClaimConfigLateBound || d.OnFailure != v1beta1.ClaimConfigFailureFail ||
		d.Port == nil || *d.Port != 8080 {
		t.Errorf("claimConfigDelivery %+v", d)
	}
	if p := tpl.Spec.IdlePolicy; p == nil || p.TimeoutSeconds != 600 || p.Resumes() {
		t.Errorf("idlePolicy %+v", p)
	}
	if tpl.Spec.PageMerging != v1beta1.PageMergingMaximal {
		t.Errorf("pageMerging %q", tpl.Spec.PageMerging)
	}
	var claim v1beta1.SandboxClaim
	apitest.RoundTrip(t, "testdata/sandboxclaim-valuefrom.yaml", &claim)
	env := claim.Spec.Env
	if len(env) != 4 || env[0].ValueFrom != nil || env[2].ValueFrom == nil ||
		*env[2].ValueFrom.SecretKeyRef != (v1beta1.KeySelector{Name: "creds", Key: "api-key"}) ||
		env[3].ValueFrom.ConfigMapKeyRef == nil || env[3].ValueFrom.ConfigMapKeyRef.Key != "mode" {
		t.Errorf("env %+v", env)
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
		{"plain env sends value", v1beta1.EnvVar{Name: "A"}, []string{`"value":""`}, []string{`"valueFrom"`}},
		{"env ref leaves out an empty value", v1beta1.EnvVar{Name: "A", ValueFrom: &v1beta1.EnvVarSource{
			SecretKeyRef: &v1beta1.KeySelector{Name: "s", Key: "k"}}},
			[]string{`"valueFrom":{"secretKeyRef":{"name":"s","key":"k"}}`}, []string{`"value"`, `configMapKeyRef`}},
		{"env ref inside a claim", v1beta1.SandboxClaimSpec{Env: []v1beta1.EnvVar{{Name: "A", ContainerName: "c",
			ValueFrom: &v1beta1.EnvVarSource{ConfigMapKeyRef: &v1beta1.KeySelector{Name: "m", Key: "k"}}}}},
			[]string{`{"name":"A","valueFrom":{"configMapKeyRef":{"name":"m","key":"k"}},"containerName":"c"}`},
			[]string{`"value"`}},
		{"no delivery, no idle policy", v1beta1.SandboxTemplateSpec{}, nil,
			[]string{`claimConfigDelivery`, `idlePolicy`}},
		{"delivery defaults left to the API", v1beta1.SandboxTemplateSpec{
			ClaimConfigDelivery: &v1beta1.ClaimConfigDelivery{Mode: v1beta1.ClaimConfigLateBound}},
			[]string{`"claimConfigDelivery":{"mode":"LateBound"}`}, nil},
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
