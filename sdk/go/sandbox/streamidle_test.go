package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The idle bound of answers' bodies (streamidle.go), with tidle instead of 300 s.
const tidle = 200 * time.Millisecond

// tgap is a gap between the bytes of a stream that moves: well within tidle, while the
// whole stream lasts several tidle.
const tgap = tidle / 5

// idleServer answers by path: DELETE (a kill after a broken stream) with {}, others with
// h, which gets the request's number (from 1) on its path.
func idleServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request, n int, release <-chan struct{})) string {
	t.Helper()
	var counts [8]atomic.Int32
	paths := map[string]int{"/v1/processes": 0, "/v1/processes/run": 1, "/v1/watch/": 2, "/v1/files/x": 3,
		"/v1/processes/1/output": 4, "/page": 5}
	srv := limitServer(t, func(release <-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			if r.Method == http.MethodDelete {
				answer(w, http.StatusOK, `{}`)
				return
			}
			i, ok := paths[r.URL.Path]
			if !ok {
				i = len(counts) - 1
			}
			h(w, r, int(counts[i].Add(1)), release)
		}
	})
	return srv.URL
}

// gaps writes ps with a pause of d before each but the first (flushed), under ct; a
// trailing "" part stalls until the client goes away.
func gaps(ct string, d time.Duration, ps ...string) func(http.ResponseWriter, *http.Request, int, <-chan struct{}) {
	return func(w http.ResponseWriter, r *http.Request, _ int, release <-chan struct{}) {
		writeParts(w, r, release, ct, d, ps...)
	}
}

func writeParts(w http.ResponseWriter, r *http.Request, release <-chan struct{}, ct string, d time.Duration,
	ps ...string) {
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

// times is n times s.
func times(s string, n int) []string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = s
	}
	return ps
}

const (
	evStart = `{"type":"start","id":1,"pid":2}` + "\n"
	evOut   = `{"type":"stdout","data":"aGk="}` + "\n" // "hi"
	evExit  = `{"type":"exit","exit_code":0}` + "\n"
	evKeep  = `{"type":"keepalive"}` + "\n"
	evReady = `{"type":"ready"}` + "\n"
	evNew   = `{"type":"create","path":"a"}` + "\n"
	runJSON = `{"id":1,"exit_code":0,"stdout":"aGk=","stderr":""}`
)

// TestStreamIdle: a stream that goes silent after its first bytes fails after the idle
// bound with a *StreamIdleError (a deadline, an unavailability), whatever the context's
// deadline and the default limit; one whose bytes keep coming, each gap within the bound
// and the whole well past it, is not cut, nor one whose reader takes its time between
// reads; NoTimeout turns the bound off; Sandbox.HTTPClient's answers are bounded only
// when HTTPClientStreamIdleTimeout is set.
func TestStreamIdle(t *testing.T) {
	start := func(ctx context.Context, sb *Sandbox) error {
		var out strings.Builder
		p, err := sb.Start(ctx, Cmd{Command: "x", Stdout: &out})
		if err != nil {
			return err
		}
		if st, err := p.Wait(); err != nil || !st.Success() || out.String() != "hi" {
			return fmt.Errorf("wait: %+v, %w, output %q", st, err, out.String())
		}
		return nil
	}
	run := func(ctx context.Context, sb *Sandbox) error {
		r, err := sb.Run(ctx, "x")
		if err == nil && r.Stdout != "hi" {
			err = fmt.Errorf("run: %+v", r)
		}
		return err
	}
	readAll := func(ctx context.Context, sb *Sandbox) error {
		rc, err := sb.Files().Read(ctx, "x")
		if err != nil {
			return err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err == nil && strings.Trim(string(b), "ab") != "" {
			err = fmt.Errorf("read %q", b)
		}
		return err
	}
	// the reader takes 2*tidle between its reads of a body that came whole at once
	slowReader := func(ctx context.Context, sb *Sandbox) error {
		rc, err := sb.Files().Read(ctx, "x")
		if err != nil {
			return err
		}
		defer rc.Close()
		var got []byte
		b := make([]byte, 1)
		for {
			n, err := rc.Read(b)
			got = append(got, b[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			time.Sleep(2 * tidle)
		}
		if string(got) != "abc" {
			return fmt.Errorf("read %q", got)
		}
		return nil
	}
	readFile := func(ctx context.Context, sb *Sandbox) error {
		_, err := sb.Files().ReadFile(ctx, "x")
		return err
	}
	watch := func(ctx context.Context, sb *Sandbox) error {
		w, err := sb.Files().Watch(ctx, "", WatchOptions{})
		if err != nil {
			return err
		}
		defer w.Close()
		ev, err := w.Next()
		if err != nil {
			return err
		}
		if ev.Type != FileCreated || ev.Path != "a" {
			return fmt.Errorf("next: %+v", ev)
		}
		if _, err := w.Next(); err != io.EOF {
			return fmt.Errorf("after the event: %w, want io.EOF", err)
		}
		return nil
	}
	output := func(follow bool) func(context.Context, *Sandbox) error {
		return func(ctx context.Context, sb *Sandbox) error {
			o, err := sb.Background(1).Output(ctx, follow, 0)
			if err != nil {
				return err
			}
			defer o.Close()
			var types []string
			for {
				ev, err := o.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
				types = append(types, ev.Type)
			}
			if want := "stdout stdout exit"; strings.Join(types, " ") != want {
				return fmt.Errorf("events %q, want %q", types, want)
			}
			return nil
		}
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
			return fmt.Errorf("read %q: %w", b, err)
		}
		return nil
	}
	background := func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }
	hour := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), time.Hour)
	}
	cancelAfter := func(d time.Duration) func() (context.Context, context.CancelFunc) {
		return func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(d, cancel)
			return ctx, cancel
		}
	}
	// output: the first answer one event then silence, the next one the rest
	cutOutput := func(w http.ResponseWriter, r *http.Request, n int, release <-chan struct{}) {
		if n == 1 {
			writeParts(w, r, release, "application/x-ndjson", 0, `{"type":"stdout","offset":0,"data":"aGk="}`+"\n", "")
			return
		}
		writeParts(w, r, release, "application/x-ndjson", 0, `{"type":"stdout","offset":2,"data":"aGk="}`+"\n"+
			`{"type":"exit","exit_code":0,"offset":4}`+"\n")
	}
	const (
		ok       = "ok"
		idle     = "idle"
		canceled = "canceled"
	)
	type opt func(*Options)
	none := opt(func(*Options) {})
	off := opt(func(o *Options) { o.StreamIdleTimeout = NoTimeout })
	portBound := opt(func(o *Options) { o.HTTPClientStreamIdleTimeout = tidle })
	noDefault := opt(func(o *Options) { o.DefaultTimeout = NoTimeout })
	tests := []struct {
		name    string
		opt     opt
		server  func(http.ResponseWriter, *http.Request, int, <-chan struct{})
		ctx     func() (context.Context, context.CancelFunc)
		call    func(context.Context, *Sandbox) error
		want    string
		atLeast time.Duration
	}{
		{"Start: silent after its start", none, gaps("application/x-ndjson", 0, evStart, ""), background,
			start, idle, tidle},
		{"Start: silent under a caller's deadline an hour away", none, gaps("application/x-ndjson", 0, evStart, ""),
			hour, start, idle, tidle},
		{"Start: silent without a default limit", noDefault, gaps("application/x-ndjson", 0, evStart, ""),
			background, start, idle, tidle},
		{"Start: silent with the bound off waits for the caller", off, gaps("application/x-ndjson", 0, evStart, ""),
			cancelAfter(3 * tidle), start, canceled, 3 * tidle},
		{"Start: keepalives within the bound", none, gaps("application/x-ndjson", tgap,
			append(append([]string{evStart}, times(evKeep, 15)...), evOut+evExit)...), hour, start, ok, 0},
		{"Run: spaces, then silent", none, gaps("application/json", tgap, " ", " ", " ", ""), hour, run, idle, tidle},
		{"Run: spaces within the bound", none, gaps("application/json", tgap,
			append(times(" ", 15), runJSON)...), hour, run, ok, 0},
		{"Read: silent after its first bytes", none, gaps("application/octet-stream", 0, "ab", ""), hour,
			readAll, idle, tidle},
		{"Read: bytes within the bound", none, gaps("application/octet-stream", tgap, times("ab", 15)...),
			hour, readAll, ok, 0},
		{"Read: a reader slow between reads", none, gaps("application/octet-stream", 0, "abc"), hour,
			slowReader, ok, 4 * tidle},
		{"ReadFile: silent after its first bytes", none, gaps("application/octet-stream", 0, "ab", ""), hour,
			readFile, idle, tidle},
		{"Watch: silent after ready", none, gaps("application/x-ndjson", 0, evReady, ""), hour, watch, idle, tidle},
		{"Watch: empty lines within the bound", none, gaps("application/x-ndjson", tgap,
			append(append([]string{evReady}, times("\n", 15)...), evNew)...), hour, watch, ok, 0},
		{"Output: silent without follow", none, gaps("application/x-ndjson", 0,
			`{"type":"stdout","offset":0,"data":"aGk="}`+"\n", ""), hour, output(false), idle, tidle},
		{"Output: a follow silent is opened again", none, cutOutput, hour, output(true), ok, tidle},
		{"HTTPClient: unbounded by default", none, gaps("text/plain", 2*tidle, "ab", "cd"), hour, portGet, ok,
			2 * tidle},
		{"HTTPClient: silent with HTTPClientStreamIdleTimeout", portBound, gaps("text/plain", 0, "ab", ""), hour,
			portGet, idle, tidle},
		{"HTTPClient: bytes within HTTPClientStreamIdleTimeout", portBound,
			gaps("text/plain", tgap, "a", "b", "c", "d"), hour, portGet, ok, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := idleServer(t, tc.server)
			sb := attachReady(t, Connection{RouterURL: url, RouterToken: "t"}, func(o *Options) {
				o.DefaultTimeout = 10 * time.Second
				o.StreamIdleTimeout = tidle
				tc.opt(o)
			})
			ctx, cancel := tc.ctx()
			defer cancel()
			begun := time.Now()
			err := tc.call(ctx, sb)
			took := time.Since(begun)
			t.Logf("%v after %v", err, took)
			var ie *StreamIdleError
			switch tc.want {
			case ok:
				if err != nil {
					t.Fatalf("error %v after %v, want none", err, took)
				}
			case idle:
				if !errors.As(err, &ie) || !errors.Is(err, context.DeadlineExceeded) ||
					!errors.Is(err, ErrUnavailable) || ie.Idle != tidle || ie.Op == "" {
					t.Fatalf("error %v after %v, want a *StreamIdleError of %v", err, took, tidle)
				}
				var te interface{ Timeout() bool }
				if !errors.As(err, &te) || !te.Timeout() {
					t.Errorf("error %v is not a timeout", err)
				}
			case canceled:
				if !errors.Is(err, context.Canceled) || errors.As(err, &ie) {
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

// TestStreamIdleClosesConnection: the bound closes the stalled connection (the server
// sees its request end).
func TestStreamIdleClosesConnection(t *testing.T) {
	gone := make(chan struct{})
	url := idleServer(t, func(w http.ResponseWriter, r *http.Request, _ int, release <-chan struct{}) {
		writeParts(w, r, release, "application/octet-stream", 0, "ab")
		select {
		case <-r.Context().Done():
			close(gone)
		case <-release:
		}
	})
	sb := attachReady(t, Connection{RouterURL: url, RouterToken: "t"}, func(o *Options) {
		o.StreamIdleTimeout = tidle
	})
	rc, err := sb.Files().Read(testCtx(t), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if string(b) != "ab" || !errors.As(err, new(*StreamIdleError)) {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := rc.Read(make([]byte, 1)); !errors.As(err, new(*StreamIdleError)) {
		t.Errorf("a read after the bound: %v, want the bound's error again", err)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server's request did not end")
	}
}

// TestStreamIdleBody: the watchdog of one body: it runs only inside Read (a reader slow
// between reads is not cut), fires on a Read that waits (ending the request's context
// with the error as its cause), sticks, and after Close never fires; a late firing,
// or one after the caller's context ended, does nothing.
func TestStreamIdleBody(t *testing.T) {
	newBody := func(r io.ReadCloser) (*idleBody, context.Context) {
		ib, ctx := newIdleBound(context.Background(), "op", tidle)
		resp, _ := ib.answer(&http.Response{StatusCode: http.StatusOK, Body: r}, nil)
		return resp.Body.(*idleBody), ctx
	}
	t.Run("slow between reads", func(t *testing.T) {
		b, ctx := newBody(io.NopCloser(strings.NewReader("abc")))
		p := make([]byte, 1)
		for i := 0; i < 3; i++ {
			if n, err := b.Read(p); n != 1 || err != nil {
				t.Fatalf("read %d, %v", n, err)
			}
			time.Sleep(2 * tidle)
		}
		if err := ctx.Err(); err != nil {
			t.Fatalf("context ended: %v (%v)", err, context.Cause(ctx))
		}
		if _, err := b.Read(p); err != io.EOF {
			t.Fatalf("last read: %v, want io.EOF", err)
		}
		_ = b.Close()
		if !errors.Is(context.Cause(ctx), context.Canceled) {
			t.Errorf("after Close the context's cause is %v, want context.Canceled", context.Cause(ctx))
		}
	})
	t.Run("a Read that waits", func(t *testing.T) {
		pr, pw := io.Pipe()
		defer pw.Close()
		b, ctx := newBody(pr)
		// the transport's part: the request's end ends the read
		go func() { <-ctx.Done(); pw.CloseWithError(context.Cause(ctx)) }()
		begun := time.Now()
		_, err := b.Read(make([]byte, 1))
		var ie *StreamIdleError
		if !errors.As(err, &ie) || ie.Op != "op" || time.Since(begun) < tidle {
			t.Fatalf("read: %v after %v", err, time.Since(begun))
		}
		if !errors.As(context.Cause(ctx), &ie) {
			t.Errorf("the context's cause is %v, want the bound's", context.Cause(ctx))
		}
		if _, err := b.Read(make([]byte, 1)); !errors.As(err, &ie) {
			t.Errorf("read after: %v", err)
		}
		_ = b.Close()
	})
	t.Run("Close during a Read", func(t *testing.T) {
		pr, pw := io.Pipe()
		defer pw.Close()
		b, ctx := newBody(pr)
		done := make(chan error, 1)
		go func() { _, err := b.Read(make([]byte, 1)); done <- err }()
		time.Sleep(tidle / 4)
		_ = b.Close()
		err := <-done
		if errors.As(err, new(*StreamIdleError)) {
			t.Fatalf("read: %v, want the pipe's end", err)
		}
		time.Sleep(2 * tidle)
		if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
			t.Errorf("the context's cause is %v, want context.Canceled", cause)
		}
		if b.timer.Stop() {
			t.Error("the watchdog was still on after Close")
		}
	})
	t.Run("the caller's cancel first", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		ib, _ := newIdleBound(parent, "op", tidle)
		pr, pw := io.Pipe()
		resp, _ := ib.answer(&http.Response{StatusCode: http.StatusOK, Body: pr}, nil)
		b := resp.Body.(*idleBody)
		cancel()
		// a transport slow to end the Read: the watchdog leaves it to the caller's end
		time.AfterFunc(2*tidle, func() { _, _ = pw.Write([]byte("a")) })
		if n, err := b.Read(make([]byte, 1)); n != 1 || err != nil {
			t.Fatalf("read %d, %v; want the byte, no error", n, err)
		}
		_ = b.Close()
	})
	t.Run("late firing", func(t *testing.T) {
		b, ctx := newBody(io.NopCloser(strings.NewReader("abc")))
		if _, err := b.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		b.fire() // no Read under way
		b.mu.Lock()
		b.deadline = time.Now().Add(time.Hour) // a Read under way, not due
		b.mu.Unlock()
		b.fire()
		b.mu.Lock()
		b.deadline = time.Time{}
		b.mu.Unlock()
		if ctx.Err() != nil {
			t.Fatalf("a late firing ended the context: %v", context.Cause(ctx))
		}
		if n, err := b.Read(make([]byte, 2)); n != 2 || err != nil {
			t.Fatalf("read %d, %v", n, err)
		}
		_ = b.Close()
	})
}

// TestStreamIdleOptions: the bounds NewClient derives from the options.
func TestStreamIdleOptions(t *testing.T) {
	tests := []struct {
		stream, port         time.Duration
		wantStream, wantPort time.Duration
	}{
		{0, 0, DefaultStreamIdleTimeout, 0},
		{time.Minute, time.Second, time.Minute, time.Second},
		{NoTimeout, NoTimeout, 0, 0},
		{-time.Hour, -time.Hour, 0, 0},
	}
	for _, tc := range tests {
		c, err := NewClient(Options{Namespace: "ns", kube: newFakeKube(), Connection: Connection{Mode: ModeDirect},
			StreamIdleTimeout: tc.stream, HTTPClientStreamIdleTimeout: tc.port})
		if err != nil {
			t.Fatal(err)
		}
		if c.conn.streamIdle != tc.wantStream || c.conn.portIdle != tc.wantPort {
			t.Errorf("%v, %v: bounds %v, %v; want %v, %v", tc.stream, tc.port, c.conn.streamIdle, c.conn.portIdle,
				tc.wantStream, tc.wantPort)
		}
	}
}

// TestLocalStreamIdleKeepalives: sandboxd's keepalives (every 0.3 s here) keep silent
// processes within a bound of 1 s: a process stream, a run and a background output
// follow of a process silent for 2.5 s are not cut, in every connection mode.
func TestLocalStreamIdleKeepalives(t *testing.T) {
	const silent = "sleep 2.5; echo hi"
	for _, mode := range []Mode{ModeDirect, ModeRouter, ModePodProxy} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			sb := localSandbox(t, mode, func(o *Options) { o.StreamIdleTimeout = time.Second })
			ctx := testCtx(t)
			var out strings.Builder
			p, err := sb.Start(ctx, Cmd{Command: silent, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			if st, err := p.Wait(); err != nil || !st.Success() || out.String() != "hi\n" {
				t.Errorf("Start: %+v, %v, output %q", st, err, out.String())
			}
			if r, err := sb.Run(ctx, silent); err != nil || r.Stdout != "hi\n" {
				t.Errorf("Run: %+v, %v", r, err)
			}
			bp, err := sb.StartBackground(ctx, Cmd{Command: silent})
			if err != nil {
				t.Fatal(err)
			}
			o, err := bp.Output(ctx, true, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			var got strings.Builder
			for {
				ev, err := o.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("Output: %v", err)
				}
				got.Write(ev.Data)
			}
			if got.String() != "hi\n" {
				t.Errorf("Output: %q", got.String())
			}
		})
	}
}
