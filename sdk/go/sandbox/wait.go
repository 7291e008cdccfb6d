package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
)

// checkFn inspects one version of the watched object: done, or a terminal error. reason
// is remembered for timeout messages.
type checkFn[T any] func(obj T) (done bool, reason string, err error)

// waiter watches one named object until check says done. It never polls: it GETs once
// (when it has no resourceVersion), then WATCHes from the last resourceVersion seen,
// re-watching when the server ends the stream and re-reading on 410 Gone.
type waiter[T kobject, L runtime.Object] struct {
	api   kubeResource[T, L]
	ns    string
	name  string
	what  string // for errors: "claim ns/name Ready"
	check checkFn[T]

	// uid pins the object waited for: the UID it was known by (set by the caller), else
	// the first version's. A version with another UID is another object made again under
	// the name: ours was deleted.
	uid        types.UID
	seen       bool // a version of the object was read
	rv         string
	lastReason string
	// backoff paces retries: it grows over failures and watches that end with nothing,
	// and starts again from its minimum once the wait makes progress (inspect, a bookmark).
	backoff backoff
}

// timeout is the wait's end at ctx's end, or sooner when client-go's rate limiter says
// no request can be sent before ctx's deadline (ctx has not ended yet: the deadline's
// error stands for it).
func (w *waiter[T, L]) timeout(ctx context.Context) error {
	err := context.Cause(ctx)
	if err == nil {
		err = context.DeadlineExceeded
	}
	return &TimeoutError{What: w.what, LastReason: w.lastReason, Err: err}
}

func (w *waiter[T, L]) deleted() error {
	return fmt.Errorf("%w: %s/%s (%s): %w", ErrSandboxDeleted, w.ns, w.name, w.what, ErrNotFound)
}

// notFound is the end of a wait for an object of which no version was ever known (not
// ErrSandboxDeleted: it may never have existed).
func (w *waiter[T, L]) notFound(err error) error {
	return fmt.Errorf("sandbox: %s/%s (%s): %w", w.ns, w.name, w.what, kubeErr(err))
}

// run waits. start (optional, e.g. the object returned by Create) is checked first.
func (w *waiter[T, L]) run(ctx context.Context, start T, haveStart bool) (T, error) {
	var zero T
	if haveStart {
		if obj, done, err := w.inspect(start); done || err != nil {
			return obj, err
		}
	}
	for {
		if ctx.Err() != nil {
			return zero, w.timeout(ctx)
		}
		if w.rv == "" {
			obj, err := w.api.Get(ctx, w.name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err) && !w.seen && w.uid == "":
				return zero, w.notFound(err)
			case apierrors.IsNotFound(err):
				return zero, w.deleted()
			case err != nil && (ctx.Err() != nil || rateLimited(err)):
				return zero, w.timeout(ctx)
			case err != nil:
				if !transient(err) {
					return zero, fmt.Errorf("sandbox: get %s: %w", w.what, kubeErr(err))
				}
				w.backoff.sleep(ctx)
				continue
			}
			if obj, done, err := w.inspect(obj); done || err != nil {
				return obj, err
			}
		}
		obj, done, err := w.watchOnce(ctx)
		if done || err != nil {
			return obj, err
		}
		if w.rv == "" || ctx.Err() != nil {
			continue
		}
		w.backoff.sleep(ctx)
	}
}

func (w *waiter[T, L]) inspect(obj T) (T, bool, error) {
	var zero T
	if uid := obj.GetUID(); uid != "" {
		if w.uid == "" {
			w.uid = uid
		} else if uid != w.uid {
			return zero, true, w.deleted() // made again under the name (seen after a 410)
		}
	}
	w.seen = true
	w.rv = obj.GetResourceVersion()
	w.backoff.reset() // an answer: the server is back
	done, reason, err := w.check(obj)
	if reason != "" {
		w.lastReason = reason
	}
	if err != nil {
		return zero, true, err
	}
	return obj, done, nil
}

// watchOnce runs one watch request until it ends. done/err end the wait.
func (w *waiter[T, L]) watchOnce(ctx context.Context) (T, bool, error) {
	var zero T
	wi, err := w.api.Watch(ctx, metav1.ListOptions{
		FieldSelector:       fields.OneTermEqualSelector("metadata.name", w.name).String(),
		ResourceVersion:     w.rv,
		AllowWatchBookmarks: true,
	})
	if err != nil {
		if ctx.Err() != nil || rateLimited(err) {
			return zero, false, w.timeout(ctx)
		}
		if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
			w.rv = ""
			return zero, false, nil
		}
		if !transient(err) {
			return zero, false, fmt.Errorf("sandbox: watch %s: %w", w.what, kubeErr(err))
		}
		return zero, false, nil
	}
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return zero, false, w.timeout(ctx)
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return zero, false, nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				obj, ok := ev.Object.(T)
				if !ok || obj.GetName() != w.name {
					continue
				}
				if obj, done, err := w.inspect(obj); done || err != nil {
					return obj, done, err
				}
			case watch.Deleted:
				if m, err := meta.Accessor(ev.Object); err == nil && m.GetName() == w.name {
					return zero, false, w.deleted()
				}
			case watch.Bookmark:
				if m, err := meta.Accessor(ev.Object); err == nil {
					w.rv = m.GetResourceVersion()
					w.backoff.reset()
				}
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
					w.rv = ""
				}
				return zero, false, nil
			}
		}
	}
}

// transient errors are retried with back-off while waiting: the API server's answers
// that say "later" (timeouts, 429, 503, 500) and failures of the network (no
// connection, a cut one, a timeout, an HTTP/2 stream or connection failure). Anything
// else (a TLS or credential failure, an exec plugin's error, an answer that does not
// decode, an invalid request) ends the wait.
func transient(err error) bool {
	if isAPIStatus(err) {
		return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
			apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
			apierrors.IsUnexpectedServerError(err)
	}
	return errors.Is(err, context.DeadlineExceeded) || networkError(err) || http2Error(err)
}

// rateLimited: client-go's rate limiter refused to wait for a token (it would come
// after the context's deadline; a plain error, while the context has not ended yet).
// No request was sent. A wait ends as timed out.
func rateLimited(err error) bool {
	return err != nil && strings.Contains(err.Error(), "client rate limiter Wait returned an error")
}

// networkError: err is a failure of the connection to the API server, not of what was
// said over it.
func networkError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op != "remote error" // a TLS alert of the peer is an answer
	}
	return utilnet.IsTimeout(err) || utilnet.IsProbableEOF(err) || utilnet.IsConnectionReset(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// http2Error: an HTTP/2 stream was reset (golang.org/x/net/http2's StreamError, or
// net/http's bundled copy, known by its text) or the connection went away.
func http2Error(err error) bool {
	var se http2.StreamError
	if errors.As(err, &se) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"stream error: stream ID", "http2: client connection force closed",
		"http2: client connection lost", "http2: server sent GOAWAY", "http2: client connection is closed"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func isAPIStatus(err error) bool {
	var s apierrors.APIStatus
	return errors.As(err, &s)
}

// Back-off of the watch loops (the waiter, the hand-out stream): waitBackoffMin,
// doubling to waitBackoffMax.
const (
	waitBackoffMin = 100 * time.Millisecond
	waitBackoffMax = 5 * time.Second
)

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// pauseFn is the back-off's wait: sleepCtx, or a test's recorder. Atomic, since loops
// of earlier tests may still be running when a test swaps it.
var pauseFn atomic.Pointer[func(context.Context, time.Duration)]

// pause waits d or until ctx ends, through pauseFn.
func pause(ctx context.Context, d time.Duration) {
	if f := pauseFn.Load(); f != nil {
		(*f)(ctx, d)
		return
	}
	sleepCtx(ctx, d)
}

// backoff is the delay of a watch loop's next retry: waitBackoffMin, doubling with each
// retry to waitBackoffMax. The loop resets it when it makes progress (an answer, an
// event), so that a slow phase (a run of failures) does not leave every later retry, for
// as long as the loop runs, at the maximum. The zero value is at the minimum.
type backoff struct{ next time.Duration }

// sleep waits the current delay (or until ctx ends) and doubles the next one.
func (b *backoff) sleep(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	d := b.next
	if d <= 0 {
		d = waitBackoffMin
	}
	b.next = min(2*d, waitBackoffMax)
	pause(ctx, d)
}

// reset starts the delay again from waitBackoffMin.
func (b *backoff) reset() { b.next = 0 }

// Claim reasons that end a wait at once (the controller will not fix them on its own).
var terminalClaimReasons = map[string]bool{
	extv1beta1.ReasonTemplateNotFound:          true,
	extv1beta1.ReasonWarmPoolNotFound:          true,
	extv1beta1.ReasonInvalidMetadata:           true,
	extv1beta1.ReasonEnvVarsInjectionRejected:  true,
	extv1beta1.ReasonVolumeClaimTemplatesError: true,
	extv1beta1.ReasonClaimExpired:              true,
	extv1beta1.ReasonSandboxExpired:            true,
	agentsv1beta1.ReasonPodFailed:              true,
	agentsv1beta1.ReasonPodSucceeded:           true,
}

// claimReady is done when the claim is bound and Ready.
func claimReady(c *extv1beta1.SandboxClaim) (bool, string, error) {
	for _, cond := range c.Status.Conditions {
		if cond.Reason == extv1beta1.ReasonWarmPoolNotFound {
			return false, cond.Reason, &ClaimFailedError{Namespace: c.Namespace, Claim: c.Name,
				Reason: cond.Reason, Message: cond.Message}
		}
	}
	ready := agentsv1beta1.FindCondition(c.Status.Conditions, extv1beta1.ConditionReady)
	if ready == nil {
		return false, "", nil
	}
	if ready.Status == metav1.ConditionTrue && c.Status.Sandbox.Name != "" {
		return true, ready.Reason, nil
	}
	if ready.Status == metav1.ConditionFalse && terminalClaimReasons[ready.Reason] {
		return false, ready.Reason, &ClaimFailedError{Namespace: c.Namespace, Claim: c.Name,
			Reason: ready.Reason, Message: ready.Message}
	}
	return false, ready.Reason, nil
}

// claimAttachable is claimReady, or done as well when the claim names its Sandbox and
// says it is suspended (any suspend: manual or by the idle policy): AttachClaim hands
// such a Sandbox out, and its first call resumes it (or says it may not; see AttachClaim).
func claimAttachable(c *extv1beta1.SandboxClaim) (bool, string, error) {
	done, reason, err := claimReady(c)
	if done || err != nil {
		return done, reason, err
	}
	return c.Status.Sandbox.Name != "" && reason == agentsv1beta1.ReasonSandboxSuspended, reason, nil
}

// claimBound is done as soon as the claim names its Sandbox (no Ready needed).
func claimBound(c *extv1beta1.SandboxClaim) (bool, string, error) {
	_, reason, err := claimReady(c)
	if err != nil {
		return false, reason, err
	}
	return c.Status.Sandbox.Name != "", reason, nil
}

// sandboxReady returns the check for "Ready=True with pod IPs", ignoring conditions
// computed before generation minGen (so a stale Ready from before a resume is not taken).
func sandboxReady(minGen int64) checkFn[*agentsv1beta1.Sandbox] {
	return func(s *agentsv1beta1.Sandbox) (bool, string, error) {
		if s.Spec.OperatingMode == agentsv1beta1.OperatingModeSuspended {
			return false, agentsv1beta1.ReasonSandboxSuspended, &SandboxFailedError{Namespace: s.Namespace,
				Name: s.Name, Reason: agentsv1beta1.ReasonSandboxSuspended, Message: "the Sandbox is suspended"}
		}
		ready := agentsv1beta1.FindCondition(s.Status.Conditions, agentsv1beta1.ConditionReady)
		if ready == nil || (ready.ObservedGeneration != 0 && ready.ObservedGeneration < minGen) {
			return false, "", nil
		}
		switch {
		case ready.Status == metav1.ConditionTrue && len(s.Status.PodIPs) > 0:
			return true, ready.Reason, nil
		case ready.Status == metav1.ConditionFalse && (ready.Reason == agentsv1beta1.ReasonPodFailed ||
			ready.Reason == agentsv1beta1.ReasonPodSucceeded || ready.Reason == agentsv1beta1.ReasonSandboxExpired):
			return false, ready.Reason, &SandboxFailedError{Namespace: s.Namespace, Name: s.Name,
				Reason: ready.Reason, Message: ready.Message}
		}
		return false, ready.Reason, nil
	}
}

// sandboxSuspended is done when the Suspended condition is True for generation minGen.
func sandboxSuspended(minGen int64) checkFn[*agentsv1beta1.Sandbox] {
	return func(s *agentsv1beta1.Sandbox) (bool, string, error) {
		c := agentsv1beta1.FindCondition(s.Status.Conditions, agentsv1beta1.ConditionSuspended)
		if c == nil || (c.ObservedGeneration != 0 && c.ObservedGeneration < minGen) {
			return false, "", nil
		}
		return c.Status == metav1.ConditionTrue, c.Reason, nil
	}
}
