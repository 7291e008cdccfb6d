package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
)

// fakeSandboxd answers run with "ok"; the first failFirst requests get the API
// server's "pod not found" (what the pod proxy says once the pod is gone).
func fakeSandboxd(t *testing.T, failFirst int32) (*httptest.Server, int, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= failFirst {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","code":404,"message":"pods \"sb-pod\" not found"}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":1,"exit_code":0,"stdout":"b2sK","stderr":""}`))
	}))
	t.Cleanup(srv.Close)
	_, ps, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(ps)
	return srv, port, &n
}

func suspendedSandbox(policy *agentsv1beta1.IdlePolicy) *agentsv1beta1.Sandbox {
	sb := readySandbox("sb", "127.0.0.1")
	sb.Generation = 2
	sb.Annotations[agentsv1beta1.AnnotationIdleSuspendedGeneration] = "2"
	sb.Spec.OperatingMode = agentsv1beta1.OperatingModeSuspended
	sb.Spec.IdlePolicy = policy
	sb.Status.PodIPs = nil
	sb.Status.Conditions = []metav1.Condition{cond("Ready", "False", "SandboxSuspended", 2),
		cond("Suspended", "True", "IdleTimeout", 2)}
	return sb
}

// resumingController makes a patch to Running produce a Ready Sandbox on 127.0.0.1
// (after a not-yet-ready status, as the real controller writes) and records patches.
func resumingController(k *fakeKube, patches *atomic.Int32) {
	k.sbx.onPatch = func(r *fakeRes[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList], s *agentsv1beta1.Sandbox) {
		patches.Add(1)
		if s.Spec.OperatingMode != agentsv1beta1.OperatingModeRunning {
			return
		}
		gen := s.Generation
		r.update(s.Name, func(s *agentsv1beta1.Sandbox) {
			s.Status.Conditions = []metav1.Condition{cond("Ready", "False", "DependenciesNotReady", gen)}
		})
		r.update(s.Name, func(s *agentsv1beta1.Sandbox) {
			s.Status.PodIPs = []string{"127.0.0.1"}
			s.Status.Conditions = []metav1.Condition{cond("Ready", "True", "DependenciesReady", gen)}
		})
	}
}

func idleClient(t *testing.T, k *fakeKube, mode Mode, port int, router string) *Client {
	t.Helper()
	c, err := NewClient(Options{Namespace: "ns", kube: k, ReadyTimeout: 2 * time.Second,
		Connection: Connection{Mode: mode, Port: port, RouterURL: router}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestResumeOnTraffic(t *testing.T) {
	no := false
	tests := []struct {
		name      string
		policy    *agentsv1beta1.IdlePolicy
		wantErr   error
		hasPolicy bool
	}{
		{"default policy resumes", &agentsv1beta1.IdlePolicy{TimeoutSeconds: 10}, nil, false},
		{"resumeOnTraffic false", &agentsv1beta1.IdlePolicy{TimeoutSeconds: 10, ResumeOnTraffic: &no}, ErrSuspended, true},
		{"no policy", nil, ErrSuspended, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKube()
			k.sbx.Add(suspendedSandbox(tc.policy))
			var patches atomic.Int32
			resumingController(k, &patches)
			_, port, calls := fakeSandboxd(t, 0)
			c := idleClient(t, k, ModeDirect, port, "")
			h, err := c.Attach(context.Background(), "sb")
			if err != nil {
				t.Fatal(err)
			}
			r, err := h.Run(context.Background(), "echo ok")
			if tc.wantErr != nil {
				var se *SuspendedError
				if !errors.Is(err, tc.wantErr) || !errors.As(err, &se) || se.HasPolicy != tc.hasPolicy {
					t.Fatalf("Run: %v, want %v (policy %v)", err, tc.wantErr, tc.hasPolicy)
				}
				if patches.Load() != 0 || calls.Load() != 0 {
					t.Errorf("%d patches, %d calls; want none", patches.Load(), calls.Load())
				}
				return
			}
			if err != nil || r.Stdout != "ok\n" {
				t.Fatalf("Run: %+v, %v", r, err)
			}
			st := k.sbx.Stored("sb")
			if st.Spec.OperatingMode != agentsv1beta1.OperatingModeRunning || patches.Load() != 1 {
				t.Errorf("mode %q after %d patches", st.Spec.OperatingMode, patches.Load())
			}
			if _, ok := st.Annotations[agentsv1beta1.AnnotationIdleSuspendedGeneration]; ok {
				t.Errorf("idle-suspended-generation not cleared: %v", st.Annotations)
			}
			if h.PodIP() != "127.0.0.1" || !h.IsReady() {
				t.Errorf("handle not refreshed: ip %q ready %v", h.PodIP(), h.IsReady())
			}
		})
	}
}

// A handle read while Ready learns of a later suspend: by age (re-read before the
// call) or by a failed call ("pod not found" from the pod proxy).
func TestResumeStaleHandle(t *testing.T) {
	tests := []struct {
		name      string
		age       time.Duration
		failFirst int32
		wantCalls int32
	}{
		{"old object is re-read", time.Minute, 0, 1},
		{"failed call re-reads", 0, 1, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKube()
			k.sbx.Add(readySandbox("sb", "127.0.0.1"))
			_, port, calls := fakeSandboxd(t, tc.failFirst)
			c := idleClient(t, k, ModeDirect, port, "")
			h, err := c.Attach(context.Background(), "sb")
			if err != nil {
				t.Fatal(err)
			}
			k.sbx.Add(suspendedSandbox(&agentsv1beta1.IdlePolicy{TimeoutSeconds: 10}))
			var patches atomic.Int32
			resumingController(k, &patches)
			h.mu.Lock()
			h.readAt = time.Now().Add(-tc.age)
			h.mu.Unlock()
			if r, err := h.Run(context.Background(), "echo ok"); err != nil || r.Stdout != "ok\n" {
				t.Fatalf("Run: %+v, %v", r, err)
			}
			if patches.Load() != 1 || calls.Load() != tc.wantCalls {
				t.Errorf("%d patches, %d calls; want 1, %d", patches.Load(), calls.Load(), tc.wantCalls)
			}
		})
	}
}

// A run whose failure may follow a request sandboxd took (the pod proxy's 503 after a
// reset) is neither retried nor replayed after a resume; one whose dial failed is.
func TestRunNotSentTwice(t *testing.T) {
	tests := []struct {
		name      string
		message   string
		wantErr   bool
		wantCalls int32
	}{
		{"reset after the write", "error trying to reach service: read tcp: connection reset by peer", true, 2},
		{"dial failed", "error trying to reach service: dial tcp 10.0.0.1:8080: connect: connection refused",
			false, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 2 { // the call after the warm-up
					w.WriteHeader(http.StatusServiceUnavailable)
					b, _ := json.Marshal(map[string]any{"kind": "Status", "code": 503, "message": tc.message})
					_, _ = w.Write(b)
					return
				}
				_, _ = w.Write([]byte(`{"id":1,"exit_code":0,"stdout":"b2sK","stderr":""}`))
			}))
			t.Cleanup(srv.Close)
			_, ps, _ := net.SplitHostPort(srv.Listener.Addr().String())
			port, _ := strconv.Atoi(ps)
			k := newFakeKube()
			k.sbx.Add(readySandbox("sb", "127.0.0.1"))
			c := idleClient(t, k, ModeDirect, port, "")
			h, err := c.Attach(context.Background(), "sb")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.Run(context.Background(), "warm"); err != nil { // caches the Ready object
				t.Fatal(err)
			}
			k.sbx.Add(suspendedSandbox(&agentsv1beta1.IdlePolicy{TimeoutSeconds: 10}))
			var patches atomic.Int32
			resumingController(k, &patches)
			_, err = h.Run(context.Background(), "echo once")
			if (err != nil) != tc.wantErr || n.Load() != tc.wantCalls || patches.Load() != 0 {
				t.Fatalf("Run: %v; %d calls, %d patches; want error %v, %d calls, 0 patches", err,
					n.Load(), patches.Load(), tc.wantErr, tc.wantCalls)
			}
		})
	}
}

func TestNeverReached(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"router refusal", &HTTPError{StatusCode: 503, Code: routerCode, Message: "not ready"}, true},
		{"router connect", &HTTPError{StatusCode: 502, Code: routerCode, Message: "Could not connect to x"}, true},
		{"router write", &HTTPError{StatusCode: 502, Code: routerCode, Message: "Could not write to x"}, false},
		{"pod not found", &HTTPError{StatusCode: 404, Code: apiServerCode, Message: "pods not found"}, true},
		{"proxy dial", &HTTPError{StatusCode: 503, Code: apiServerCode, Message: "dial tcp: i/o timeout"}, true},
		{"proxy reset", &HTTPError{StatusCode: 503, Code: apiServerCode, Message: "read: connection reset"}, false},
		{"sandboxd", &HTTPError{StatusCode: 503, Code: "UNAVAILABLE"}, false},
		{"not ready", fmt.Errorf("x: %w", ErrNotReady), true},
		{"cut", fmt.Errorf("x: %w: %w", ErrUnavailable, io.ErrUnexpectedEOF), false},
	}
	for _, tc := range tests {
		if got := neverReached(tc.err); got != tc.want {
			t.Errorf("%s: neverReached = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Through the router the SDK neither reads nor patches: the router holds the request.
func TestRouterModeLeavesResumeToRouter(t *testing.T) {
	k := newFakeKube()
	k.sbx.Add(suspendedSandbox(&agentsv1beta1.IdlePolicy{TimeoutSeconds: 10}))
	var patches atomic.Int32
	resumingController(k, &patches)
	srv, _, calls := fakeSandboxd(t, 0)
	c := idleClient(t, k, ModeRouter, 0, srv.URL)
	h, err := c.Attach(context.Background(), "sb")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Run(context.Background(), "echo ok"); err != nil {
		t.Fatal(err)
	}
	if patches.Load() != 0 || calls.Load() != 1 {
		t.Errorf("%d patches, %d calls", patches.Load(), calls.Load())
	}
}

// The wait after a resume is bounded by the call's context.
func TestResumeBoundedByContext(t *testing.T) {
	k := newFakeKube()
	k.sbx.Add(suspendedSandbox(&agentsv1beta1.IdlePolicy{TimeoutSeconds: 10})) // no controller: never Ready
	c := idleClient(t, k, ModeDirect, 1, "")
	h, err := c.Attach(context.Background(), "sb")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := h.Run(ctx, "true"); !errors.Is(err, ErrTimeout) {
		t.Errorf("Run: %v, want ErrTimeout", err)
	}
}

func TestCreateOptionsEnvFromAndIdle(t *testing.T) {
	k := newFakeKube()
	var claim *extv1beta1.SandboxClaim
	k.clm.onCreate = func(_ *fakeRes[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList], c *extv1beta1.SandboxClaim) {
		claim = c
	}
	c := newTestClient(t, k)
	ctx := context.Background()
	refs := map[string]EnvSource{"API_KEY": EnvFromSecret("creds", "api-key"), "MODE": EnvFromConfigMap("cfg", "mode")}
	if _, err := c.CreateSandbox(ctx, "pool", WithoutWait(), WithEnvFrom(refs), WithEnv(map[string]string{"P": "v"})); err != nil {
		t.Fatal(err)
	}
	want := []extv1beta1.EnvVar{
		{Name: "API_KEY", ValueFrom: &extv1beta1.EnvVarSource{SecretKeyRef: &extv1beta1.KeySelector{Name: "creds", Key: "api-key"}}},
		{Name: "MODE", ValueFrom: &extv1beta1.EnvVarSource{ConfigMapKeyRef: &extv1beta1.KeySelector{Name: "cfg", Key: "mode"}}},
		{Name: "P", Value: "v"},
	}
	if len(claim.Spec.Env) != len(want) {
		t.Fatalf("env %+v", claim.Spec.Env)
	}
	for i := range want {
		g, w := claim.Spec.Env[i], want[i]
		if g.Name != w.Name || g.Value != w.Value || (g.ValueFrom == nil) != (w.ValueFrom == nil) ||
			(w.ValueFrom != nil && (!eqRef(g.ValueFrom.SecretKeyRef, w.ValueFrom.SecretKeyRef) ||
				!eqRef(g.ValueFrom.ConfigMapKeyRef, w.ValueFrom.ConfigMapKeyRef))) {
			t.Errorf("env[%d] = %+v, want %+v", i, g, w)
		}
	}
	if _, err := c.CreateSandbox(ctx, "pool", WithIdlePolicy(time.Minute, true)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("claim with idle policy: %v", err)
	}
	spec := agentsv1beta1.SandboxSpec{PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c"}}}}}
	h, err := c.CreateSandboxFromSpec(ctx, spec, WithoutWait(), WithEnvFrom(refs), WithIdlePolicy(1500*time.Millisecond, false))
	if err != nil {
		t.Fatal(err)
	}
	sb := k.sbx.Stored(h.Name())
	env := sb.Spec.PodTemplate.Spec.Containers[0].Env
	if len(env) != 2 || env[0].ValueFrom.SecretKeyRef == nil || env[0].ValueFrom.SecretKeyRef.Name != "creds" ||
		env[1].ValueFrom.ConfigMapKeyRef == nil || env[1].ValueFrom.ConfigMapKeyRef.Key != "mode" {
		t.Errorf("container env %+v", env)
	}
	if p := sb.Spec.IdlePolicy; p == nil || p.TimeoutSeconds != 2 || p.Resumes() {
		t.Errorf("idle policy %+v", p)
	}
	if _, err := c.CreateSandboxFromSpec(ctx, spec, WithIdlePolicy(0, true)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("zero timeout: %v", err)
	}
}

func TestCreateFromTemplateCopiesIdlePolicy(t *testing.T) {
	k := newFakeKube()
	k.tpl.Add(&extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"},
		Spec: extv1beta1.SandboxTemplateSpec{IdlePolicy: &agentsv1beta1.IdlePolicy{TimeoutSeconds: 30}}})
	c := newTestClient(t, k)
	h, err := c.CreateSandboxFromTemplate(context.Background(), "t", WithoutWait())
	if err != nil {
		t.Fatal(err)
	}
	if p := k.sbx.Stored(h.Name()).Spec.IdlePolicy; p == nil || p.TimeoutSeconds != 30 {
		t.Errorf("idle policy %+v", p)
	}
}

func eqRef(a, b *extv1beta1.KeySelector) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// A call that finds another call resuming the Sandbox waits for it only within its own
// context: it returns at its deadline while the other resume goes on.
func TestWakeWaitBoundedByContext(t *testing.T) {
	k := newFakeKube()
	k.sbx.Add(suspendedSandbox(&agentsv1beta1.IdlePolicy{TimeoutSeconds: 10}))
	var patches atomic.Int32
	k.sbx.onPatch = func(*fakeRes[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList], *agentsv1beta1.Sandbox) {
		patches.Add(1) // no controller: Ready comes when the test says
	}
	_, port, _ := fakeSandboxd(t, 0)
	c := idleClient(t, k, ModeDirect, port, "")
	h, err := c.Attach(context.Background(), "sb")
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer acancel()
	aDone := make(chan error, 1)
	go func() { _, err := h.Run(actx, "echo ok"); aDone <- err }()
	eventually(t, "the first call's resume patch", func() bool { return patches.Load() == 1 })
	bctx, bcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer bcancel()
	_, err = h.Run(bctx, "echo ok")
	select {
	case aerr := <-aDone:
		t.Fatalf("the second call returned (%v) only after the first one ended (%v)", err, aerr)
	default:
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrTimeout) {
		t.Errorf("second call: %v, want its deadline", err)
	}
	k.sbx.mu.Lock()
	k.sbx.update("sb", func(s *agentsv1beta1.Sandbox) {
		s.Status.PodIPs = []string{"127.0.0.1"}
		s.Status.Conditions = []metav1.Condition{cond("Ready", "True", "DependenciesReady", s.Generation)}
	})
	k.sbx.mu.Unlock()
	if err := <-aDone; err != nil {
		t.Errorf("first call: %v", err)
	}
}

// AttachClaim of an idle-suspended claim (bound, Ready=False SandboxSuspended) returns
// the handle at once; its first call resumes the Sandbox when the policy allows.
func TestAttachClaimSuspended(t *testing.T) {
	no := false
	tests := []struct {
		name    string
		policy  *agentsv1beta1.IdlePolicy
		wantRun error
		patches int32
	}{
		{"resumes on traffic", &agentsv1beta1.IdlePolicy{TimeoutSeconds: 10}, nil, 1},
		{"resumeOnTraffic false", &agentsv1beta1.IdlePolicy{TimeoutSeconds: 10, ResumeOnTraffic: &no}, ErrSuspended, 0},
		{"no policy", nil, ErrSuspended, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKube()
			k.sbx.Add(suspendedSandbox(tc.policy))
			k.clm.Add(&extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-1", Namespace: "ns"},
				Status: extv1beta1.SandboxClaimStatus{Sandbox: extv1beta1.SandboxReference{Name: "sb"},
					Conditions: []metav1.Condition{cond("Ready", "False", "SandboxSuspended", 1)}}})
			var patches atomic.Int32
			resumingController(k, &patches)
			_, port, _ := fakeSandboxd(t, 0)
			c := idleClient(t, k, ModeDirect, port, "")
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			h, err := c.AttachClaim(ctx, "claim-1")
			if err != nil {
				t.Fatalf("AttachClaim: %v", err)
			}
			if h.Name() != "sb" || h.ClaimName() != "claim-1" || h.IsReady() {
				t.Errorf("handle: name %q claim %q ready %v", h.Name(), h.ClaimName(), h.IsReady())
			}
			r, err := h.Run(context.Background(), "echo ok")
			if !errors.Is(err, tc.wantRun) || (tc.wantRun == nil && (err != nil || r.Stdout != "ok\n")) {
				t.Errorf("Run: %v, want %v", err, tc.wantRun)
			}
			if patches.Load() != tc.patches {
				t.Errorf("%d patches, want %d", patches.Load(), tc.patches)
			}
		})
	}
}

// TestRouterSuspendedIs409: in router mode the router's 409 for a suspended Sandbox
// whose idle policy does not resume it on traffic is a *SuspendedError (ErrSuspended),
// as direct and pod-proxy modes report it, and still the router's *HTTPError; other
// 409s are not.
func TestRouterSuspendedIs409(t *testing.T) {
	routerText := `{"detail":"Sandbox ns/sb is suspended and its idle policy does not resume it on traffic ` +
		`(spec.idlePolicy.resumeOnTraffic is false); set spec.operatingMode to Running to resume it."}`
	tests := []struct {
		name      string
		body      string
		suspended bool
	}{
		{"the router's suspended 409", routerText, true},
		{"another router 409", `{"detail":"conflict"}`, false},
		{"sandboxd's 409", `{"code":"CONFLICT","message":"x is suspended"}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				answer(w, http.StatusConflict, tc.body)
			}))
			defer srv.Close()
			k := newFakeKube()
			k.sbx.Add(readySandbox("sb", "10.0.0.1"))
			c, err := NewClient(Options{Namespace: "ns", kube: k, Connection: Connection{RouterURL: srv.URL}})
			if err != nil {
				t.Fatal(err)
			}
			sb, err := c.Attach(context.Background(), "sb")
			if err != nil {
				t.Fatal(err)
			}
			_, err = sb.Run(context.Background(), "true")
			var se *SuspendedError
			var he *HTTPError
			if errors.As(err, &se) != tc.suspended || errors.Is(err, ErrSuspended) != tc.suspended ||
				!errors.As(err, &he) || he.StatusCode != http.StatusConflict || !errors.Is(err, ErrConflict) {
				t.Fatalf("Run: %T %v; want suspended %v, a 409 *HTTPError", err, err, tc.suspended)
			}
			if tc.suspended && (se.Namespace != "ns" || se.Name != "sb" || !se.HasPolicy) {
				t.Errorf("SuspendedError %+v", se)
			}
		})
	}
}
