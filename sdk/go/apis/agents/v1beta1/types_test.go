package v1beta1_test

import (
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	"github.com/agent-sandbox-dev/agent-sandbox/sdk/go/internal/apitest"
)

func TestExamplesRoundTrip(t *testing.T) {
	dir := apitest.ExamplesDir(t)
	for _, f := range []string{"sandbox-minimal.yaml", "sandbox-full.yaml"} {
		t.Run(f, func(t *testing.T) {
			apitest.RoundTrip(t, filepath.Join(dir, f), &v1beta1.Sandbox{})
		})
	}
	var sb v1beta1.Sandbox
	apitest.RoundTrip(t, "testdata/sandbox-idle.yaml", &sb)
	if p := sb.Spec.IdlePolicy; p == nil || p.TimeoutSeconds != 10 || p.ResumeOnTraffic != nil || !p.Resumes() {
		t.Errorf("idlePolicy %+v", p)
	}
}

func TestIdlePolicyResumes(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name string
		p    *v1beta1.IdlePolicy
		want bool
	}{
		{"no policy", nil, false},
		{"default", &v1beta1.IdlePolicy{TimeoutSeconds: 1}, true},
		{"explicit true", &v1beta1.IdlePolicy{TimeoutSeconds: 1, ResumeOnTraffic: &yes}, true},
		{"false", &v1beta1.IdlePolicy{TimeoutSeconds: 1, ResumeOnTraffic: &no}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Resumes(); got != tc.want {
				t.Errorf("Resumes = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeepCopy(t *testing.T) {
	apitest.DeepCopyCheck(t, func() *v1beta1.Sandbox { return &v1beta1.Sandbox{} },
		func(s *v1beta1.Sandbox) *v1beta1.Sandbox { return s.DeepCopy() })
	apitest.DeepCopyCheck(t, func() *v1beta1.SandboxList { return &v1beta1.SandboxList{} },
		func(s *v1beta1.SandboxList) *v1beta1.SandboxList { return s.DeepCopy() })
}

func TestScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		obj  runtime.Object
		kind string
	}{
		{&v1beta1.Sandbox{}, "Sandbox"},
		{&v1beta1.SandboxList{}, "SandboxList"},
	}
	for _, tc := range tests {
		gvks, _, err := s.ObjectKinds(tc.obj)
		if err != nil || len(gvks) != 1 || gvks[0].Kind != tc.kind ||
			gvks[0].GroupVersion() != v1beta1.SchemeGroupVersion {
			t.Errorf("%T: kinds %v, err %v", tc.obj, gvks, err)
		}
	}
}

func TestHelpers(t *testing.T) {
	tests := []struct {
		name    string
		sb      v1beta1.Sandbox
		podName string
		ready   bool
	}{
		{"no status", v1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, "a", false},
		{"annotated pod, ready", v1beta1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{v1beta1.AnnotationPodName: "pool-x"}},
			Status: v1beta1.SandboxStatus{Conditions: []metav1.Condition{
				{Type: v1beta1.ConditionSuspended, Status: metav1.ConditionFalse},
				{Type: v1beta1.ConditionReady, Status: metav1.ConditionTrue}}},
		}, "pool-x", true},
		{"not ready", v1beta1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Status: v1beta1.SandboxStatus{Conditions: []metav1.Condition{
				{Type: v1beta1.ConditionReady, Status: metav1.ConditionFalse}}},
		}, "b", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.sb.PodName(); got != tc.podName {
				t.Errorf("PodName = %q, want %q", got, tc.podName)
			}
			if got := tc.sb.IsReady(); got != tc.ready {
				t.Errorf("IsReady = %v, want %v", got, tc.ready)
			}
		})
	}
}
