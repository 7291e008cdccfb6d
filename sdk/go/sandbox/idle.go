package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
)

// Resume on traffic (docs/idle.md, "what an SDK must do"). Through the router nothing
// is needed: the router holds requests to a suspended Sandbox and resumes it. In
// direct and pod-proxy modes the SDK does it itself before a data-plane call.

// staleAfter: in direct and pod-proxy modes a handle whose Sandbox object was read
// longer ago than this reads it again before a data-plane call (at most one GET per
// interval per handle), so a suspend made by the controller is noticed.
const staleAfter = time.Second

// SuspendedError: the Sandbox is suspended and its idle policy does not resume it on
// traffic (or it has no idle policy). It matches ErrSuspended. In router mode it is the
// router's 409 answer (Err), which it unwraps to.
type SuspendedError struct {
	Namespace, Name string
	// HasPolicy: the Sandbox has an idle policy (with resumeOnTraffic false).
	HasPolicy bool
	// Err is the router's answer (*HTTPError, 409) in router mode; nil otherwise.
	Err error
}

func (e *SuspendedError) Error() string {
	if e.HasPolicy {
		return fmt.Sprintf("sandbox: %s/%s is suspended and its idle policy does not resume it on traffic "+
			"(spec.idlePolicy.resumeOnTraffic is false); set spec.operatingMode to Running to resume it "+
			"(Sandbox.Resume)", e.Namespace, e.Name)
	}
	return fmt.Sprintf("sandbox: %s/%s is suspended; resume it explicitly (Sandbox.Resume)", e.Namespace, e.Name)
}

// Is matches ErrSuspended.
func (e *SuspendedError) Is(target error) bool { return target == ErrSuspended }

// Unwrap returns the router's answer, if any.
func (e *SuspendedError) Unwrap() error { return e.Err }

// autoResume reports whether the client resumes suspended sandboxes itself.
func (c *Client) autoResume() bool { return c.conn.mode == ModeDirect || c.conn.mode == ModePodProxy }

// send sends a data-plane call: it first makes sure the Sandbox is awake (direct and
// pod-proxy modes), and when the call fails as if the pod were gone it re-reads the
// Sandbox and, if it was suspended meanwhile, resumes it and sends the call once more:
// an idempotent call, or one whose failure proves it never reached sandboxd
// (neverReached), so a run never runs twice.
func (s *Sandbox) send(ctx context.Context, cl call) (*http.Response, target, error) {
	t, err := s.awakeTarget(ctx, false)
	if err != nil {
		return nil, t, err
	}
	resp, err := s.c.conn.do(ctx, t, cl)
	if err == nil || !s.c.autoResume() || cl.stream != nil || !podGone(err) || ctx.Err() != nil ||
		(!cl.idempotent && !neverReached(err)) {
		return resp, t, err
	}
	woke, werr := s.wake(ctx, true)
	if werr != nil {
		return nil, t, errors.Join(err, werr)
	}
	if !woke {
		return nil, t, err
	}
	if t, err = s.target(); err != nil {
		return nil, t, err
	}
	resp, err = s.c.conn.do(ctx, t, cl)
	return resp, t, err
}

// podGone: the error says the pod did not answer at all.
func podGone(err error) bool {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.StatusCode == http.StatusServiceUnavailable || he.StatusCode == http.StatusBadGateway ||
			(he.StatusCode == http.StatusNotFound && he.Code == apiServerCode)
	}
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotReady)
}

// awakeTarget returns the request target after making sure the Sandbox is awake
// (direct and pod-proxy modes; other modes just return the target).
func (s *Sandbox) awakeTarget(ctx context.Context, force bool) (target, error) {
	t, err := s.target()
	if err != nil || !s.c.autoResume() {
		return t, err
	}
	if _, err := s.wake(ctx, force); err != nil {
		return target{}, err
	}
	return s.target()
}

// needsRead: the cached object is missing, old, suspended or not Ready.
func (s *Sandbox) needsRead() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.obj == nil || time.Since(s.readAt) > staleAfter || !s.obj.IsReady() ||
		s.obj.Spec.OperatingMode == agentsv1beta1.OperatingModeSuspended
}

// wake reads the Sandbox when needed (always with force) and, when it is suspended,
// resumes it if its idle policy allows (else a *SuspendedError) and waits until it is
// Ready again, bounded by ctx (or the client's ReadyTimeout). A Sandbox that is
// starting under an idle policy (someone else resumed it) is waited for as well. It
// reports whether it resumed or waited. Concurrent calls on one handle share one
// resume.
func (s *Sandbox) wake(ctx context.Context, force bool) (bool, error) {
	if !force && !s.needsRead() {
		return false, nil
	}
	// Waiting for another call's resume is bounded by this call's context.
	if err := s.wakeMu.lock(ctx); err != nil {
		return false, &TimeoutError{What: fmt.Sprintf("sandbox %s/%s to wake (another call is resuming it)",
			s.ns, s.Name()), Err: err}
	}
	defer s.wakeMu.unlock()
	if !force && !s.needsRead() { // another call just did it
		return false, nil
	}
	if err := s.Refresh(ctx); err != nil {
		return false, err
	}
	obj := s.Object()
	policy := obj.Spec.IdlePolicy
	if obj.Spec.OperatingMode == agentsv1beta1.OperatingModeSuspended {
		if !policy.Resumes() {
			return false, &SuspendedError{Namespace: s.ns, Name: obj.Name, HasPolicy: policy != nil}
		}
		return true, s.resumeOnTraffic(ctx, obj.Name)
	}
	if obj.IsReady() || policy == nil {
		return false, nil
	}
	return true, s.waitSandbox(ctx, obj, true, obj.Generation)
}

// resumePatch sets operatingMode Running and clears the idle-suspend annotation, as the
// router's resume does.
func resumePatch() []byte {
	b, _ := json.Marshal(map[string]any{
		"spec": map[string]any{"operatingMode": agentsv1beta1.OperatingModeRunning},
		"metadata": map[string]any{"annotations": map[string]any{
			agentsv1beta1.AnnotationIdleSuspendedGeneration: nil}},
	})
	return b
}

func (s *Sandbox) resumeOnTraffic(ctx context.Context, name string) error {
	obj, err := s.c.kube.sandboxes(s.ns).Patch(ctx, name, types.MergePatchType, resumePatch(), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("sandbox: resume %s/%s on traffic: %w", s.ns, name, kubeErr(err))
	}
	s.set(obj)
	return s.waitSandbox(ctx, obj, true, obj.Generation)
}

// ctxMutex is a mutex whose lock gives up when a context ends (a call must not wait
// past its own deadline for another call's work). The zero value is unlocked.
type ctxMutex struct {
	once sync.Once
	ch   chan struct{} // holds a token while locked
}

// lock takes the mutex, or returns ctx's error when ctx ends first.
func (m *ctxMutex) lock(ctx context.Context) error {
	m.once.Do(func() { m.ch = make(chan struct{}, 1) })
	select {
	case m.ch <- struct{}{}:
		return nil
	default:
	}
	select {
	case m.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *ctxMutex) unlock() { <-m.ch }
