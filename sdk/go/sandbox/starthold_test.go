package sandbox

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// routerHandleFor is a router-mode handle of Sandbox ns/sb whose router is srv.
func routerHandleFor(t *testing.T, srv *httptest.Server) *Sandbox {
	t.Helper()
	return attachReady(t, Connection{Mode: ModeRouter, RouterURL: srv.URL, RouterToken: "t"}, nil)
}

// holdOK is sandboxd's answer (through the router) once the router lets a request by.
func holdOK(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/processes/run":
		answer(w, http.StatusOK, `{"id":1,"exit_code":0,"stdout":"","stderr":""}`)
	case r.URL.Path == "/v1/processes" && r.Method == http.MethodPost:
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"type":"start","id":1,"pid":2}`+"\n"+`{"type":"exit","exit_code":0}`+"\n")
	case r.URL.Path == "/v1/processes/1/output":
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"type":"exit","offset":0,"exit_code":0}`+"\n")
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.WriteString(w, "data")
	}
}

func holdRun(ctx context.Context, s *Sandbox) error { _, err := s.Run(ctx, "true"); return err }

func holdRead(ctx context.Context, s *Sandbox) error {
	_, err := s.Files().ReadFile(ctx, "a")
	return err
}

func holdStart(ctx context.Context, s *Sandbox) error {
	p, err := s.Start(ctx, Cmd{Command: "true"})
	if err != nil {
		return err
	}
	_, err = p.Wait()
	return err
}

func holdOutput(ctx context.Context, s *Sandbox) error {
	o, err := s.Background(1).Output(ctx, false, 0)
	if err != nil {
		return err
	}
	return o.Close()
}

func holdBackgroundWait(ctx context.Context, s *Sandbox) error {
	_, err := s.Background(1).Wait(ctx, 0)
	return err
}

// TestRouterStartHoldNotRetried: the router's 503 after it held a request for a
// starting Sandbox ("... is not ready: <reason> (waited 30.0s for it).") is tried once
// and returned as ErrNotReady that still carries the *HTTPError (each attempt would be
// held as long again); the router's other 503s are still retried with back-off.
func TestRouterStartHoldNotRetried(t *testing.T) {
	const (
		held     = `{"detail":"Sandbox ns/sb is not ready: DependenciesNotReady (waited 30.0s for it)."}`
		heldNone = `{"detail":"Sandbox ns/sb is not ready: no Ready condition (waited 2.0s for it)."}`
		plain    = `{"detail":"Sandbox ns/sb is not ready: DependenciesNotReady."}`
		always   = 1 << 20
	)
	tests := []struct {
		name     string
		body     string // the router's 503
		fails    int32  // attempts answered 503 before sandboxd answers
		op       func(context.Context, *Sandbox) error
		attempts int32
		want     error // nil: success
		notReady bool  // the error matches ErrNotReady
	}{
		{"held, run", held, always, holdRun, 1, ErrUnavailable, true},
		{"held, read (idempotent)", held, always, holdRead, 1, ErrUnavailable, true},
		{"held, process stream open", held, always, holdStart, 1, ErrUnavailable, true},
		{"held, background output open", held, always, holdOutput, 1, ErrUnavailable, true},
		{"held, background wait", held, always, holdBackgroundWait, 1, ErrUnavailable, true},
		{"held, no Ready condition, short hold", heldNone, always, holdRun, 1, ErrUnavailable, true},
		{"plain 503 then ok, run", plain, 2, holdRun, 3, nil, false},
		{"plain 503 then ok, read", plain, 2, holdRead, 3, nil, false},
		{"plain 503 then ok, process stream open", plain, 2, holdStart, 3, nil, false},
		{"plain 503 always, read", plain, always, holdRead, maxAttempts, ErrUnavailable, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fastRetries(t)
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Sandbox-ID") != "sb" || r.Header.Get("X-Sandbox-Namespace") != "ns" {
					t.Errorf("router headers %v", r.Header)
				}
				if n.Add(1) <= tc.fails {
					answer(w, http.StatusServiceUnavailable, tc.body)
					return
				}
				holdOK(w, r)
			}))
			defer srv.Close()
			err := tc.op(testCtx(t), routerHandleFor(t, srv))
			if got := n.Load(); got != tc.attempts {
				t.Errorf("%d attempts, want %d", got, tc.attempts)
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			if got := errors.Is(err, ErrNotReady); got != tc.notReady {
				t.Errorf("errors.Is(%v, ErrNotReady) = %v, want %v", err, got, tc.notReady)
			}
			var he *HTTPError
			if !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable || he.Code != routerCode {
				t.Errorf("error %v does not carry the router's 503 (%+v)", err, he)
			}
			if !neverReached(err) || outcomeUnknown(err) {
				t.Errorf("error %v: neverReached %v, outcomeUnknown %v", err, neverReached(err), outcomeUnknown(err))
			}
		})
	}
}

// TestHeldNotReady classifies router answers: only the router's 503 that says it waited
// is the start hold's end.
func TestHeldNotReady(t *testing.T) {
	tests := []struct {
		name string
		err  *HTTPError
		want bool
	}{
		{"start hold ended", &HTTPError{StatusCode: 503, Code: routerCode,
			Message: "Sandbox ns/sb is not ready: DependenciesNotReady (waited 30.0s for it)."}, true},
		{"not ready, no hold", &HTTPError{StatusCode: 503, Code: routerCode,
			Message: "Sandbox ns/sb is not ready: DependenciesNotReady."}, false},
		{"suspended without a policy", &HTTPError{StatusCode: 503, Code: routerCode,
			Message: "Sandbox ns/sb is not ready: SandboxSuspended."}, false},
		{"pod proxy 503", &HTTPError{StatusCode: 503, Code: apiServerCode, Message: "x (waited 1s)"}, false},
		{"sandboxd 503", &HTTPError{StatusCode: 503, Code: "UNAVAILABLE", Message: "(waited 1s)"}, false},
		{"router 504 after a resume hold", &HTTPError{StatusCode: 504, Code: routerCode,
			Message: "Sandbox ns/sb did not become ready within 60s of its resume."}, false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		if got := heldNotReady(tc.err); got != tc.want {
			t.Errorf("%s: heldNotReady = %v, want %v", tc.name, got, tc.want)
		}
		if tc.err != nil {
			if got := retryable(tc.err, true); got == tc.want && tc.err.StatusCode == 503 {
				t.Errorf("%s: retryable = %v", tc.name, got)
			}
		}
	}
}
