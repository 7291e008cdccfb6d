package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
)

func newTestClient(t *testing.T, k *fakeKube) *Client {
	t.Helper()
	c, err := NewClient(Options{Namespace: "ns", kube: k, Connection: Connection{Mode: ModeDirect},
		ReadyTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func cond(typ, status, reason string, gen int64) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason,
		ObservedGeneration: gen, LastTransitionTime: metav1.Now()}
}

func readySandbox(name string, ip string) *agentsv1beta1.Sandbox {
	return &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Generation: 1,
			Annotations: map[string]string{agentsv1beta1.AnnotationPodName: name + "-pod"}},
		Status: agentsv1beta1.SandboxStatus{PodIPs: []string{ip},
			Conditions: []metav1.Condition{cond("Ready", "True", "DependenciesReady", 1)}},
	}
}

// claimStep is one status write of the simulated claim controller.
type claimStep func(k *fakeKube, r *fakeRes[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList], name string)

func setClaimReady(status, reason, sandbox string) claimStep {
	return func(k *fakeKube, r *fakeRes[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList], name string) {
		r.update(name, func(c *extv1beta1.SandboxClaim) {
			c.Status.Conditions = []metav1.Condition{cond("Ready", status, reason, 1)}
			c.Status.Sandbox.Name = sandbox
		})
	}
}

func bindWarm(sandbox, ip string) claimStep {
	return func(k *fakeKube, r *fakeRes[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList], name string) {
		k.sbx.Add(readySandbox(sandbox, ip))
		setClaimReady("True", "DependenciesReady", sandbox)(k, r, name)
	}
}

// failSandboxGets makes the next Sandbox GETs fail with errs, in turn.
func failSandboxGets(errs ...error) claimStep {
	return func(k *fakeKube, _ *fakeRes[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList], _ string) {
		k.sbx.mu.Lock()
		defer k.sbx.mu.Unlock()
		k.sbx.getErrs = append(k.sbx.getErrs, errs...)
	}
}

func deleteClaim() claimStep {
	return func(k *fakeKube, r *fakeRes[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList], name string) {
		r.remove(name)
	}
}

func TestCreateSandbox(t *testing.T) {
	tests := []struct {
		name      string
		steps     []claimStep
		gone      int // 410 answers to the first watches
		opts      []CreateOption
		timeout   time.Duration
		wantErr   []error
		wantClaim bool // claim still exists afterwards
	}{
		{name: "warm adoption", steps: []claimStep{bindWarm("pool-abc", "10.1.0.7")}, wantClaim: true},
		{name: "transient reasons first", steps: []claimStep{
			setClaimReady("False", "SandboxMissing", ""),
			setClaimReady("False", "SandboxNotReady", "pool-x"),
			bindWarm("pool-x", "10.1.0.8")}, wantClaim: true},
		{name: "ready but unbound is not enough", steps: []claimStep{
			setClaimReady("True", "DependenciesReady", ""), bindWarm("pool-y", "10.1.0.9")}, wantClaim: true},
		{name: "watch expired then ready", gone: 2, steps: []claimStep{bindWarm("pool-z", "10.1.0.10")}, wantClaim: true},
		// before: one 500 reading the bound Sandbox failed the create, which deleted the claim
		{name: "transient errors reading the bound Sandbox", steps: []claimStep{
			failSandboxGets(apierrors.NewInternalError(errors.New("etcd")), apierrors.NewServiceUnavailable("later")),
			bindWarm("pool-t", "10.1.0.11")}, wantClaim: true},
		{name: "template not found", steps: []claimStep{setClaimReady("False", "TemplateNotFound", "")},
			wantErr: []error{ErrTemplateNotFound, ErrClaimFailed}},
		{name: "warm pool not found", steps: []claimStep{setClaimReady("False", "WarmPoolNotFound", "")},
			wantErr: []error{ErrWarmPoolNotFound, ErrClaimFailed}},
		{name: "invalid metadata", steps: []claimStep{setClaimReady("False", "InvalidMetadata", "")},
			wantErr: []error{ErrClaimFailed}},
		{name: "expired", steps: []claimStep{setClaimReady("False", "SandboxExpired", "x")},
			wantErr: []error{ErrClaimFailed, ErrSandboxFailed}},
		{name: "deleted while waiting", steps: []claimStep{deleteClaim()},
			wantErr: []error{ErrSandboxDeleted, ErrNotFound}},
		{name: "never ready", timeout: 150 * time.Millisecond, steps: []claimStep{setClaimReady("False", "SandboxNotReady", "")},
			wantErr: []error{ErrTimeout, context.DeadlineExceeded}},
		{name: "keep on failure", opts: []CreateOption{WithKeepOnFailure()},
			steps: []claimStep{setClaimReady("False", "InvalidMetadata", "")}, wantErr: []error{ErrClaimFailed}, wantClaim: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKube()
			k.clm.goneWatches = tc.gone
			var created string
			k.clm.onCreate = func(r *fakeRes[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList], c *extv1beta1.SandboxClaim) {
				created = c.Name
				for _, s := range tc.steps {
					s(k, r, c.Name)
				}
			}
			c := newTestClient(t, k)
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			sb, err := c.CreateSandbox(ctx, "pool", tc.opts...)
			for _, w := range tc.wantErr {
				if !errors.Is(err, w) {
					t.Errorf("error %v does not match %v", err, w)
				}
			}
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("CreateSandbox: %v", err)
				}
				if sb.ClaimName() != created || sb.Name() == "" || sb.PodIP() == "" ||
					sb.PodName() != sb.Name()+"-pod" || !sb.IsReady() {
					t.Errorf("handle: claim %q name %q ip %q pod %q", sb.ClaimName(), sb.Name(), sb.PodIP(), sb.PodName())
				}
			}
			if got := k.clm.Has(created); got != tc.wantClaim {
				t.Errorf("claim exists = %v, want %v", got, tc.wantClaim)
			}
		})
	}
}

func TestCreateSandboxClaimShape(t *testing.T) {
	k := newFakeKube()
	var got *extv1beta1.SandboxClaim
	k.clm.onCreate = func(r *fakeRes[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList], c *extv1beta1.SandboxClaim) {
		got = c
	}
	c := newTestClient(t, k)
	before := time.Now()
	sb, err := c.CreateSandbox(context.Background(), "pool-a", WithoutWait(), WithLabels(map[string]string{"team": "a"}),
		WithPodMetadata(map[string]string{"sandbox.users.io/x": "1"}, nil), WithShutdownAfter(time.Hour),
		WithEnv(map[string]string{"K": "V"}))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^sandbox-claim-[0-9a-f]{8}$`).MatchString(got.Name) || got.GenerateName != "" ||
		sb.ClaimName() != got.Name {
		t.Errorf("name %q generateName %q", got.Name, got.GenerateName)
	}
	if got.Labels[agentsv1beta1.LabelCreatedBy] != "go-client" || got.Labels["team"] != "a" {
		t.Errorf("labels %v", got.Labels)
	}
	ts, err := time.Parse(time.RFC3339Nano, got.Annotations[agentsv1beta1.AnnotationClientFirstRequestedAt])
	if err != nil || ts.Before(before.Add(-time.Second)) || ts.After(time.Now().Add(time.Second)) {
		t.Errorf("client-first-requested-at %q: %v", got.Annotations[agentsv1beta1.AnnotationClientFirstRequestedAt], err)
	}
	if got.Spec.WarmPoolRef.Name != "pool-a" || got.Spec.AdditionalPodMetadata.Labels["sandbox.users.io/x"] != "1" ||
		len(got.Spec.Env) != 1 || got.Spec.Lifecycle == nil || got.Spec.Lifecycle.ShutdownPolicy != "Delete" {
		t.Errorf("spec %+v", got.Spec)
	}
	if _, err := sb.Run(context.Background(), "true"); !errors.Is(err, ErrNotReady) {
		t.Errorf("Run on an unbound claim: %v, want ErrNotReady", err)
	}
	if _, err := c.CreateSandbox(context.Background(), ""); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("empty pool: %v", err)
	}
}

func TestAttachAndList(t *testing.T) {
	k := newFakeKube()
	c := newTestClient(t, k)
	ctrl := true
	sb := readySandbox("sb-1", "10.0.0.1")
	sb.Labels = map[string]string{agentsv1beta1.LabelCreatedBy: "go-client"}
	sb.OwnerReferences = []metav1.OwnerReference{{Kind: "SandboxClaim", Name: "claim-1", Controller: &ctrl}}
	k.sbx.Add(sb)
	k.sbx.Add(readySandbox("sb-2", "10.0.0.2"))
	k.clm.Add(&extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-1", Namespace: "ns"},
		Status: extv1beta1.SandboxClaimStatus{Sandbox: extv1beta1.SandboxReference{Name: "sb-1"},
			Conditions: []metav1.Condition{cond("Ready", "True", "DependenciesReady", 1)}}})
	ctx := context.Background()

	h, err := c.Attach(ctx, "sb-1")
	if err != nil || h.ClaimName() != "claim-1" || h.PodIP() != "10.0.0.1" {
		t.Fatalf("Attach: %v %+v", err, h)
	}
	h2, err := c.AttachClaim(ctx, "claim-1")
	if err != nil || h2.Name() != "sb-1" {
		t.Fatalf("AttachClaim: %v", err)
	}
	if _, err := c.Attach(ctx, "missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Attach missing: %v", err)
	}
	tests := []struct {
		opts ListOptions
		want int
	}{{ListOptions{}, 2}, {ListOptions{OnlyMine: true}, 1}}
	for _, tc := range tests {
		l, err := c.ListSandboxes(ctx, tc.opts)
		if err != nil || len(l) != tc.want {
			t.Errorf("ListSandboxes(%+v) = %d, %v; want %d", tc.opts, len(l), err, tc.want)
		}
	}
	if cl, err := c.ListClaims(ctx, ListOptions{}); err != nil || len(cl) != 1 {
		t.Errorf("ListClaims = %d, %v", len(cl), err)
	}
	if err := h.Delete(ctx); err != nil || k.clm.Has("claim-1") {
		t.Errorf("Delete: %v, claim exists %v", err, k.clm.Has("claim-1"))
	}
	if _, err := h.Run(ctx, "true"); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Delete: %v", err)
	}
	if err := h.Delete(ctx); err != nil {
		t.Errorf("second Delete: %v", err)
	}
}

func TestCreateFromTemplate(t *testing.T) {
	k := newFakeKube()
	svc := true
	k.tpl.Add(&extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "py", Namespace: "ns"},
		Spec: extv1beta1.SandboxTemplateSpec{Service: &svc}})
	k.sbx.onCreate = func(r *fakeRes[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList], s *agentsv1beta1.Sandbox) {
		r.update(s.Name, func(s *agentsv1beta1.Sandbox) {
			s.Status.Conditions = []metav1.Condition{cond("Ready", "False", "DependenciesNotReady", 1)}
		})
		r.update(s.Name, func(s *agentsv1beta1.Sandbox) {
			s.Status.Conditions = []metav1.Condition{cond("Ready", "True", "DependenciesReady", 1)}
			s.Status.PodIPs = []string{"fd00::5", "10.2.0.5"}
		})
	}
	c := newTestClient(t, k)
	sb, err := c.CreateSandboxFromTemplate(context.Background(), "py", WithEnv(map[string]string{"A": "1"}))
	if err == nil {
		t.Fatalf("a template without containers must not take WithEnv")
	}
	sb, err = c.CreateSandboxFromTemplate(context.Background(), "py")
	if err != nil {
		t.Fatal(err)
	}
	obj := k.sbx.Stored(sb.Name())
	if !strings.HasPrefix(sb.Name(), "sandbox-") || obj.Labels[agentsv1beta1.LabelCreatedBy] != "go-client" ||
		obj.Spec.Service == nil || !*obj.Spec.Service || obj.Spec.PodTemplate.Spec.AutomountServiceAccountToken == nil ||
		*obj.Spec.PodTemplate.Spec.AutomountServiceAccountToken {
		t.Errorf("created %+v", obj)
	}
	if sb.PodIP() != "10.2.0.5" || sb.ClaimName() != "" {
		t.Errorf("ip %q claim %q", sb.PodIP(), sb.ClaimName())
	}
	if _, err := c.CreateSandboxFromTemplate(context.Background(), "nope"); !errors.Is(err, ErrTemplateNotFound) {
		t.Errorf("missing template: %v", err)
	}
}

func TestCreateFromSpecFailureDeletes(t *testing.T) {
	k := newFakeKube()
	k.sbx.onCreate = func(r *fakeRes[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList], s *agentsv1beta1.Sandbox) {
		r.update(s.Name, func(s *agentsv1beta1.Sandbox) {
			s.Status.Conditions = []metav1.Condition{cond("Ready", "False", "PodFailed", 1)}
		})
	}
	c := newTestClient(t, k)
	_, err := c.CreateSandboxFromSpec(context.Background(), agentsv1beta1.SandboxSpec{}, WithName("fixed"))
	var sf *SandboxFailedError
	if !errors.Is(err, ErrSandboxFailed) || !errors.As(err, &sf) || sf.Reason != "PodFailed" {
		t.Fatalf("error %v", err)
	}
	if k.sbx.Has("fixed") {
		t.Error("failed Sandbox was not deleted")
	}
}

func TestSuspendResume(t *testing.T) {
	k := newFakeKube()
	k.sbx.Add(readySandbox("sb", "10.0.0.1"))
	k.sbx.onPatch = func(r *fakeRes[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList], s *agentsv1beta1.Sandbox) {
		gen := s.Generation
		if s.Spec.OperatingMode == agentsv1beta1.OperatingModeSuspended {
			r.update(s.Name, func(s *agentsv1beta1.Sandbox) {
				s.Status.PodIPs = nil
				s.Status.Conditions = []metav1.Condition{cond("Ready", "False", "SandboxSuspended", gen),
					cond("Suspended", "True", "PodTerminated", gen)}
			})
			return
		}
		// A stale Ready=True of the old generation first, then the real one.
		r.update(s.Name, func(s *agentsv1beta1.Sandbox) {
			s.Status.PodIPs = []string{"10.0.0.1"}
			s.Status.Conditions = []metav1.Condition{cond("Ready", "True", "DependenciesReady", gen-1)}
		})
		r.update(s.Name, func(s *agentsv1beta1.Sandbox) {
			s.Status.PodIPs = []string{"10.0.0.99"}
			s.Status.Conditions = []metav1.Condition{cond("Ready", "True", "DependenciesReady", gen),
				cond("Suspended", "False", "NotSuspended", gen)}
		})
	}
	c := newTestClient(t, k)
	ctx := context.Background()
	h, err := c.Attach(ctx, "sb")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Suspend(ctx); err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	if h.IsReady() || h.PodIP() != "" {
		t.Errorf("after Suspend: ready %v ip %q", h.IsReady(), h.PodIP())
	}
	if err := h.WaitReady(ctx); !errors.Is(err, ErrSuspended) {
		t.Errorf("WaitReady on a suspended sandbox: %v", err)
	}
	if err := h.Resume(ctx); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if h.PodIP() != "10.0.0.99" {
		t.Errorf("after Resume: ip %q, want the new pod's", h.PodIP())
	}
}

func TestWaitDoesNotLeakGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	k := newFakeKube()
	c := newTestClient(t, k)
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		_, err := c.CreateSandbox(ctx, "pool")
		cancel()
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("want timeout, got %v", err)
		}
	}
	c.CloseIdleConnections() // the hand-out stream would run on for handoutStreamIdle
	eventually(t, "the hand-out stream's watch stopped", func() bool {
		k.sbx.mu.Lock()
		defer k.sbx.mu.Unlock()
		return len(k.sbx.watchers) == 0
	})
	waitGoroutines(t, base)
	k.clm.mu.Lock()
	n := len(k.clm.watchers)
	k.clm.mu.Unlock()
	if n != 0 {
		t.Errorf("%d watches were not stopped", n)
	}
}

// waitGoroutines fails when the goroutine count does not come back to base.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines: %d > %d\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func countGoroutines() int { return runtime.NumGoroutine() }

// TestWaitErrorsMatchSentinels: an API error that ends a wait (a refused GET or WATCH)
// matches the SDK's sentinel and keeps its client-go type.
func TestWaitErrorsMatchSentinels(t *testing.T) {
	gr := extv1beta1.Resource("sandboxclaims")
	forbidden := apierrors.NewForbidden(gr, "claim-1", errors.New("no watch"))
	unauthorized := apierrors.NewUnauthorized("who are you")
	attach := func(c *Client, ctx context.Context) error { _, err := c.AttachClaim(ctx, "claim-1"); return err }
	create := func(c *Client, ctx context.Context) error { _, err := c.CreateSandbox(ctx, "pool"); return err }
	tests := []struct {
		name       string
		get, watch error
		op         func(*Client, context.Context) error
		want       error
		is         func(error) bool
	}{
		{"AttachClaim, watch forbidden", nil, forbidden, attach, ErrForbidden, apierrors.IsForbidden},
		{"AttachClaim, watch unauthorized", nil, unauthorized, attach, ErrUnauthorized, apierrors.IsUnauthorized},
		{"AttachClaim, get forbidden", forbidden, nil, attach, ErrForbidden, apierrors.IsForbidden},
		{"CreateSandbox (WaitForClaimReady), watch forbidden", nil, forbidden, create, ErrForbidden,
			apierrors.IsForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKube()
			k.clm.Add(&extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-1", Namespace: "ns"}})
			k.clm.getErr, k.clm.watchErr = tc.get, tc.watch
			c, err := NewClient(Options{Namespace: "ns", kube: k, Connection: Connection{Mode: ModeDirect},
				ReadyTimeout: 2 * time.Second, WaitForClaimReady: true})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err = tc.op(c, ctx)
			if !errors.Is(err, tc.want) || !tc.is(err) || errors.Is(err, ErrTimeout) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// TestAttachInvalidName: a name the API server would refuse is ErrInvalidArgument at
// once, with no request (client-go's own refusal of "" would be retried until the
// ReadyTimeout).
func TestAttachInvalidName(t *testing.T) {
	tests := []struct{ name, value string }{
		{"empty", ""}, {"upper case", "Bad_Name"}, {"slash", "a/b"}, {"254 characters", strings.Repeat("a", 254)},
		{"leading dash", "-a"},
	}
	for _, tc := range tests {
		name := tc.value
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKube()
			c := newTestClient(t, k)
			ctx := context.Background()
			if _, err := c.AttachClaim(ctx, name); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("AttachClaim: %v, want ErrInvalidArgument", err)
			}
			if _, err := c.Attach(ctx, name); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("Attach: %v, want ErrInvalidArgument", err)
			}
			if k.clm.getCalls+k.clm.watchCalls+k.sbx.getCalls+k.sbx.watchCalls != 0 {
				t.Errorf("requests made: claims get %d watch %d, sandboxes get %d watch %d",
					k.clm.getCalls, k.clm.watchCalls, k.sbx.getCalls, k.sbx.watchCalls)
			}
		})
	}
}

// stubSuffixes makes the SDK choose names from suffixes, in turn.
func stubSuffixes(t *testing.T, suffixes ...string) {
	old := nameSuffix
	i := 0
	nameSuffix = func() string {
		s := suffixes[i%len(suffixes)]
		i++
		return s
	}
	t.Cleanup(func() { nameSuffix = old })
}

// TestCreateChosenNames: the SDK names what it creates, so a create whose answer was
// lost after the server stored the object is deleted by that name; a name that is
// taken is replaced; a name the caller gave is never deleted.
func TestCreateChosenNames(t *testing.T) {
	claim := func(c *Client, opts ...CreateOption) (*Sandbox, error) {
		return c.CreateSandbox(context.Background(), "pool", append(opts, WithoutWait())...)
	}
	fromSpec := func(c *Client, opts ...CreateOption) (*Sandbox, error) {
		return c.CreateSandboxFromSpec(context.Background(), agentsv1beta1.SandboxSpec{}, append(opts, WithoutWait())...)
	}
	internal := apierrors.NewInternalError(errors.New("etcd"))
	tests := []struct {
		name     string
		sandbox  bool // CreateSandboxFromSpec, else CreateSandbox
		opts     []CreateOption
		existing []string
		suffixes []string
		lostErr  error // the first create stores the object, then fails with it
		wantErr  error
		wantName string
		deleted  []string
		left     []string
	}{
		{name: "lost answer: the claim is deleted", suffixes: []string{"0000000a"}, lostErr: context.DeadlineExceeded,
			wantErr: context.DeadlineExceeded, deleted: []string{"sandbox-claim-0000000a"}},
		{name: "5xx: the claim is deleted", suffixes: []string{"0000000a"}, lostErr: internal, wantErr: internal,
			deleted: []string{"sandbox-claim-0000000a"}},
		{name: "lost answer: the Sandbox is deleted", sandbox: true, suffixes: []string{"0000000a"},
			lostErr: context.DeadlineExceeded, wantErr: context.DeadlineExceeded, deleted: []string{"sandbox-0000000a"}},
		{name: "taken name: another one", existing: []string{"sandbox-claim-0000000a"},
			suffixes: []string{"0000000a", "0000000b"}, wantName: "sandbox-claim-0000000b",
			left: []string{"sandbox-claim-0000000a", "sandbox-claim-0000000b"}},
		{name: "taken three times: a conflict, nothing deleted",
			existing: []string{"sandbox-claim-0000000a", "sandbox-claim-0000000b", "sandbox-claim-0000000c"},
			suffixes: []string{"0000000a", "0000000b", "0000000c"}, wantErr: ErrConflict,
			left: []string{"sandbox-claim-0000000a", "sandbox-claim-0000000b", "sandbox-claim-0000000c"}},
		{name: "given name, lost answer: kept", opts: []CreateOption{WithName("mine")}, suffixes: []string{"0000000a"},
			lostErr: context.DeadlineExceeded, wantErr: context.DeadlineExceeded, left: []string{"mine"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stubSuffixes(t, tc.suffixes...)
			stubLostLooks(t, time.Millisecond)
			k := newFakeKube()
			create, has, names, deleted := claim, k.clm.Has, func() []string { return keys(k.clm) }, &k.clm.deleted
			if tc.sandbox {
				create, has, names, deleted = fromSpec, k.sbx.Has, func() []string { return keys(k.sbx) }, &k.sbx.deleted
			}
			for _, n := range tc.existing {
				k.clm.Add(&extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "ns"}})
			}
			if tc.lostErr != nil {
				k.clm.lostAnswers, k.clm.lostErr = 1, tc.lostErr
				k.sbx.lostAnswers, k.sbx.lostErr = 1, tc.lostErr
			}
			sb, err := create(newTestClient(t, k), tc.opts...)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("error %v, want %v", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if got := sb.ClaimName() + sb.Name(); got != tc.wantName || !has(tc.wantName) {
				t.Errorf("created %q, want %q", got, tc.wantName)
			}
			if fmt.Sprint(*deleted) != fmt.Sprint(tc.deleted) {
				t.Errorf("deleted %v, want %v", *deleted, tc.deleted)
			}
			if got := names(); fmt.Sprint(got) != fmt.Sprint(tc.left) {
				t.Errorf("left %v, want %v", got, tc.left)
			}
		})
	}
}

// keys are the names r holds, sorted.
func keys[T kobject, L k8sruntime.Object](r *fakeRes[T, L]) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []string{}
	for n := range r.objs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestCreateNotSentNotUndone: a create that failed before it was sent (a failed dial,
// client-go's rate limiter, a context already ended) is not followed by a delete; one
// whose answer was lost is.
func TestCreateNotSentNotUndone(t *testing.T) {
	dial := &url.Error{Op: "Post", URL: "https://api/x", Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: syscall.ECONNREFUSED}}
	cut := &url.Error{Op: "Post", URL: "https://api/x", Err: io.ErrUnexpectedEOF}
	tests := []struct {
		name      string
		err       error
		cancelled bool
		deletes   int
	}{
		{"dial error", dial, false, 0},
		{"rate limiter", limiterErr, false, 0},
		{"context ended before", context.Canceled, true, 0},
		{"connection cut (sent)", cut, false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKube()
			k.clm.createErr = tc.err
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			_, err := newTestClient(t, k).CreateSandbox(ctx, "pool", WithoutWait())
			if !errors.Is(err, tc.err) {
				t.Errorf("error %v, want %v", err, tc.err)
			}
			if k.clm.deleteCalls != tc.deletes {
				t.Errorf("%d deletes, want %d", k.clm.deleteCalls, tc.deletes)
			}
		})
	}
}

// stubLostLooks shortens the looks for a create landing after its cleanup.
func stubLostLooks(t *testing.T, looks ...time.Duration) {
	old := lostCreateLooks
	lostCreateLooks = looks
	t.Cleanup(func() { lostCreateLooks = old })
}

// TestCreateLandingLateIsDeleted: a create whose answer was lost while the server had not
// stored it yet (the cleanup's DELETE finds nothing) and that lands afterwards is found by
// the looks by name that follow the DELETE, and deleted before the error is returned.
func TestCreateLandingLateIsDeleted(t *testing.T) {
	tests := []struct {
		name    string
		sandbox bool
		late    time.Duration
		looks   []time.Duration
		deleted int // DELETEs that found the object
	}{
		{name: "claim lands between the looks", late: 30 * time.Millisecond,
			looks: []time.Duration{10 * time.Millisecond, 60 * time.Millisecond, 100 * time.Millisecond}, deleted: 1},
		{name: "Sandbox lands between the looks", sandbox: true, late: 30 * time.Millisecond,
			looks: []time.Duration{10 * time.Millisecond, 60 * time.Millisecond, 100 * time.Millisecond}, deleted: 1},
		{name: "claim lands after the last look: left (bounded)", late: 300 * time.Millisecond,
			looks: []time.Duration{10 * time.Millisecond}, deleted: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stubSuffixes(t, "0000000a")
			stubLostLooks(t, tc.looks...)
			k := newFakeKube()
			res, name := k.clm, "sandbox-claim-0000000a"
			c := newTestClient(t, k)
			create := func() error {
				_, err := c.CreateSandbox(context.Background(), "pool", WithoutWait())
				return err
			}
			if tc.sandbox {
				name = "sandbox-0000000a"
				k.sbx.lostAnswers, k.sbx.lostErr, k.sbx.lateStore = 1, context.DeadlineExceeded, tc.late
				k.sbx.lateDone = make(chan struct{})
				create = func() error {
					_, err := c.CreateSandboxFromSpec(context.Background(), agentsv1beta1.SandboxSpec{}, WithoutWait())
					return err
				}
			} else {
				res.lostAnswers, res.lostErr, res.lateStore = 1, context.DeadlineExceeded, tc.late
				res.lateDone = make(chan struct{})
			}
			if err := create(); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("error %v, want the lost answer's", err)
			}
			done, has := res.lateDone, res.Has
			if tc.sandbox {
				done, has = k.sbx.lateDone, k.sbx.Has
			}
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the late create never landed")
			}
			left := has(name)
			if tc.deleted == 1 && left {
				t.Errorf("%s landed after the cleanup's DELETE and was left", name)
			}
			if tc.deleted == 0 && !left {
				t.Errorf("%s landed after the last look, yet is gone", name)
			}
		})
	}
}
