//go:build integration

package sandbox

// Integration tests against a real API server (and, when it is up, the whole stack).
// Run with: go test -race -tags integration ./sandbox/ (sdk/go/run-tests.sh does it).
//
//	AS_KUBECONFIG (or KUBECONFIG)   admin kubeconfig; without it every test skips
//	AS_NAMESPACE                    namespace of the warm pool (default "default")
//	AS_WARM_POOL                    pool to claim from (default: the first one found)
//	AS_TEMPLATE                     template for cold starts (default: the pool's)
//	AS_ROUTER_URL, AS_ROUTER_TOKEN  sandbox-router and its bearer token (router mode)
//	AS_CONCURRENT_CLAIMS            size of the concurrent claim test (default 50)

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
	"github.com/agent-sandbox-dev/agent-sandbox/sdk/go/typed"
)

func restConfig(t *testing.T) *rest.Config {
	t.Helper()
	path := os.Getenv("AS_KUBECONFIG")
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path == "" {
		t.Skip("integration: no kubeconfig (set AS_KUBECONFIG; `make -s kubeconfig` prints it)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Skipf("integration: kubeconfig %s: %v", path, err)
	}
	rc.QPS, rc.Burst = 200, 400
	cs, err := typed.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cs.SandboxClaims("default").List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		if apierrors.IsNotFound(err) {
			t.Skip("integration: the agent-sandbox CRDs are not installed (kubectl apply -f api/crds/)")
		}
		t.Skipf("integration: API server not reachable: %v", err)
	}
	return rc
}

func randSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tempNamespace creates a namespace deleted at the end of the test.
func tempNamespace(t *testing.T, rc *rest.Config) string {
	t.Helper()
	kc := kubernetes.NewForConfigOrDie(rc)
	ns := "sdk-go-" + randSuffix()
	ctx := context.Background()
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"agent-sandbox.test/integration": "true"}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

// ---- API level: the types and the waits against a real API server --------------------

// TestIntegrationTypedRoundTrip stores every kind through the real CRD schemas (pruning
// would drop a field the Go types send under a wrong name) and reads it back.
func TestIntegrationTypedRoundTrip(t *testing.T) {
	rc := restConfig(t)
	ns := tempNamespace(t, rc)
	cs, err := typed.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	svc, ttl := true, int32(60)
	pod := agentsv1beta1.PodTemplate{
		ObjectMeta: agentsv1beta1.PodMetadata{Labels: map[string]string{"team": "a"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
	tpl, err := cs.SandboxTemplates(ns).Create(ctx, &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "t"},
		Spec: extv1beta1.SandboxTemplateSpec{PodTemplate: pod, Service: &svc,
			NetworkPolicy:          &extv1beta1.NetworkPolicySpec{Ingress: []networkingIngress{}},
			EnvVarsInjectionPolicy: extv1beta1.InjectionAllowed},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create template: %v", err)
	}
	if tpl.Spec.NetworkPolicy == nil || tpl.Spec.NetworkPolicy.Ingress == nil || len(tpl.Spec.NetworkPolicy.Ingress) != 0 ||
		tpl.Spec.NetworkPolicyManagement != extv1beta1.NetworkPolicyManaged || tpl.Spec.VolumeClaimTemplatesPolicy != extv1beta1.InjectionDisallowed {
		t.Errorf("template after defaults: %+v", tpl.Spec)
	}
	pool, err := cs.SandboxWarmPools(ns).Create(ctx, &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: extv1beta1.SandboxWarmPoolSpec{SandboxTemplateRef: extv1beta1.LocalObjectReference{Name: "t"}}}, metav1.CreateOptions{})
	if err != nil || pool.Spec.Replicas == nil || *pool.Spec.Replicas != 1 {
		t.Fatalf("create pool: %v %+v", err, pool.Spec)
	}
	shutdown := metav1.NewTime(time.Now().Add(time.Hour).UTC().Truncate(time.Second))
	claim, err := cs.SandboxClaims(ns).Create(ctx, &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.LocalObjectReference{Name: "p"},
			Lifecycle: &extv1beta1.Lifecycle{ShutdownTime: &shutdown, TTLSecondsAfterFinished: &ttl},
			Env:       []extv1beta1.EnvVar{{Name: "A", Value: "1", ContainerName: "c"}}}}, metav1.CreateOptions{})
	if err != nil || claim.Spec.Lifecycle.ShutdownPolicy != extv1beta1.ClaimShutdownRetain ||
		!claim.Spec.Lifecycle.ShutdownTime.Equal(&shutdown) || claim.Spec.Env[0].ContainerName != "c" {
		t.Fatalf("create claim: %v %+v", err, claim.Spec)
	}
	sb, err := cs.Sandboxes(ns).Create(ctx, &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: agentsv1beta1.SandboxSpec{PodTemplate: pod, Service: &svc, ShutdownTime: &shutdown}}, metav1.CreateOptions{})
	if err != nil || sb.Spec.OperatingMode != agentsv1beta1.OperatingModeRunning || sb.Spec.PodTemplate.ObjectMeta.Labels["team"] != "a" {
		t.Fatalf("create sandbox: %v %+v", err, sb.Spec)
	}
	// Status through the subresource, as a controller writes it.
	sb.Status = agentsv1beta1.SandboxStatus{PodIPs: []string{"10.9.9.9"}, Selector: "x=y",
		Conditions: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "DependenciesReady", Message: "m",
			LastTransitionTime: metav1.Now(), ObservedGeneration: sb.Generation}}}
	sb, err = cs.Sandboxes(ns).UpdateStatus(ctx, sb, metav1.UpdateOptions{})
	if err != nil || !sb.IsReady() || sb.Status.PodIPs[0] != "10.9.9.9" {
		t.Fatalf("update status: %v %+v", err, sb.Status)
	}
	// A bad pod spec is refused by the CRD schema.
	_, err = cs.Sandboxes(ns).Create(ctx, &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: agentsv1beta1.SandboxSpec{PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{
			RestartPolicy: "Sometimes", Containers: []corev1.Container{{Name: "c", Image: "img"}}}}}},
		metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("invalid pod spec: %v", err)
	}
}

type networkingIngress = networkingv1.NetworkPolicyIngressRule

// noClaimController skips the test when a claim controller writes claim statuses in ns
// (the real stack): the status-writer tests play that controller themselves. The probe
// is a claim of a missing pool that a controller would mark WarmPoolNotFound; it waits
// 3 s for one. AS_NO_CLAIM_CONTROLLER=1 (run-tests.sh on its private API server, which
// runs no controllers) says there is none and skips the wait.
func noClaimController(t *testing.T, cs *typed.Clientset, ns string) {
	t.Helper()
	if os.Getenv("AS_NO_CLAIM_CONTROLLER") == "1" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	probe, err := cs.SandboxClaims(ns).Create(ctx, &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.LocalObjectReference{Name: "no-such-pool"}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.SandboxClaims(ns).Delete(context.Background(), "probe", metav1.DeleteOptions{}) }()
	w, err := cs.SandboxClaims(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: probe.ResourceVersion,
		FieldSelector: "metadata.name=probe"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if c, ok := ev.Object.(*extv1beta1.SandboxClaim); ok && len(c.Status.Conditions) > 0 {
				t.Skip("a claim controller is running (the stack tests cover the real flow)")
			}
		}
	}
}

// statusWriter plays the claim controller in a namespace without one: it binds every
// claim created by the SDK to a Ready Sandbox, through the real API server.
func statusWriter(t *testing.T, ctx context.Context, cs *typed.Clientset, ns string, reason string) {
	onNewClaims(ctx, cs, ns, func(c *extv1beta1.SandboxClaim) { bindClaim(t, ctx, cs, ns, c, reason) })
}

// onNewClaims runs fn on a goroutine for every claim created in ns until ctx ends. It
// watches again from the last resourceVersion when the server ends a watch (a fresh API
// server re-initialising a new CRD's watch cache ends them).
func onNewClaims(ctx context.Context, cs *typed.Clientset, ns string, fn func(*extv1beta1.SandboxClaim)) {
	go func() {
		seen := map[types.UID]bool{}
		rv := ""
		for ctx.Err() == nil {
			w, err := cs.SandboxClaims(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				c, ok := ev.Object.(*extv1beta1.SandboxClaim)
				if !ok {
					continue
				}
				rv = c.ResourceVersion
				if ev.Type == watch.Added && !seen[c.UID] {
					seen[c.UID] = true
					go fn(c)
				}
			}
			w.Stop()
		}
	}()
}

func bindClaim(t *testing.T, ctx context.Context, cs *typed.Clientset, ns string, c *extv1beta1.SandboxClaim, reason string) {
	now := metav1.Now()
	if reason != "" {
		c.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: "False", Reason: reason, Message: "test",
			LastTransitionTime: now}}
		if _, err := cs.SandboxClaims(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
			t.Errorf("claim status: %v", err)
		}
		return
	}
	name := "bound-" + c.Name
	sb, err := cs.Sandboxes(ns).Create(ctx, &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: agentsv1beta1.SandboxSpec{PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "img"}}}}}}, metav1.CreateOptions{})
	if err != nil {
		if ctx.Err() == nil {
			t.Errorf("create sandbox: %v", err)
		}
		return
	}
	ready := metav1.Condition{Type: "Ready", Status: "True", Reason: "DependenciesReady", Message: "test",
		LastTransitionTime: now, ObservedGeneration: 1}
	sb.Status = agentsv1beta1.SandboxStatus{PodIPs: []string{"10.1.2.3"}, Conditions: []metav1.Condition{ready}}
	if _, err := cs.Sandboxes(ns).UpdateStatus(ctx, sb, metav1.UpdateOptions{}); err != nil {
		t.Errorf("sandbox status: %v", err)
		return
	}
	c.Status = extv1beta1.SandboxClaimStatus{Conditions: []metav1.Condition{ready},
		Sandbox: extv1beta1.SandboxReference{Name: name, PodIPs: []string{"10.1.2.3"}}}
	if _, err := cs.SandboxClaims(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
		t.Errorf("claim status: %v", err)
	}
}

// TestIntegrationWaitByWatch runs CreateSandbox's watch-based wait against the real API
// server's watch (resourceVersions, field selectors), with a test-side status writer.
func TestIntegrationWaitByWatch(t *testing.T) {
	rc := restConfig(t)
	ns := tempNamespace(t, rc)
	cs, _ := typed.NewForConfig(rc)
	noClaimController(t, cs, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	statusWriter(t, ctx, cs, ns, "")
	c, err := NewClient(Options{RestConfig: rc, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := c.CreateSandbox(ctx, "pool")
			if err == nil && (sb.PodIP() != "10.1.2.3" || sb.Name() != "bound-"+sb.ClaimName()) {
				err = fmt.Errorf("handle %s ip %s", sb.Name(), sb.PodIP())
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if !c.claimFirst.Load() {
		t.Error("the claims' Ready ended the waits (no hand-out: nothing is labelled), yet the next claim would not be watched at once")
	}
	claims, err := c.ListClaims(ctx, ListOptions{OnlyMine: true})
	if err != nil || len(claims) != n {
		t.Fatalf("%d claims, %v", len(claims), err)
	}
	for _, cl := range claims {
		if _, err := time.Parse(time.RFC3339Nano, cl.Annotations[agentsv1beta1.AnnotationClientFirstRequestedAt]); err != nil {
			t.Errorf("claim %s: %v", cl.Name, err)
		}
	}
	if err := c.DeleteClaim(ctx, claims[0].Name); err != nil {
		t.Error(err)
	}
	if _, err := c.AttachClaim(ctx, claims[0].Name); !errors.Is(err, ErrNotFound) {
		t.Errorf("attach deleted claim: %v", err)
	}
}

func TestIntegrationWaitFailures(t *testing.T) {
	rc := restConfig(t)
	ctx := testCtx(t)
	tests := []struct {
		reason  string
		timeout time.Duration
		want    error
	}{
		{"TemplateNotFound", 0, ErrTemplateNotFound},
		{"InvalidMetadata", 0, ErrClaimFailed},
		{"SandboxNotReady", 2 * time.Second, ErrTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.reason, func(t *testing.T) {
			ns := tempNamespace(t, rc)
			cs, _ := typed.NewForConfig(rc)
			noClaimController(t, cs, ns)
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			statusWriter(t, wctx, cs, ns, tc.reason)
			c, _ := NewClient(Options{RestConfig: rc, Namespace: ns, ReadyTimeout: 20 * time.Second})
			cctx := ctx
			if tc.timeout > 0 {
				var ccancel context.CancelFunc
				cctx, ccancel = context.WithTimeout(ctx, tc.timeout)
				defer ccancel()
			}
			_, err := c.CreateSandbox(cctx, "pool")
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if l, _ := c.ListClaims(ctx, ListOptions{}); len(l) != 0 {
				t.Errorf("%d claims left after a failed create", len(l))
			}
		})
	}
}

// ---- stack level: controller, warm pool, sandboxd pods, router ------------------------

type stack struct {
	rc       *rest.Config
	ns       string
	pool     string
	template string
}

func needStack(t *testing.T) stack {
	t.Helper()
	rc := restConfig(t)
	s := stack{rc: rc, ns: os.Getenv("AS_NAMESPACE"), pool: os.Getenv("AS_WARM_POOL"), template: os.Getenv("AS_TEMPLATE")}
	if s.ns == "" {
		s.ns = "default"
	}
	cs, _ := typed.NewForConfig(rc)
	ctx := testCtx(t)
	pools, err := cs.SandboxWarmPools(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Skipf("stack: list warm pools: %v", err)
	}
	for _, p := range pools.Items {
		if (s.pool == "" || s.pool == p.Name) && p.Status.ReadyReplicas > 0 {
			s.pool = p.Name
			if s.template == "" {
				s.template = p.Spec.SandboxTemplateRef.Name
			}
			return s
		}
	}
	t.Skipf("stack: no SandboxWarmPool with ready replicas in %q (make up installs one; or set AS_WARM_POOL)", s.ns)
	return s
}

func stackClient(t *testing.T, s stack, mode Mode) *Client {
	t.Helper()
	conn := Connection{Mode: mode}
	if mode == ModeRouter {
		conn.RouterURL = os.Getenv("AS_ROUTER_URL")
		conn.RouterToken = os.Getenv("AS_ROUTER_TOKEN")
		if conn.RouterURL == "" {
			t.Skip("stack: no router (set AS_ROUTER_URL and AS_ROUTER_TOKEN; make -s router-url / router-token)")
		}
	}
	c, err := NewClient(Options{RestConfig: s.rc, Namespace: s.ns, Connection: conn, ReadyTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIntegrationStackModes claims one sandbox and runs every data-plane call through
// each connection mode.
func TestIntegrationStackModes(t *testing.T) {
	s := needStack(t)
	c := stackClient(t, s, ModePodProxy)
	ctx := testCtx(t)
	sb, err := c.CreateSandbox(ctx, s.pool, WithLabels(map[string]string{"test": "sdk-go"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Delete(context.Background()) })
	obj := sb.Object()
	if obj.Labels[agentsv1beta1.LabelCreatedBy] != "go-client" && obj.Spec.PodTemplate.ObjectMeta.Labels[agentsv1beta1.LabelCreatedBy] != "go-client" {
		t.Logf("note: created-by not propagated to the Sandbox: %v", obj.Labels)
	}
	for _, mode := range []Mode{ModePodProxy, ModeRouter, ModeDirect} {
		t.Run(string(mode), func(t *testing.T) {
			mc := stackClient(t, s, mode)
			h, err := mc.AttachClaim(testCtx(t), sb.ClaimName())
			if err != nil {
				t.Fatal(err)
			}
			if mode == ModeDirect {
				d, err := net.DialTimeout("tcp", net.JoinHostPort(h.PodIP(), strconv.Itoa(DefaultPort)), 2*time.Second)
				if err != nil {
					t.Skipf("direct: pod IP %s not reachable from here: %v", h.PodIP(), err)
				}
				d.Close()
			}
			dataPlaneSuite(t, h)
		})
	}
	// Suspend and resume the claimed sandbox; every mode then reaches the new pod.
	if err := sb.Suspend(ctx); err != nil {
		t.Fatalf("suspend: %v", err)
	}
	if _, err := sb.Run(ctx, "true"); err == nil {
		t.Error("run on a suspended sandbox succeeded")
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	for _, mode := range []Mode{ModePodProxy, ModeRouter, ModeDirect} {
		t.Run("resumed/"+string(mode), func(t *testing.T) {
			h, err := stackClient(t, s, mode).AttachClaim(testCtx(t), sb.ClaimName())
			if err != nil {
				t.Fatal(err)
			}
			if h.PodIP() != sb.PodIP() {
				t.Errorf("pod IP %s, resumed handle has %s", h.PodIP(), sb.PodIP())
			}
			if mode == ModeDirect {
				if d, err := net.DialTimeout("tcp", net.JoinHostPort(h.PodIP(), strconv.Itoa(DefaultPort)), 2*time.Second); err != nil {
					t.Skipf("direct: pod IP %s not reachable from here: %v", h.PodIP(), err)
				} else {
					d.Close()
				}
			}
			if r, err := h.Run(testCtx(t), "echo resumed"); err != nil || r.Stdout != "resumed\n" {
				t.Errorf("run: %+v %v", r, err)
			}
		})
	}
}

// TestIntegrationStackLifecycle: cold start from the template, suspend, resume, delete.
func TestIntegrationStackLifecycle(t *testing.T) {
	s := needStack(t)
	c := stackClient(t, s, ModePodProxy)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb, err := c.CreateSandboxFromTemplate(ctx, s.template, WithEnv(map[string]string{"SDK_TEST": "cold"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Delete(context.Background()) })
	r, err := sb.Run(ctx, "echo $SDK_TEST")
	if err != nil || r.Stdout != "cold\n" {
		t.Fatalf("run: %+v %v", r, err)
	}
	if err := sb.Suspend(ctx); err != nil {
		t.Fatalf("suspend: %v", err)
	}
	if sb.IsReady() {
		t.Error("ready after suspend")
	}
	if _, err := sb.Run(ctx, "true"); err == nil {
		t.Error("run on a suspended sandbox succeeded")
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if r, err := sb.Run(ctx, "echo back"); err != nil || r.Stdout != "back\n" {
		t.Fatalf("run after resume: %+v %v", r, err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Run(ctx, "true"); !errors.Is(err, ErrClosed) {
		t.Errorf("run after delete: %v", err)
	}
	if l, err := c.ListSandboxes(ctx, ListOptions{OnlyMine: true}); err == nil {
		for _, o := range l {
			if o.Name == sb.Name() && o.DeletionTimestamp == nil {
				t.Errorf("sandbox %s still listed", o.Name)
			}
		}
	}
}

// TestIntegrationStackConcurrentClaims: many claims at once all become Ready and run.
func TestIntegrationStackConcurrentClaims(t *testing.T) {
	s := needStack(t)
	n := 50
	if v, err := strconv.Atoi(os.Getenv("AS_CONCURRENT_CLAIMS")); err == nil && v > 0 {
		n = v
	}
	mode := ModePodProxy
	if os.Getenv("AS_ROUTER_URL") != "" {
		mode = ModeRouter
	}
	c := stackClient(t, s, mode)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sb, err := c.CreateSandbox(ctx, s.pool)
			if err != nil {
				errs <- fmt.Errorf("claim %d: %w", i, err)
				return
			}
			defer func() { _ = sb.Delete(context.WithoutCancel(ctx)) }()
			r, err := sb.Run(ctx, "echo "+strconv.Itoa(i))
			if err == nil && r.Stdout != strconv.Itoa(i)+"\n" {
				err = fmt.Errorf("stdout %q", r.Stdout)
			}
			if err != nil {
				errs <- fmt.Errorf("claim %d (%s): run: %w", i, sb.Name(), err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d concurrent claims ready and run in %v (%s mode)", n, time.Since(start), mode)
}

// TestIntegrationStackErrors: the real controller's failures arrive as typed errors and
// leave nothing behind.
func TestIntegrationStackErrors(t *testing.T) {
	s := needStack(t)
	c := stackClient(t, s, ModePodProxy)
	ctx := testCtx(t)
	_, err := c.CreateSandbox(ctx, "no-such-pool-"+randSuffix())
	var cf *ClaimFailedError
	if !errors.Is(err, ErrWarmPoolNotFound) || !errors.As(err, &cf) || cf.Reason != "WarmPoolNotFound" {
		t.Fatalf("missing pool: %v", err)
	}
	if l, _ := c.ListClaims(ctx, ListOptions{LabelSelector: "agents.x-k8s.io/created-by=go-client"}); l != nil {
		for _, cl := range l {
			if cl.Name == cf.Claim && cl.DeletionTimestamp == nil {
				t.Errorf("failed claim %s was not deleted", cl.Name)
			}
		}
	}
	if _, err := c.CreateSandboxFromTemplate(ctx, "no-such-template"); !errors.Is(err, ErrTemplateNotFound) {
		t.Errorf("missing template: %v", err)
	}
	if _, err := c.Attach(ctx, "no-such-sandbox"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing sandbox: %v", err)
	}
}

// handoutWriter binds every claim the SDK creates to a Ready Sandbox labelled with the
// claim's UID and controlled by owner(claim), and never writes the claim's status: only
// the early hand-out can end CreateSandbox's wait.
func handoutWriter(t *testing.T, ctx context.Context, cs *typed.Clientset, ns string,
	owner func(*extv1beta1.SandboxClaim) metav1.OwnerReference) {
	onNewClaims(ctx, cs, ns, func(c *extv1beta1.SandboxClaim) {
		sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "bound-" + c.Name,
			Labels:          map[string]string{agentsv1beta1.LabelClaimUID: string(c.UID)},
			OwnerReferences: []metav1.OwnerReference{owner(c)}},
			Spec: agentsv1beta1.SandboxSpec{PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "img"}}}}}}
		sb, err := cs.Sandboxes(ns).Create(ctx, sb, metav1.CreateOptions{})
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("create sandbox: %v", err)
			}
			return
		}
		sb.Status = agentsv1beta1.SandboxStatus{PodIPs: []string{"10.1.2.4"}, Conditions: []metav1.Condition{{
			Type: "Ready", Status: "True", Reason: "DependenciesReady", LastTransitionTime: metav1.Now()}}}
		if _, err := cs.Sandboxes(ns).UpdateStatus(ctx, sb, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
			t.Errorf("sandbox status: %v", err)
		}
	})
}

// strangerOwner returns a controller reference to a ConfigMap it creates in ns: an owner
// that exists (a reference to a missing UID would let a cluster's garbage collector delete
// the Sandbox mid-test) and is not the claim.
func strangerOwner(t *testing.T, ctx context.Context, rc *rest.Config,
	ns string) func(*extv1beta1.SandboxClaim) metav1.OwnerReference {
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "stranger"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return func(*extv1beta1.SandboxClaim) metav1.OwnerReference {
		return *metav1.NewControllerRef(cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	}
}

// TestIntegrationHandout: CreateSandbox returns on a Ready Sandbox bound to its claim
// before the claim's status says so (the test never writes it), and only then: not with
// Options.WaitForClaimReady, not for a claim with env, not for a Sandbox another object
// controls.
func TestIntegrationHandout(t *testing.T) {
	rc := restConfig(t)
	controller := func(c *extv1beta1.SandboxClaim) metav1.OwnerReference {
		return *metav1.NewControllerRef(c, extv1beta1.SchemeGroupVersion.WithKind("SandboxClaim"))
	}
	tests := []struct {
		name      string
		stranger  bool // the Sandbox's controller is another object, not the claim
		claimWait bool
		opts      []CreateOption
		handed    bool
	}{
		{"bound and Ready", false, false, nil, true},
		{"WaitForClaimReady", false, true, nil, false},
		{"claim with env", false, false, []CreateOption{WithEnv(map[string]string{"A": "1"})}, false},
		{"controlled by another", true, false, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := tempNamespace(t, rc)
			cs, _ := typed.NewForConfig(rc)
			noClaimController(t, cs, ns)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			owner := controller
			if tc.stranger {
				owner = strangerOwner(t, ctx, rc, ns)
			}
			handoutWriter(t, ctx, cs, ns, owner)
			c, err := NewClient(Options{RestConfig: rc, Namespace: ns, WaitForClaimReady: tc.claimWait})
			if err != nil {
				t.Fatal(err)
			}
			cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
			defer ccancel()
			sb, err := c.CreateSandbox(cctx, "pool", tc.opts...)
			if !tc.handed {
				if !errors.Is(err, ErrTimeout) {
					t.Fatalf("handed out %v, err %v; want a timeout (only the claim's Ready may end this wait)", sb, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sb.Name() != "bound-"+sb.ClaimName() || sb.PodIP() != "10.1.2.4" {
				t.Fatalf("handle %s ip %s", sb.Name(), sb.PodIP())
			}
			if c.claimFirst.Load() {
				t.Error("handed out, yet the next claim would be watched at once")
			}
			cl, err := cs.SandboxClaims(ns).Get(ctx, sb.ClaimName(), metav1.GetOptions{})
			if err != nil || len(cl.Status.Conditions) != 0 {
				t.Fatalf("claim status %+v, %v: the test never writes it", cl.Status, err)
			}
		})
	}
}

// TestIntegrationHandoutStream: a client's claims share one hand-out stream: claims one
// after another and eight at once are each handed out their own Sandbox, and the stream
// was started once.
func TestIntegrationHandoutStream(t *testing.T) {
	rc := restConfig(t)
	ns := tempNamespace(t, rc)
	cs, _ := typed.NewForConfig(rc)
	noClaimController(t, cs, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	handoutWriter(t, ctx, cs, ns, func(c *extv1beta1.SandboxClaim) metav1.OwnerReference {
		return *metav1.NewControllerRef(c, extv1beta1.SchemeGroupVersion.WithKind("SandboxClaim"))
	})
	c, err := NewClient(Options{RestConfig: rc, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	create := func() error {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		sb, err := c.CreateSandbox(cctx, "pool")
		if err != nil {
			return err
		}
		if sb.Name() != "bound-"+sb.ClaimName() || sb.PodIP() != "10.1.2.4" {
			return fmt.Errorf("claim %s handed out %s (ip %s)", sb.ClaimName(), sb.Name(), sb.PodIP())
		}
		return nil
	}
	for i := 0; i < 3; i++ {
		if err := create(); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() { errs <- create() }()
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if running, gen, waits, _ := hubState(&c.handout, ns); !running || gen != 1 || waits != 0 {
		t.Fatalf("stream running %v, started %d times, %d waits left: want one stream for all", running, gen, waits)
	}
	if c.claimFirst.Load() {
		t.Error("handed out, yet the next claim would be watched at once")
	}
}
