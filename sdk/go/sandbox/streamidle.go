package sandbox

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// The idle bound of an answer's body (Options.StreamIdleTimeout): a connection that dies
// without a word (a node lost, a network partition: a half-open TCP connection never
// fails a read) would hold a stream's reader for ever, whatever the default limit (it
// ends at a stream's head) or the context's deadline (perhaps hours away). sandboxd
// never leaves a body silent for long: a process stream, a background output follow and
// a code execution get a keepalive event, a run and a held wait a space, and a quiet
// watch an empty line after 15 s of silence (--process-keepalive, --code-keepalive); a
// file's bytes flow as fast as the network takes them. So a read that waits much longer
// than that for a byte is on a dead connection: it ends the request (which closes the
// connection) and fails with a *StreamIdleError.

// DefaultStreamIdleTimeout is the default of Options.StreamIdleTimeout (as the Python
// SDK's bound of a silent stream): twenty of sandboxd's keepalive intervals.
const DefaultStreamIdleTimeout = 300 * time.Second

// StreamIdleError is a read of an answer's body that got no byte for Idle: the
// connection is taken for dead and closed, and every later read of the body fails with
// this error too. It matches context.DeadlineExceeded and ErrUnavailable (errors.Is),
// and is a timeout (its Timeout method, as net.Error's).
type StreamIdleError struct {
	Op   string        // the call, e.g. "start", "watch /src", "read /a.txt", "GET /events"
	Idle time.Duration // the bound that passed: Options.StreamIdleTimeout, or HTTPClientStreamIdleTimeout
}

func (e *StreamIdleError) Error() string {
	return fmt.Sprintf("sandbox: no data for %v: the connection is taken for dead", e.Idle)
}

// Is matches context.DeadlineExceeded and ErrUnavailable.
func (e *StreamIdleError) Is(target error) bool {
	return target == context.DeadlineExceeded || target == ErrUnavailable
}

// Timeout is true: the error is a timeout.
func (e *StreamIdleError) Timeout() bool { return true }

// idleBound puts one request under the idle bound d: its context is ended by the bound
// (through cancel) when a read of the answer's body waits longer than d.
type idleBound struct {
	op     string
	d      time.Duration
	ctx    context.Context // the request's
	cancel context.CancelCauseFunc
}

// newIdleBound derives the context of a request under the idle bound d from ctx; nil
// (and ctx) when d is not positive. Every path of the request ends with the bound's
// answer (or release when there is no answer).
func newIdleBound(ctx context.Context, op string, d time.Duration) (*idleBound, context.Context) {
	if d <= 0 {
		return nil, ctx
	}
	ctx, cancel := context.WithCancelCause(ctx)
	return &idleBound{op: op, d: d, ctx: ctx, cancel: cancel}, ctx
}

// release ends the request's context (no answer, or an answer the SDK read and closed).
func (b *idleBound) release() {
	if b != nil {
		b.cancel(nil)
	}
}

// answer puts resp's body under the bound and releases the context when resp is nil
// (err). An upgraded connection (101, a WebSocket: a stream both ways, its user's
// business) is not bounded: its body keeps its Write and releases the context on Close.
func (b *idleBound) answer(resp *http.Response, err error) (*http.Response, error) {
	if b == nil {
		return resp, err
	}
	if err != nil || resp == nil || resp.Body == nil {
		b.release()
		return resp, err
	}
	if rw, ok := resp.Body.(io.ReadWriteCloser); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body = &releasingRWBody{ReadWriteCloser: rw, release: b.release}
		return resp, nil
	}
	resp.Body = &idleBody{rc: resp.Body, d: b.d, ctx: b.ctx, cancel: b.cancel,
		err: &StreamIdleError{Op: b.op, Idle: b.d}}
	return resp, nil
}

// releasingRWBody is an upgraded connection's body: Close releases its request's context.
type releasingRWBody struct {
	io.ReadWriteCloser
	release func()
	once    sync.Once
}

func (b *releasingRWBody) Close() error {
	err := b.ReadWriteCloser.Close()
	b.once.Do(b.release)
	return err
}

// idleBody is an answer's body under the idle bound: a Read that waits more than d for
// its bytes ends the request's context (cancel, with err as its cause: the transport
// closes the connection, which ends the Read) and returns err, as does every Read after
// it. Only the time spent inside Read counts: the caller may take as long as it likes
// between reads (what came meanwhile is in the buffers). The watchdog runs only during
// a Read, so no timer outlives a Read, and Close ends the context.
type idleBody struct {
	rc     io.ReadCloser
	d      time.Duration
	ctx    context.Context // the request's
	cancel context.CancelCauseFunc
	err    *StreamIdleError

	mu       sync.Mutex
	timer    *time.Timer // the watchdog, made at the first Read
	deadline time.Time   // when the Read under way times out; zero: no Read under way
	fired    bool        // the bound ended the request
	closed   bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	if !b.arm() {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	if b.disarm() {
		return n, b.err
	}
	return n, err
}

// arm starts the watchdog for a Read; false once the bound ended the request.
func (b *idleBody) arm() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fired {
		return false
	}
	b.deadline = time.Now().Add(b.d)
	if b.timer == nil {
		b.timer = time.AfterFunc(b.d, b.fire)
	} else {
		b.timer.Reset(b.d)
	}
	return true
}

// disarm stops the watchdog after a Read; true when the bound ended the request.
func (b *idleBody) disarm() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deadline = time.Time{}
	b.timer.Stop()
	return b.fired
}

// fire is the watchdog: it ends the request when a Read has been waiting for d. A
// firing that comes late (its Read returned meanwhile; another one may have started
// since, with a later deadline), after Close or after the request's context ended (the
// caller's cancel or deadline: the Read returns that) does nothing.
func (b *idleBody) fire() {
	b.mu.Lock()
	if b.fired || b.closed || b.deadline.IsZero() || time.Now().Before(b.deadline) || b.ctx.Err() != nil {
		b.mu.Unlock()
		return
	}
	b.fired = true
	b.mu.Unlock()
	b.cancel(b.err)
}

func (b *idleBody) Close() error {
	b.mu.Lock()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
	}
	b.mu.Unlock()
	err := b.rc.Close()
	b.cancel(nil)
	return err
}
