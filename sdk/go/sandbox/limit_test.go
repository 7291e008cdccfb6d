package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
)

// The default time limit (limit.go), with a default of tlimit instead of 180 s.
const tlimit = 100 * time.Millisecond

// tlate is how long the slow servers of these tests take: well past tlimit.
const tlate = 400 * time.Millisecond

// limitServer serves h; a handler that waits selects on release too (closed before the
// server, which waits for its handlers: one that never read a body is not told that
// the client went away).
func limitServer(t *testing.T, h func(release <-chan struct{}) http.HandlerFunc) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(h(release))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv
}

// pauseFor waits d, or less when the client went away or the test ended; it reports
// whether d passed.
func pauseFor(r *http.Request, release <-chan struct{}, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-r.Context().Done():
	case <-release:
	}
	return false
}

// never answers.
func never(release <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		pauseFor(r, release, time.Hour)
	}
}

// late answers body (JSON) after d, the request's body read.
func late(d time.Duration, body string) func(<-chan struct{}) http.HandlerFunc {
	return func(release <-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			if pauseFor(r, release, d) {
				answer(w, http.StatusOK, body)
			}
		}
	}
}

// parts sends its parts with gaps of d between them (flushed), under a JSON or an
// octet-stream content type; a trailing "" part waits without end.
func parts(ct string, d time.Duration, ps ...string) func(<-chan struct{}) http.HandlerFunc {
	return func(release <-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", ct)
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for i, p := range ps {
				if i > 0 && !pauseFor(r, release, d) {
					return
				}
				if p == "" {
					pauseFor(r, release, time.Hour)
					return
				}
				_, _ = io.WriteString(w, p)
				w.(http.Flusher).Flush()
			}
		}
	}
}

// heldWait answers a background wait after the time it asks to be held, "running".
func heldWait(release <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var s float64
		_, _ = fmt.Sscan(r.URL.Query().Get("timeout"), &s)
		if pauseFor(r, release, time.Duration(s*float64(time.Second))) {
			answer(w, http.StatusOK, `{"id":1,"state":"running"}`)
		}
	}
}

// slowReader gives data after a pause of d (the caller's time: not the network's).
type slowReader struct {
	d    time.Duration
	data string
	done bool
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.done {
		return 0, io.EOF
	}
	time.Sleep(r.d)
	r.done = true
	return copy(p, r.data), nil
}

const statJSONx = `{"name":"x","path":"/x","type":"file","size":1,"mode":"0644"}`

// TestDefaultTimeout: a data-plane call whose context has no deadline ends after the
// default limit when the server does not answer, by kind of call: a request within the
// limit, a run or a held wait within its own time plus the limit, a stream until it
// begins (then never), a transfer after the limit without progress. A caller's deadline
// wins, shorter or longer; NoTimeout waits until the caller cancels.
func TestDefaultTimeout(t *testing.T) {
	background := func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }
	within := func(d time.Duration) func() (context.Context, context.CancelFunc) {
		return func() (context.Context, context.CancelFunc) { return context.WithTimeout(context.Background(), d) }
	}
	cancelAfter := func(d time.Duration) func() (context.Context, context.CancelFunc) {
		return func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(d, cancel)
			return ctx, cancel
		}
	}
	// a caller's own causes (context.WithTimeoutCause, WithCancelCause): what the SDK
	// returns still matches context.DeadlineExceeded or context.Canceled
	withCause := func(d time.Duration) func() (context.Context, context.CancelFunc) {
		return func() (context.Context, context.CancelFunc) {
			return context.WithTimeoutCause(context.Background(), d, errors.New("the caller's cause"))
		}
	}
	cancelCauseAfter := func(d time.Duration) func() (context.Context, context.CancelFunc) {
		return func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancelCause(context.Background())
			time.AfterFunc(d, func() { cancel(errors.New("the caller's cause")) })
			return ctx, func() { cancel(nil) }
		}
	}
	stat := func(ctx context.Context, sb *Sandbox) error { _, err := sb.Files().Stat(ctx, "x"); return err }
	run := func(timeout time.Duration) func(context.Context, *Sandbox) error {
		return func(ctx context.Context, sb *Sandbox) error {
			_, err := sb.Exec(ctx, Cmd{Command: "sleep 1", Timeout: timeout})
			return err
		}
	}
	start := func(ctx context.Context, sb *Sandbox) error {
		var out strings.Builder
		p, err := sb.Start(ctx, Cmd{Command: "x", Stdout: &out})
		if err != nil {
			return err
		}
		if st, err := p.Wait(); err != nil || !st.Success() || out.String() != "hi" {
			return fmt.Errorf("wait: %+v, %v, output %q", st, err, out.String())
		}
		return nil
	}
	read := func(ctx context.Context, sb *Sandbox) error {
		rc, err := sb.Files().Read(ctx, "x")
		if err != nil {
			return err
		}
		defer rc.Close()
		if b, err := io.ReadAll(rc); err != nil || string(b) != "abcd" {
			return fmt.Errorf("read %q, %v", b, err)
		}
		return nil
	}
	readFile := func(ctx context.Context, sb *Sandbox) error {
		b, err := sb.Files().ReadFile(ctx, "x")
		if err == nil && string(b) != "abcdefgh" {
			err = fmt.Errorf("read %q", b)
		}
		return err
	}
	watch := func(ctx context.Context, sb *Sandbox) error {
		w, err := sb.Files().Watch(ctx, "", WatchOptions{})
		if err != nil {
			return err
		}
		defer w.Close()
		if ev, err := w.Next(); err != nil || ev.Type != FileCreated || ev.Path != "a" {
			return fmt.Errorf("next: %+v, %v", ev, err)
		}
		return nil
	}
	write := func(ctx context.Context, sb *Sandbox) error {
		return sb.Files().Write(ctx, "x", &slowReader{d: tlate, data: "data"})
	}
	bgWait := func(ctx context.Context, sb *Sandbox) error {
		info, err := sb.Background(1).Wait(ctx, tlate)
		if err == nil && !info.Running() {
			err = fmt.Errorf("info %+v", info)
		}
		return err
	}
	portGet := func(ctx context.Context, sb *Sandbox) error {
		hc, base, err := sb.HTTPClient(8000)
		if err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"page", nil)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "abcd" {
			return fmt.Errorf("read %q, %v", b, err)
		}
		return nil
	}
	const (
		ok       = "ok"
		deadline = "deadline"
		canceled = "canceled"
	)
	tests := []struct {
		name    string
		limit   time.Duration // Options.DefaultTimeout
		server  func(<-chan struct{}) http.HandlerFunc
		ctx     func() (context.Context, context.CancelFunc)
		call    func(context.Context, *Sandbox) error
		want    string
		atLeast time.Duration // the call's least duration (a deadline or a cancel)
	}{
		{"request: no answer ends after the default", tlimit, never, background, stat, deadline, tlimit},
		{"request: the caller's shorter deadline wins", 10 * time.Second, never, within(150 * time.Millisecond),
			stat, deadline, 150 * time.Millisecond},
		{"request: the caller's longer deadline wins", tlimit, late(tlate, statJSONx), within(10 * time.Second),
			stat, ok, 0},
		{"request: an answer within the default", 2 * time.Second, late(tlate, statJSONx), background, stat, ok, 0},
		{"request: NoTimeout waits until the caller cancels", NoTimeout, never, cancelAfter(tlate), stat,
			canceled, tlate},
		{"request: a negative value is NoTimeout", -time.Second, never, cancelAfter(tlate), stat, canceled, tlate},
		{"request: a caller's deadline with a cause of its own is a deadline", 10 * time.Second, never,
			withCause(150 * time.Millisecond), stat, deadline, 150 * time.Millisecond},
		{"request: a caller's cancel with a cause of its own is a cancel", 10 * time.Second, never,
			cancelCauseAfter(tlate), stat, canceled, tlate},
		{"run: its own timeout is not cut", tlimit, late(tlate, `{"id":1,"exit_code":0,"stdout":"","stderr":""}`),
			background, run(2 * tlate), ok, 0},
		{"run: no answer ends after its timeout plus the default", tlimit, never, background, run(2 * tlimit),
			deadline, 3 * tlimit},
		{"background wait: its hold is not cut", tlimit, heldWait, background, bgWait, ok, tlate},
		{"stream: Start without an answer ends after the default", tlimit, never, background, start, deadline,
			tlimit},
		{"stream: Start is not cut once streaming", tlimit, parts("application/x-ndjson", tlate,
			`{"type":"start","id":1,"pid":2}`+"\n", `{"type":"stdout","data":"aGk="}`+"\n"+
				`{"type":"exit","exit_code":0}`+"\n"), background, start, ok, 0},
		{"stream: Start with NoTimeout waits until the caller cancels", NoTimeout, never, cancelAfter(tlate),
			start, canceled, tlate},
		{"stream: Read is not cut once streaming", tlimit, parts("application/octet-stream", tlate, "ab", "cd"),
			background, read, ok, 0},
		{"stream: Watch without a first byte ends after the default", tlimit,
			parts("application/x-ndjson", 0, ""), background, watch, deadline, tlimit},
		{"stream: Watch is not cut once streaming", tlimit, parts("application/x-ndjson", tlate,
			`{"type":"ready"}`+"\n", `{"type":"create","path":"a"}`+"\n"), background, watch, ok, 0},
		{"stream: Write from a slow reader is not cut", tlimit, late(0, `{}`), background, write, ok, tlate},
		{"stream: Write without an answer after the body ends", tlimit, never, background, write, deadline,
			tlate + tlimit},
		{"stream: a port request without an answer ends after the default", tlimit, never, background, portGet,
			deadline, tlimit},
		{"stream: a port request is not cut once streaming", tlimit,
			parts("text/plain", tlate, "ab", "cd"), background, portGet, ok, 0},
		{"transfer: ReadFile that stalls ends after the default", tlimit,
			parts("application/octet-stream", 0, "ab", ""), background, readFile, deadline, tlimit},
		{"transfer: ReadFile that moves is not cut", tlimit, parts("application/octet-stream", tlimit/2,
			"a", "b", "c", "d", "e", "f", "g", "h"), background, readFile, ok, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := limitServer(t, tc.server)
			sb := attachReady(t, Connection{RouterURL: srv.URL, RouterToken: "t"},
				func(o *Options) { o.DefaultTimeout = tc.limit })
			ctx, cancel := tc.ctx()
			defer cancel()
			begun := time.Now()
			err := tc.call(ctx, sb)
			took := time.Since(begun)
			t.Logf("%v after %v", err, took)
			switch tc.want {
			case ok:
				if err != nil {
					t.Fatalf("error %v after %v, want none", err, took)
				}
			case deadline:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("error %v after %v, want a deadline", err, took)
				}
			case canceled:
				if !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("error %v after %v, want the caller's cancel", err, took)
				}
			}
			if took < tc.atLeast {
				t.Errorf("ended after %v, before %v", took, tc.atLeast)
			}
			if tc.want != ok && took > tc.atLeast+5*time.Second {
				t.Errorf("ended after %v, want about %v", took, tc.atLeast)
			}
		})
	}
}

// TestDefaultTimeoutUpgrade: a port request answered 101 (a WebSocket) keeps a body the
// caller can write to, under the default limit too, and the upgraded connection is not
// cut after the limit.
func TestDefaultTimeoutUpgrade(t *testing.T) {
	srv := limitServer(t, func(release <-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			conn, rw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
			_ = rw.Flush()
			_, _ = io.Copy(conn, rw) // echo what the client writes, until it closes
		}
	})
	sb := attachReady(t, Connection{RouterURL: srv.URL, RouterToken: "t"},
		func(o *Options) { o.DefaultTimeout = tlimit })
	hc, base, err := sb.HTTPClient(8000)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("the 101 answer's body %T cannot be written to", resp.Body)
	}
	time.Sleep(3 * tlimit) // past the limit: the upgraded connection is not cut
	if _, err := rw.Write([]byte("ping")); err != nil {
		t.Fatalf("write: %v", err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(rw, b); err != nil || string(b) != "ping" {
		t.Fatalf("read %q, %v", b, err)
	}
}

// TestDefaultTimeoutAPI: API server requests get the default limit too, the caller's
// deadline winning and NoTimeout waiting until the caller cancels; a wait for Ready is
// bounded by ReadyTimeout, not cut by the shorter default.
func TestDefaultTimeoutAPI(t *testing.T) {
	tests := []struct {
		name    string
		limit   time.Duration
		ready   time.Duration // Options.ReadyTimeout
		ctx     func() (context.Context, context.CancelFunc)
		call    func(context.Context, *Client) error
		want    error
		atLeast time.Duration
	}{
		{"get", tlimit, 0, nil, func(ctx context.Context, c *Client) error {
			_, err := c.Attach(ctx, "sb")
			return err
		}, context.DeadlineExceeded, tlimit},
		{"list", tlimit, 0, nil, func(ctx context.Context, c *Client) error {
			_, err := c.ListClaims(ctx, ListOptions{})
			return err
		}, context.DeadlineExceeded, tlimit},
		{"delete", tlimit, 0, nil, func(ctx context.Context, c *Client) error {
			return c.DeleteSandbox(ctx, "sb")
		}, context.DeadlineExceeded, tlimit},
		{"the caller's shorter deadline wins", 10 * time.Second, 0, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 150*time.Millisecond)
		}, func(ctx context.Context, c *Client) error {
			_, err := c.Attach(ctx, "sb")
			return err
		}, context.DeadlineExceeded, 150 * time.Millisecond},
		{"NoTimeout waits until the caller cancels", NoTimeout, 0, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(tlate, cancel)
			return ctx, cancel
		}, func(ctx context.Context, c *Client) error {
			_, err := c.Attach(ctx, "sb")
			return err
		}, context.Canceled, tlate},
		{"a wait for Ready runs its ReadyTimeout", tlimit, tlate, nil, func(ctx context.Context, c *Client) error {
			_, err := c.AttachClaim(ctx, "claim")
			return err
		}, ErrTimeout, tlate},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := limitServer(t, never)
			c, err := NewClient(Options{RestConfig: &rest.Config{Host: srv.URL}, Namespace: "ns",
				Connection: Connection{RouterURL: srv.URL, RouterToken: "t"}, DefaultTimeout: tc.limit,
				ReadyTimeout: tc.ready})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			begun := time.Now()
			err = tc.call(ctx, c)
			took := time.Since(begun)
			t.Logf("%v after %v", err, took)
			if !errors.Is(err, tc.want) || (tc.want == context.Canceled && errors.Is(err, context.DeadlineExceeded)) {
				t.Fatalf("error %v after %v, want %v", err, took, tc.want)
			}
			if took < tc.atLeast || took > tc.atLeast+5*time.Second {
				t.Errorf("ended after %v, want about %v", took, tc.atLeast)
			}
		})
	}
}

// TestDefaultTimeoutWaitReady: a wait for Ready longer than the default limit is not cut
// by it (it has ReadyTimeout).
func TestDefaultTimeoutWaitReady(t *testing.T) {
	k := newFakeKube()
	sb := readySandbox("sb", "10.0.0.1")
	sb.Status.Conditions = []metav1.Condition{cond("Ready", "False", "DependenciesNotReady", 1)}
	k.sbx.Add(sb)
	c, err := NewClient(Options{Namespace: "ns", kube: k, Connection: Connection{Mode: ModeDirect},
		DefaultTimeout: tlimit, ReadyTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Attach(context.Background(), "sb")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(tlate, func() {
		k.sbx.mu.Lock()
		defer k.sbx.mu.Unlock()
		k.sbx.update("sb", func(s *agentsv1beta1.Sandbox) {
			s.Status.Conditions = []metav1.Condition{cond("Ready", "True", "DependenciesReady", 1)}
		})
	})
	begun := time.Now()
	if err := h.WaitReady(context.Background()); err != nil {
		t.Fatalf("WaitReady: %v after %v", err, time.Since(begun))
	}
	if took := time.Since(begun); took < tlate {
		t.Errorf("ready after %v, before the update", took)
	}
}

// TestNewLimiter: the limit each kind of call gets, and none under a caller's deadline
// or without a default.
func TestNewLimiter(t *testing.T) {
	const d = time.Minute
	withDeadline, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		d        time.Duration
		kind     limitKind
		run      time.Duration
		none     bool          // no limiter
		deadline time.Duration // from now; 0: none (a watchdog)
	}{
		{"no default", context.Background(), 0, limitRequest, 0, true, 0},
		{"the caller's deadline", withDeadline, d, limitRequest, 0, true, 0},
		{"the caller's deadline, a run", withDeadline, d, limitRun, time.Hour, true, 0},
		{"request", context.Background(), d, limitRequest, 0, false, d},
		{"run with its timeout", context.Background(), d, limitRun, 10 * time.Minute, false, 11 * time.Minute},
		{"run without one (sandboxd's)", context.Background(), d, limitRun, runTime(0), false,
			DefaultRunTimeout + d},
		{"stream", context.Background(), d, limitHead, 0, false, 0},
		{"stream to its first byte", context.Background(), d, limitFirstByte, 0, false, 0},
		{"transfer", context.Background(), d, limitIdle, 0, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter(tc.ctx, tc.d, tc.kind, tc.run)
			if tc.none {
				if l != nil {
					t.Fatal("a limit, want none")
				}
				return
			}
			defer l.release()
			dl, ok := l.ctx.Deadline()
			switch {
			case tc.deadline == 0 && (ok || l.timer == nil):
				t.Errorf("deadline %v (%v), timer %v: want a watchdog", dl, ok, l.timer != nil)
			case tc.deadline != 0 && (!ok || l.timer != nil):
				t.Errorf("deadline %v (%v), timer %v: want a deadline", dl, ok, l.timer != nil)
			case ok && (time.Until(dl) > tc.deadline || time.Until(dl) < tc.deadline-time.Second):
				t.Errorf("deadline in %v, want %v", time.Until(dl), tc.deadline)
			}
		})
	}
}
