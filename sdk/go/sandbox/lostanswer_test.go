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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fault is what the fake sandboxd does to the first request.
type fault int

const (
	noFault    fault = iota
	cutAfter         // do the operation, then cut the connection without an answer
	badGateway       // do the operation, then answer a proxy's 502 (the answer was lost)
	notReached       // answer the router's 503 without doing anything (never reached)
)

// fakeFS is a sandboxd that keeps a file system of paths ("/x") and their types.
type fakeFS struct {
	mu    sync.Mutex
	paths map[string]FileType
	first fault
	n     atomic.Int32
}

func (f *fakeFS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.n.Add(1) == 1 && f.first == notReached {
		answer(w, http.StatusServiceUnavailable, `{"detail":"Sandbox ns/sb is not ready: x."}`)
		return
	}
	status, body := f.apply(r)
	switch {
	case f.n.Load() > 1 || f.first == noFault:
		answer(w, status, body)
	case f.first == cutAfter:
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = c.Close()
		}
	case f.first == badGateway:
		answer(w, http.StatusBadGateway, `{"detail":"Could not read from the backend sandbox."}`)
	}
}

// apply runs a delete (of a file or a code context), mkdir or stat and returns
// sandboxd's answer.
func (f *fakeFS) apply(r *http.Request) (int, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	op, p, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	p = "/" + p
	typ, ok := f.paths[p]
	switch {
	case (op == "files" || op == "contexts") && r.Method == http.MethodDelete && ok:
		delete(f.paths, p)
		return http.StatusNoContent, ""
	case op == "mkdir" && r.Method == http.MethodPost && !ok:
		f.paths[p], typ = FileTypeDirectory, FileTypeDirectory
	case op == "mkdir" && r.Method == http.MethodPost:
		return http.StatusConflict, `{"code":"ALREADY_EXISTS","message":"mkdir: file exists"}`
	case op == "stat" && r.Method == http.MethodGet && ok:
	case !ok:
		return http.StatusNotFound, `{"code":"NOT_FOUND","message":"no such file or directory"}`
	default:
		return http.StatusBadRequest, `{"code":"INVALID_ARGUMENT","message":"unexpected request"}`
	}
	return http.StatusOK, fmt.Sprintf(`{"name":%q,"path":%q,"type":%q,"mode":"0755"}`, p[1:], p, typ)
}

func answer(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func deleteX(t *testing.T, s *Sandbox) error { return s.Files().Delete(testCtx(t), "x", false) }

func deleteContextX(t *testing.T, s *Sandbox) error { return s.Contexts().Delete(testCtx(t), "x") }

func mkdirX(t *testing.T, s *Sandbox) error {
	st, err := s.Files().Mkdir(testCtx(t), "x", false)
	if err == nil && (!st.IsDir() || st.Path != "/x") {
		return fmt.Errorf("stat %+v", st)
	}
	return err
}

// TestLostAnswerRetries: Files.Delete, Contexts.Delete and Mkdir (no parents) succeed
// when an attempt whose answer was lost did the work and the retry finds it done; a 404
// or 409 that no earlier attempt can have caused is still an error.
func TestLostAnswerRetries(t *testing.T) {
	tests := []struct {
		name  string
		paths map[string]FileType // before the call
		first fault
		op    func(*testing.T, *Sandbox) error
		want  error
		after FileType // the type of /x after the call ("" = missing)
		reqs  int32
	}{
		{"delete, cut after deleting", map[string]FileType{"/x": FileTypeFile}, cutAfter, deleteX, nil, "", 2},
		{"delete, 502 after deleting", map[string]FileType{"/x": FileTypeFile}, badGateway, deleteX, nil, "", 2},
		{"delete, missing", map[string]FileType{}, noFault, deleteX, ErrNotFound, "", 1},
		{"delete, missing after a 503 before forwarding", map[string]FileType{}, notReached, deleteX, ErrNotFound, "", 2},
		{"delete, present", map[string]FileType{"/x": FileTypeFile}, noFault, deleteX, nil, "", 1},
		{"context delete, cut after deleting", map[string]FileType{"/x": FileTypeOther}, cutAfter, deleteContextX, nil,
			"", 2},
		{"context delete, 502 after deleting", map[string]FileType{"/x": FileTypeOther}, badGateway, deleteContextX,
			nil, "", 2},
		{"context delete, missing", map[string]FileType{}, noFault, deleteContextX, ErrNotFound, "", 1},
		{"context delete, missing after a 503 before forwarding", map[string]FileType{}, notReached, deleteContextX,
			ErrNotFound, "", 2},
		{"mkdir, cut after creating", map[string]FileType{}, cutAfter, mkdirX, nil, FileTypeDirectory, 3},
		{"mkdir, 502 after creating", map[string]FileType{}, badGateway, mkdirX, nil, FileTypeDirectory, 3},
		{"mkdir, existing", map[string]FileType{"/x": FileTypeDirectory}, noFault, mkdirX, ErrConflict, FileTypeDirectory, 1},
		{"mkdir, existing after a 503 before forwarding", map[string]FileType{"/x": FileTypeDirectory}, notReached,
			mkdirX, ErrConflict, FileTypeDirectory, 2},
		{"mkdir, cut, a file in the way", map[string]FileType{"/x": FileTypeFile}, cutAfter, mkdirX, ErrConflict,
			FileTypeFile, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fakeFS{paths: tc.paths, first: tc.first}
			srv := httptest.NewServer(fs)
			defer srv.Close()
			err := tc.op(t, handleFor(t, srv))
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			fs.mu.Lock()
			got := fs.paths["/x"]
			fs.mu.Unlock()
			if got != tc.after {
				t.Errorf("/x is %q, want %q", got, tc.after)
			}
			if got := fs.n.Load(); got != tc.reqs {
				t.Errorf("%d requests, want %d", got, tc.reqs)
			}
		})
	}
}

// TestOutcomeUnknown classifies failed attempts: only those that may have run in
// sandboxd without an answer count.
func TestOutcomeUnknown(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"cut connection", fmt.Errorf("x: %w: %w", ErrUnavailable, io.EOF), true},
		{"router 502 after connect", &HTTPError{StatusCode: 502, Code: routerCode, Message: "Could not read"}, true},
		{"router 502 before connect", &HTTPError{StatusCode: 502, Code: routerCode, Message: "Could not connect"}, false},
		{"router 503", &HTTPError{StatusCode: 503, Code: routerCode}, false},
		{"pod proxy 503 after dial", &HTTPError{StatusCode: 503, Code: apiServerCode, Message: "EOF"}, true},
		{"pod proxy 503 dial", &HTTPError{StatusCode: 503, Code: apiServerCode, Message: "dial tcp: refused"}, false},
		{"gateway timeout", &HTTPError{StatusCode: 504}, true},
		{"sandboxd 404", &HTTPError{StatusCode: 404, Code: "NOT_FOUND"}, false},
		{"sandboxd 409", &HTTPError{StatusCode: 409, Code: "ALREADY_EXISTS"}, false},
		{"429", &HTTPError{StatusCode: 429, Code: routerCode}, false},
		{"not ready", ErrNotReady, false},
	}
	for _, tc := range tests {
		if got := outcomeUnknown(tc.err); got != tc.want {
			t.Errorf("%s: outcomeUnknown = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRetryableNotForwarded: a call that must not run twice is sent again only after an
// answer that proves it was not forwarded (the router's own 503, the pod proxy's failed
// dial); a 503 of sandboxd or of an unknown proxy in front proves nothing. Idempotent
// calls are retried after any of them.
func TestRetryableNotForwarded(t *testing.T) {
	tests := []struct {
		name          string
		err           *HTTPError
		once, repeats bool // retryable for a non-idempotent call, for an idempotent one
	}{
		{"router 503", &HTTPError{StatusCode: 503, Code: routerCode, Message: "no endpoint"}, true, true},
		{"pod proxy 503, dial failed", &HTTPError{StatusCode: 503, Code: apiServerCode,
			Message: "error trying to reach service: dial tcp 10.0.0.1:8080: connection refused"}, true, true},
		{"pod proxy 503 after the dial", &HTTPError{StatusCode: 503, Code: apiServerCode, Message: "EOF"}, false, true},
		{"ingress 503 in front of the router", &HTTPError{StatusCode: 503,
			Message: "upstream connect error or disconnect/reset before headers"}, false, true},
		{"sandboxd 503", &HTTPError{StatusCode: 503, Code: "UNAVAILABLE", Message: "busy"}, false, true},
		{"429", &HTTPError{StatusCode: 429, Code: "RESOURCE_EXHAUSTED"}, true, true},
		{"ingress 502", &HTTPError{StatusCode: 502, Message: "bad gateway"}, false, true},
	}
	for _, tc := range tests {
		if got := retryable(tc.err, false); got != tc.once {
			t.Errorf("%s: retryable(non-idempotent) = %v, want %v", tc.name, got, tc.once)
		}
		if got := retryable(tc.err, true); got != tc.repeats {
			t.Errorf("%s: retryable(idempotent) = %v, want %v", tc.name, got, tc.repeats)
		}
	}
}

// bgFake answers a background process's POSTs: the first with a proxy's 502 (its answer
// lost), the rest with 204; it counts them.
type bgFake struct{ n atomic.Int32 }

func (f *bgFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.n.Add(1) == 1 {
		answer(w, http.StatusBadGateway, `{"detail":"Could not read from the backend sandbox."}`)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// TestKillAndCloseStdinRetried: a kill (repeating it changes nothing) is sent again after
// a lost answer, as the Python SDK does; other signals, stdin data and closing stdin (a
// ^D on a PTY) are not.
func TestKillAndCloseStdinRetried(t *testing.T) {
	tests := []struct {
		name    string
		op      func(context.Context, *BackgroundProcess) error
		wantErr bool
		reqs    int32
	}{
		{"kill", func(ctx context.Context, p *BackgroundProcess) error { return p.Kill(ctx) }, false, 2},
		{"signal 9", func(ctx context.Context, p *BackgroundProcess) error { return p.Signal(ctx, "9") }, false, 2},
		// on a PTY a close is a ^D: a second one would end the shell too
		{"close stdin", func(ctx context.Context, p *BackgroundProcess) error { return p.CloseStdin(ctx) }, true, 1},
		{"SIGTERM", func(ctx context.Context, p *BackgroundProcess) error { return p.Signal(ctx, "SIGTERM") }, true, 1},
		{"stdin data", func(ctx context.Context, p *BackgroundProcess) error {
			return p.WriteStdin(ctx, []byte("x"))
		}, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &bgFake{}
			srv := httptest.NewServer(f)
			defer srv.Close()
			err := tc.op(testCtx(t), handleFor(t, srv).Background(7))
			if (err != nil) != tc.wantErr {
				t.Errorf("error %v, want an error: %v", err, tc.wantErr)
			}
			if got := f.n.Load(); got != tc.reqs {
				t.Errorf("%d requests, want %d", got, tc.reqs)
			}
		})
	}
}

// TestKubeErrSentinels: the API server's errors match the sentinels docs/sdk-go.md's
// table promises, timeouts and oversized requests included.
func TestKubeErrSentinels(t *testing.T) {
	gr := schema.GroupResource{Group: "agents.x-k8s.io", Resource: "sandboxes"}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"not found", apierrors.NewNotFound(gr, "x"), ErrNotFound},
		{"conflict", apierrors.NewConflict(gr, "x", errors.New("changed")), ErrConflict},
		{"503", apierrors.NewServiceUnavailable("down"), ErrUnavailable},
		{"429", apierrors.NewTooManyRequests("slow down", 1), ErrUnavailable},
		{"504 timeout", apierrors.NewTimeoutError("may still be processing", 1), ErrUnavailable},
		{"500 server timeout", apierrors.NewServerTimeout(gr, "create", 1), ErrUnavailable},
		{"413", apierrors.NewRequestEntityTooLargeError("too big"), ErrTooLarge},
	}
	for _, tc := range tests {
		if err := kubeErr(tc.err); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v does not match %v", tc.name, err, tc.want)
		}
	}
}
