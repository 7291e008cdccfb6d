package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// procServer is a stand-in sandboxd for one streamed process (id 5): its stream ends
// with an exit event when stdin is closed (exit 0) or the process is killed (signal 9).
type procServer struct {
	mu     sync.Mutex
	writes []string // bodies of the stdin requests, in order
	closed bool     // stdin was closed
	kills  int
	ended  chan ExitStatus
	once   sync.Once
	// stdin and kill answer the n-th such request (1-based), closeStdin a stdin close;
	// nil: 204.
	stdin      func(n int, r *http.Request) (int, string)
	kill       func(n int) (int, string)
	closeStdin func() (int, string)
}

func newProcServer(t *testing.T, ps *procServer) *Sandbox {
	t.Helper()
	ps.ended = make(chan ExitStatus, 1)
	srv := httptest.NewServer(ps)
	t.Cleanup(srv.Close)
	return handleFor(t, srv)
}

func (s *procServer) end(st ExitStatus) { s.once.Do(func() { s.ended <- st }) }

func (s *procServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/processes":
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"type":"start","id":5,"pid":9}`+"\n")
		w.(http.Flusher).Flush()
		select {
		case st := <-s.ended:
			_, _ = fmt.Fprintf(w, `{"type":"exit","exit_code":%d,"signal":%d}`+"\n", st.ExitCode, st.Signal)
		case <-r.Context().Done():
		}
	case r.Method == http.MethodPost && r.URL.Path == "/v1/processes/5/stdin":
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.writes = append(s.writes, string(b))
		n := len(s.writes)
		s.mu.Unlock()
		status, body := http.StatusNoContent, ""
		if s.stdin != nil {
			status, body = s.stdin(n, r)
		}
		answer(w, status, body)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/processes/5/stdin/close":
		if s.closeStdin != nil {
			if status, body := s.closeStdin(); status != http.StatusNoContent {
				answer(w, status, body)
				return
			}
		}
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		s.end(ExitStatus{})
	case r.Method == http.MethodDelete && r.URL.Path == "/v1/processes/5":
		s.mu.Lock()
		s.kills++
		n := s.kills
		s.mu.Unlock()
		if s.kill != nil {
			if status, body := s.kill(n); status != http.StatusNoContent {
				answer(w, status, body)
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
		s.end(ExitStatus{ExitCode: -1, Signal: 9})
	default:
		answer(w, http.StatusNotFound, `{"code":"NOT_FOUND","message":"no route"}`)
	}
}

func (s *procServer) state() (writes []string, closed bool, kills int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{}, s.writes...), s.closed, s.kills
}

// failingReader fails every Read with err.
type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

const lostAfterSend = `{"detail":"The backend sandbox closed the connection or answered badly"}`

// TestCopyStdinFailures: Cmd.Stdin that cannot be copied (a failed stdin request, a
// failed Read) closes stdin, so the process ends, and Wait reports the failure with the
// exit status; a failed close at EOF kills the process; a process that takes no more
// input is no error (as os/exec's EPIPE).
func TestCopyStdinFailures(t *testing.T) {
	fastRetries(t)
	readErr := errors.New("x")
	var ps *procServer
	var closes atomic.Int32
	tests := []struct {
		name       string
		stdin      io.Reader
		answer     func(n int, r *http.Request) (int, string)
		close      func() (int, string)
		check      func(error) bool // Wait's error
		wantWrites string
		wantClosed bool // stdin was closed
		wantKills  int
		pty        bool
	}{
		{"a stdin request fails (502)", io.MultiReader(strings.NewReader("a"), strings.NewReader("b"),
			strings.NewReader("c")),
			func(n int, _ *http.Request) (int, string) {
				if n == 2 {
					return http.StatusBadGateway, lostAfterSend
				}
				return http.StatusNoContent, ""
			}, nil,
			func(err error) bool {
				var he *HTTPError
				return errors.As(err, &he) && he.StatusCode == http.StatusBadGateway
			}, "a,b", true, 0, false},
		{"the reader fails", io.MultiReader(strings.NewReader("a"), failingReader{readErr}), nil, nil,
			func(err error) bool { return errors.Is(err, readErr) }, "a", true, 0, false},
		{"the close at EOF fails", strings.NewReader("a"), nil,
			func() (int, string) { return http.StatusBadGateway, lostAfterSend },
			func(err error) bool {
				var he *HTTPError
				return errors.As(err, &he) && he.StatusCode == http.StatusBadGateway
			}, "a", false, 1, false},
		{"the process closed its stdin", io.MultiReader(strings.NewReader("a"), strings.NewReader("b"),
			strings.NewReader("c")),
			func(n int, _ *http.Request) (int, string) {
				if n == 2 {
					ps.end(ExitStatus{})
					return http.StatusBadRequest, `{"code":"FAILED_PRECONDITION","message":"stdin is closed"}`
				}
				return http.StatusNoContent, ""
			}, nil,
			func(err error) bool { return err == nil }, "a,b", false, 0, false},
		{"all copied", strings.NewReader("abc"), nil, nil, func(err error) bool { return err == nil }, "abc", true, 0, false},
		{"the close at EOF fails once (502): retried, no kill", strings.NewReader("a"), nil,
			func() (int, string) {
				if closes.Add(1) == 1 {
					return http.StatusBadGateway, lostAfterSend
				}
				return http.StatusNoContent, ""
			},
			func(err error) bool { return err == nil }, "a", true, 0, false},
		// on a PTY each close writes ^D: a resend after a lost answer would write a
		// second one, so the close goes once (the failure then kills, as without one)
		{"PTY: the close at EOF fails once (502): not resent", strings.NewReader("a"), nil,
			func() (int, string) {
				if closes.Add(1) == 1 {
					return http.StatusBadGateway, lostAfterSend
				}
				return http.StatusNoContent, ""
			},
			func(err error) bool {
				var he *HTTPError
				return errors.As(err, &he) && he.StatusCode == http.StatusBadGateway
			}, "a", false, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ps = &procServer{stdin: tc.answer, closeStdin: tc.close}
			closes.Store(0)
			sb := newProcServer(t, ps)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			cmd := Cmd{Command: "cat", Stdin: tc.stdin}
			if tc.pty {
				cmd.PTY = &PTYSize{Cols: 80, Rows: 24}
			}
			p, err := sb.Start(ctx, cmd)
			if err != nil {
				t.Fatal(err)
			}
			st, err := p.Wait()
			if !tc.check(err) {
				t.Errorf("Wait: %v", err)
			}
			if st == nil || st.Success() != (tc.wantKills == 0) {
				t.Errorf("exit %+v, want the process's own exit (killed: %v)", st, tc.wantKills > 0)
			}
			writes, closed, kills := ps.state()
			if got := strings.Join(writes, ","); got != tc.wantWrites || closed != tc.wantClosed || kills != tc.wantKills {
				t.Errorf("stdin writes %q, closed %v, %d kills; want %q, %v, %d", got, closed, kills, tc.wantWrites,
					tc.wantClosed, tc.wantKills)
			}
		})
	}
}

// TestStdinWaitBoundedByContext: CloseStdin (and WriteStdin) wait for a stdin request
// in flight only within their own context.
func TestStdinWaitBoundedByContext(t *testing.T) {
	gate := make(chan struct{})
	ps := &procServer{stdin: func(n int, r *http.Request) (int, string) {
		if n == 1 {
			select {
			case <-gate:
			case <-r.Context().Done():
			}
		}
		return http.StatusNoContent, ""
	}}
	sb := newProcServer(t, ps)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	p, err := sb.Start(ctx, Cmd{Command: "cat"})
	if err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- p.WriteStdin(ctx, []byte("a")) }()
	eventually(t, "the write in flight", func() bool { w, _, _ := ps.state(); return len(w) == 1 })
	short, scancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer scancel()
	tests := []struct {
		name string
		op   func() error
	}{
		{"CloseStdin", func() error { return p.CloseStdin(short) }},
		{"WriteStdin", func() error { return p.WriteStdin(short, []byte("b")) }},
	}
	for _, tc := range tests {
		err := tc.op()
		select {
		case werr := <-wrote:
			t.Fatalf("%s returned (%v) only after the write in flight ended (%v)", tc.name, err, werr)
		default:
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want its deadline", tc.name, err)
		}
	}
	close(gate)
	if err := <-wrote; err != nil {
		t.Fatalf("WriteStdin: %v", err)
	}
	if err := p.CloseStdin(ctx); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	if st, err := p.Wait(); err != nil || !st.Success() {
		t.Errorf("Wait: %+v, %v", st, err)
	}
	if w, closed, _ := ps.state(); strings.Join(w, ",") != "a" || !closed {
		t.Errorf("stdin %q, closed %v", w, closed)
	}
}

// TestKillRetried: a kill is idempotent, so it is sent again after a proxy's 502 that
// followed forwarding.
func TestKillRetried(t *testing.T) {
	ps := &procServer{kill: func(n int) (int, string) {
		if n == 1 {
			return http.StatusBadGateway, lostAfterSend
		}
		return http.StatusNoContent, ""
	}}
	sb := newProcServer(t, ps)
	p, err := sb.Start(testCtx(t), Cmd{Command: "sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(testCtx(t)); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if st, err := p.Wait(); err != nil || st.Signal != 9 {
		t.Errorf("Wait: %+v, %v", st, err)
	}
	if _, _, kills := ps.state(); kills != 2 {
		t.Errorf("%d kills, want 2", kills)
	}
}

// readerFunc is an io.Reader made of a function.
type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

type inlineStdinOp struct {
	name string
	op   func(context.Context, io.Reader) error
}

// inlineStdinOps are the calls that read Cmd.Stdin before sending: Exec and
// StartBackground with cat.
func inlineStdinOps(sb *Sandbox) []inlineStdinOp {
	return []inlineStdinOp{
		{"Exec", func(ctx context.Context, r io.Reader) error {
			_, err := sb.Exec(ctx, Cmd{Command: "cat", Stdin: r})
			return err
		}},
		{"StartBackground", func(ctx context.Context, r io.Reader) error {
			_, err := sb.StartBackground(ctx, Cmd{Command: "cat", Stdin: r})
			return err
		}},
	}
}

// TestInlineStdinHonoursContext: Exec and StartBackground read Cmd.Stdin before sending;
// a Read that blocks does not keep them past their context's end.
func TestInlineStdinHonoursContext(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		answer(w, http.StatusInternalServerError, `{"code":"INTERNAL","message":"unexpected"}`)
	}))
	defer srv.Close()
	sb := handleFor(t, srv)
	ops := inlineStdinOps(sb)
	cancels := []struct {
		name   string
		cancel func(context.CancelFunc)
	}{
		{"cancelled before", func(cancel context.CancelFunc) { cancel() }},
		{"cancelled while reading", func(cancel context.CancelFunc) { time.AfterFunc(20*time.Millisecond, cancel) }},
	}
	for _, o := range ops {
		for _, c := range cancels {
			t.Run(o.name+", "+c.name, func(t *testing.T) {
				gate := make(chan struct{})
				defer close(gate)
				blocking := readerFunc(func([]byte) (int, error) { <-gate; return 0, io.EOF })
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				c.cancel(cancel)
				done := make(chan error, 1)
				go func() { done <- o.op(ctx, blocking) }()
				select {
				case err := <-done:
					if !errors.Is(err, context.Canceled) {
						t.Errorf("error %v, want context.Canceled", err)
					}
				case <-time.After(5 * time.Second):
					t.Error("still reading stdin 5 s after the context ended")
				}
			})
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// fastRetries makes the data-plane back-off 1 ms for the test.
func fastRetries(t *testing.T) {
	old := retryDelay
	retryDelay = time.Millisecond
	t.Cleanup(func() { retryDelay = old })
}

// TestStdinQueueFullIsBackpressure: sandboxd's 429 "stdin queue is full" (nothing
// queued), more of them than one request's retries, delays Cmd.Stdin: the chunk is sent
// again until it is taken, all input arrives and stdin is closed at EOF only.
func TestStdinQueueFullIsBackpressure(t *testing.T) {
	fastRetries(t)
	var mu sync.Mutex
	var taken []string
	ps := &procServer{stdin: func(n int, r *http.Request) (int, string) {
		if n >= 2 && n < 2+2*maxAttempts {
			return http.StatusTooManyRequests, `{"code":"RESOURCE_EXHAUSTED","message":"stdin queue is full"}`
		}
		mu.Lock()
		defer mu.Unlock()
		taken = append(taken, "")
		return http.StatusNoContent, ""
	}}
	sb := newProcServer(t, ps)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := sb.Start(ctx, Cmd{Command: "cat", Stdin: io.MultiReader(strings.NewReader("a"),
		strings.NewReader("b"), strings.NewReader("c"))})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(); err != nil || !st.Success() {
		t.Errorf("Wait: %+v, %v", st, err)
	}
	writes, closed, kills := ps.state()
	var got []string
	for i, w := range writes {
		if i == 0 || i >= 1+2*maxAttempts {
			got = append(got, w)
		}
	}
	if strings.Join(got, ",") != "a,b,c" || len(writes) != 3+2*maxAttempts || !closed || kills != 0 {
		t.Errorf("stdin taken %q (%d requests), closed %v, %d kills; want a,b,c (%d), true, 0", got, len(writes),
			closed, kills, 3+2*maxAttempts)
	}
}

// TestWaitErrorUnjoined: Wait returns a lone error as it is (not wrapped by
// errors.Join), so a type assertion on it works.
func TestWaitErrorUnjoined(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"type":"start","id":5,"pid":9}`+"\n"+
			`{"type":"error","code":"INTERNAL","message":"boom"}`+"\n")
	}))
	defer srv.Close()
	sb := handleFor(t, srv)
	p, err := sb.Start(testCtx(t), Cmd{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Wait()
	if he, ok := err.(*HTTPError); !ok || he.Code != "INTERNAL" {
		t.Errorf("Wait: %T %v, want a *HTTPError", err, err)
	}
}

// TestStdinReadErrorAfterExit: a Read of Cmd.Stdin that fails after the process ended
// is no error of Wait's, and nothing is killed.
func TestStdinReadErrorAfterExit(t *testing.T) {
	var ps *procServer
	ps = &procServer{stdin: func(n int, _ *http.Request) (int, string) {
		ps.end(ExitStatus{})
		return http.StatusNoContent, ""
	}}
	sb := newProcServer(t, ps)
	pr, pw := io.Pipe()
	p, err := sb.Start(testCtx(t), Cmd{Command: "head -c1", Stdin: pr})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	_ = pw.CloseWithError(errors.New("late"))
	time.Sleep(200 * time.Millisecond) // the copier's turn
	if st, err := p.Wait(); err != nil || !st.Success() {
		t.Errorf("Wait: %+v, %v", st, err)
	}
	if _, _, kills := ps.state(); kills != 0 {
		t.Errorf("%d kills, want 0", kills)
	}
}

// TestInlineStdinNotReadAfterGivingUp: once Exec or StartBackground gave up on its
// context, the Read in progress may complete but no further Read is made (the data
// would be thrown away, and a retry with the same reader would miss it).
func TestInlineStdinNotReadAfterGivingUp(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusInternalServerError, `{"code":"INTERNAL","message":"unexpected"}`)
	}))
	defer srv.Close()
	sb := handleFor(t, srv)
	ops := inlineStdinOps(sb)
	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			gate := make(chan struct{})
			var reads atomic.Int32
			r := readerFunc(func(b []byte) (int, error) {
				if reads.Add(1) == 1 {
					<-gate
				}
				if reads.Load() > 100000 {
					return 0, io.EOF
				}
				b[0] = 'x'
				return 1, nil
			})
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			if err := o.op(ctx, r); !errors.Is(err, context.Canceled) {
				t.Errorf("error %v, want context.Canceled", err)
			}
			close(gate)
			time.Sleep(100 * time.Millisecond)
			if n := reads.Load(); n > 2 {
				t.Errorf("%d Reads, want the blocked one only", n)
			}
		})
	}
}

// TestCloseStdinAfterFailedClose: a close that failed (a context already ended, a
// refused request) leaves stdin open, so a later CloseStdin sends the close (before, it
// returned nil without sending, and the process waited for EOF for ever).
func TestCloseStdinAfterFailedClose(t *testing.T) {
	refuse := 1
	ps := &procServer{closeStdin: func() (int, string) {
		if refuse > 0 {
			refuse--
			return http.StatusBadRequest, `{"code":"INVALID_ARGUMENT","message":"not now"}`
		}
		return http.StatusNoContent, ""
	}}
	sb := newProcServer(t, ps)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := sb.Start(ctx, Cmd{Command: "cat"})
	if err != nil {
		t.Fatal(err)
	}
	done, dcancel := context.WithCancel(context.Background())
	dcancel()
	if err := p.CloseStdin(done); err == nil {
		t.Fatal("CloseStdin with an ended context: nil")
	}
	if err := p.CloseStdin(ctx); err == nil {
		t.Fatal("a refused CloseStdin: nil")
	}
	if _, closed, _ := ps.state(); closed {
		t.Fatal("closed after a refused close")
	}
	if err := p.CloseStdin(ctx); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	if _, closed, _ := ps.state(); !closed {
		t.Error("stdin never closed")
	}
	if err := p.CloseStdin(ctx); err != nil {
		t.Errorf("a second CloseStdin: %v", err)
	}
}

// TestPTYCloseStdinFailedCountsAsSent: on a PTY a close writes the terminal's EOF
// character, so a close that failed (it may have been carried out) is not sent again: a
// later CloseStdin returns the first one's error and sends nothing (a second ^D would end
// the shell that read the first).
func TestPTYCloseStdinFailedCountsAsSent(t *testing.T) {
	var closes atomic.Int32
	ps := &procServer{closeStdin: func() (int, string) {
		closes.Add(1)
		return http.StatusInternalServerError, `{"code":"INTERNAL","message":"lost"}`
	}}
	sb := newProcServer(t, ps)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := sb.Start(ctx, Cmd{Command: "sh", PTY: &PTYSize{Cols: 80, Rows: 24}})
	if err != nil {
		t.Fatal(err)
	}
	// the stream's end (its kill of the process) within the test: it reads retryDelay,
	// which later tests change
	defer func() { cancel(); <-p.Done() }()
	first := p.CloseStdin(ctx)
	if first == nil {
		t.Fatal("a failed PTY CloseStdin: nil")
	}
	for i := 0; i < 2; i++ {
		if err := p.CloseStdin(ctx); err == nil || err.Error() != first.Error() {
			t.Fatalf("CloseStdin after a failed one: %v, want %v", err, first)
		}
	}
	if n := closes.Load(); n != 1 {
		t.Errorf("%d closes sent, want 1 (no resend, no second ^D)", n)
	}
}

// TestProcessBodiesChunked: the JSON bodies of a run, a streamed or background start and
// a code execution go chunked, never with a Content-Length: through a Go reverse proxy on
// HTTP/1.1 (the API server's pod proxy behind an HTTP/1.1 hop) a Content-Length body can
// get its streamed answer cut, and sandboxd then kills the process.
func TestProcessBodiesChunked(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		mu.Lock()
		seen[r.URL.Path] = r.ContentLength
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/processes/run":
			_, _ = io.WriteString(w, `{"stdout":"","stderr":"","exit_code":0}`)
		case "/v1/processes":
			_, _ = io.WriteString(w, `{"type":"start","id":5,"pid":9}`+"\n"+`{"type":"exit","exit_code":0}`+"\n")
		default:
			answer(w, http.StatusNotFound, `{"code":"NOT_FOUND","message":"no route"}`)
		}
	}))
	t.Cleanup(srv.Close)
	sb := handleFor(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := sb.Run(ctx, "true"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	p, err := sb.Start(ctx, Cmd{Command: "true"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	_, _ = p.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, path := range []string{"/v1/processes/run", "/v1/processes"} {
		if n, ok := seen[path]; !ok || n != -1 {
			t.Errorf("%s: Content-Length %d (seen %v), want chunked (-1)", path, n, ok)
		}
	}
}
