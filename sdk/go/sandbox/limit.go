package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
)

// The default time limit (Options.DefaultTimeout): a request made on a context without a
// deadline gets one, chosen by the kind of call, so that a router, sandboxd or API server
// that stops answering does not hold the caller for ever. A context with a deadline is
// left as it is: the caller's deadline always wins, shorter or longer.

const (
	// DefaultRequestTimeout is the default of Options.DefaultTimeout (as upstream's
	// RequestTimeout, and the router's --proxy-timeout).
	DefaultRequestTimeout = 180 * time.Second
	// DefaultRunTimeout is sandboxd's own limit of a run or a code execution that asks
	// for none (its --exec-timeout): Exec, Run and RunCode without a Timeout are bounded
	// by this plus DefaultTimeout.
	DefaultRunTimeout = 300 * time.Second
	// NoTimeout as Options.DefaultTimeout (any negative value does the same): no default
	// limit; calls are bounded by their contexts only.
	NoTimeout time.Duration = -1
)

// limitKind is how the default limit bounds one request (with its retries).
type limitKind uint8

const (
	// limitRequest: the whole request, its answer read included, within DefaultTimeout.
	limitRequest limitKind = iota
	// limitRun: a call with a time of its own (call.runTimeout: a run's or a code
	// execution's timeout, a held wait's time): that time plus DefaultTimeout.
	limitRun
	// limitHead: a stream (a process's output, a watch, a download handed to the
	// caller, an upload from the caller's reader): DefaultTimeout for what the SDK waits
	// for on the network until the answer's head arrives (connecting, a body write the
	// peer does not take, the answer after the body), then none. The time spent in the
	// caller's body reader does not count.
	limitHead
	// limitFirstByte: limitHead until the answer's first byte, for a stream whose first
	// event the call itself reads (Start's start event, Watch's ready event).
	limitFirstByte
	// limitIdle: a transfer the SDK reads or writes whole (ReadFile, WriteFile, ReadRange,
	// WriteMany): limitHead, and after the head DefaultTimeout without a byte of the
	// answer (an upload's body counts as its reads go: the time between them is the
	// network's).
	limitIdle
)

// limitError is why a request the default limit ended failed: it matches
// context.DeadlineExceeded.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// Is matches context.DeadlineExceeded.
func (e *limitError) Is(target error) bool { return target == context.DeadlineExceeded }

// limiter is the default limit of one request; nil when none applies (every method
// is nil-safe).
type limiter struct {
	ctx     context.Context
	cancel  func()
	kind    limitKind
	d       time.Duration // the watchdog's period (limitHead, limitFirstByte, limitIdle)
	mu      sync.Mutex
	timer   *time.Timer // the watchdog (limitHead, limitFirstByte, limitIdle)
	stopped bool        // the watchdog is off for good
}

// newLimiter applies the default limit d (<= 0: none) of kind to ctx; nil when ctx has a
// deadline (the caller's wins) or there is no default.
func newLimiter(ctx context.Context, d time.Duration, kind limitKind, run time.Duration) *limiter {
	if d <= 0 {
		return nil
	}
	if _, ok := ctx.Deadline(); ok {
		return nil
	}
	l := &limiter{kind: kind, d: d}
	switch kind {
	case limitRequest, limitRun:
		total, msg := d, fmt.Sprintf("sandbox: no answer within the default time limit (%v; set a context "+
			"deadline or Options.DefaultTimeout)", d)
		if kind == limitRun {
			total = max(run, 0) + d
			msg = fmt.Sprintf("sandbox: no answer within the default time limit (the call's own time, %v, "+
				"plus %v; set a context deadline or Options.DefaultTimeout)", run, d)
		}
		ctx, cancel := context.WithTimeoutCause(ctx, total, &limitError{msg})
		l.ctx, l.cancel = ctx, cancel
	default:
		ctx, cancel := context.WithCancelCause(ctx)
		what := "no answer"
		if kind == limitIdle {
			what = "no progress"
		}
		cause := &limitError{fmt.Sprintf("sandbox: %s within the default time limit (%v; set a context "+
			"deadline or Options.DefaultTimeout)", what, d)}
		l.ctx, l.cancel = ctx, func() { cancel(nil) }
		l.timer = time.AfterFunc(d, func() { cancel(cause) })
	}
	return l
}

// pause stops the watchdog while the caller's reader has the request's time.
func (l *limiter) pause() {
	if l == nil || l.timer == nil {
		return
	}
	l.mu.Lock()
	l.timer.Stop()
	l.mu.Unlock()
}

// kick starts the watchdog's period again (progress, or the SDK waiting again).
func (l *limiter) kick() {
	if l == nil || l.timer == nil {
		return
	}
	l.mu.Lock()
	if !l.stopped {
		l.timer.Reset(l.d)
	}
	l.mu.Unlock()
}

// stop turns the watchdog off for good.
func (l *limiter) stop() {
	if l == nil || l.timer == nil {
		return
	}
	l.mu.Lock()
	l.stopped = true
	l.timer.Stop()
	l.mu.Unlock()
}

// release ends the limit's context (the request is over).
func (l *limiter) release() {
	if l == nil {
		return
	}
	l.stop()
	l.cancel()
}

// ctxErr is why ctx ended: the default limit's own error (a *limitError, which matches
// context.DeadlineExceeded) when that ended it, else ctx.Err(), never a cause of the
// caller's own (context.WithTimeoutCause and the like): errors.Is(err,
// context.DeadlineExceeded) and context.Canceled hold for what the SDK returns.
func ctxErr(ctx context.Context) error {
	var le *limitError
	if cause := context.Cause(ctx); errors.As(cause, &le) {
		return cause
	}
	return ctx.Err()
}

// err is err, carrying the limit's cause when the limit ended the request (an error
// that ended it otherwise, the caller's cancellation included, stays what it is).
func (l *limiter) err(err error) error {
	if l == nil || err == nil || err == io.EOF || l.ctx.Err() == nil {
		return err
	}
	cause := context.Cause(l.ctx)
	var le *limitError
	if !errors.As(cause, &le) || errors.Is(err, cause) {
		return err
	}
	return fmt.Errorf("%w (%w)", cause, err)
}

// watchBody makes the time req's body reader takes not count (limitHead, limitIdle): it
// is the caller's (an upload from a pipe may wait for its writer for as long as it
// likes), while the time between its reads is the network's.
func (l *limiter) watchBody(req *http.Request) {
	if l == nil || l.timer == nil || req.Body == nil || req.Body == http.NoBody {
		return
	}
	req.Body = &watchedBody{rc: req.Body, l: l}
	if gb := req.GetBody; gb != nil {
		req.GetBody = func() (io.ReadCloser, error) {
			rc, err := gb()
			if err != nil || rc == nil || rc == http.NoBody {
				return rc, err
			}
			return &watchedBody{rc: rc, l: l}, nil
		}
	}
}

type watchedBody struct {
	rc io.ReadCloser
	l  *limiter
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.l.pause()
	n, err := b.rc.Read(p)
	b.l.kick()
	return n, err
}

func (b *watchedBody) Close() error { return b.rc.Close() }

// finish ends the limit of a request that failed, or hands the limit over to the body
// of its answer (which releases it when closed): a stream's watchdog stops at the head,
// a transfer's goes on while the body is read.
func (l *limiter) finish(resp *http.Response, err error) (*http.Response, error) {
	if l == nil {
		return resp, err
	}
	if err != nil || resp == nil {
		err = l.err(err)
		l.release()
		return resp, err
	}
	body := &limitedBody{rc: resp.Body, l: l}
	if rw, ok := resp.Body.(io.ReadWriteCloser); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		// An upgraded connection (a WebSocket): a stream both ways, which its user
		// writes to through the body; the limit ends at the head and is released on Close.
		l.stop()
		resp.Body = &limitedRWBody{limitedBody: body, w: rw}
		return resp, nil
	}
	switch l.kind {
	case limitHead:
		l.stop()
	case limitIdle:
		l.kick()
	} // limitFirstByte: on until the body's first byte
	resp.Body = body
	return resp, nil
}

// limitedRWBody is the body of a 101 answer under its request's limit: it keeps the
// transport's Write, through which the caller talks on the upgraded connection.
type limitedRWBody struct {
	*limitedBody
	w io.Writer
}

func (b *limitedRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// limitedBody is an answer's body under its request's limit.
type limitedBody struct {
	rc   io.ReadCloser
	l    *limiter
	once sync.Once
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	switch {
	case n > 0 && b.l.kind == limitIdle:
		b.l.kick()
	case (n > 0 || err != nil) && b.l.kind == limitFirstByte:
		b.l.stop()
	}
	return n, b.l.err(err)
}

func (b *limitedBody) Close() error {
	err := b.rc.Close()
	b.once.Do(b.l.release)
	return err
}

// ---- the API server ---------------------------------------------------------------------

// limitedKube applies the default limit to the client's API requests (a watch is a
// stream: it is bounded by the wait it belongs to).
type limitedKube struct {
	k kube
	d time.Duration
}

func (l limitedKube) sandboxes(ns string) sandboxAPI {
	return limitedResource[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList]{l.k.sandboxes(ns), l.d}
}

func (l limitedKube) claims(ns string) claimAPI {
	return limitedResource[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList]{l.k.claims(ns), l.d}
}

func (l limitedKube) templates(ns string) templateAPI {
	return limitedResource[*extv1beta1.SandboxTemplate, *extv1beta1.SandboxTemplateList]{l.k.templates(ns), l.d}
}

// limitedResource bounds each request of one resource but Watch by limitRequest.
type limitedResource[T kobject, L runtime.Object] struct {
	kubeResource[T, L]
	d time.Duration
}

// apiCall runs f under the default limit of d.
func apiCall[R any](ctx context.Context, d time.Duration, f func(context.Context) (R, error)) (R, error) {
	l := newLimiter(ctx, d, limitRequest, 0)
	if l == nil {
		return f(ctx)
	}
	defer l.release()
	r, err := f(l.ctx)
	return r, l.err(err)
}

func (r limitedResource[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	return apiCall(ctx, r.d, func(ctx context.Context) (T, error) { return r.kubeResource.Get(ctx, name, opts) })
}

func (r limitedResource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	return apiCall(ctx, r.d, func(ctx context.Context) (L, error) { return r.kubeResource.List(ctx, opts) })
}

func (r limitedResource[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	return apiCall(ctx, r.d, func(ctx context.Context) (T, error) { return r.kubeResource.Create(ctx, obj, opts) })
}

func (r limitedResource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte,
	opts metav1.PatchOptions, subresources ...string) (T, error) {
	return apiCall(ctx, r.d, func(ctx context.Context) (T, error) {
		return r.kubeResource.Patch(ctx, name, pt, data, opts, subresources...)
	})
}

func (r limitedResource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	_, err := apiCall(ctx, r.d, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, r.kubeResource.Delete(ctx, name, opts)
	})
	return err
}
