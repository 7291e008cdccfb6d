package sandbox

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// tokenRouter is a router that accepts only "Bearer "+want() (401 with the router's
// {"detail"} body otherwise) and counts requests and rejections.
func tokenRouter(t *testing.T, want func() string) (*httptest.Server, *atomic.Int32, *atomic.Int32) {
	t.Helper()
	var n, rejected atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+want() {
			rejected.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"detail":"Invalid token."}`)
			return
		}
		_, _ = io.WriteString(w, `{"name":"a","path":"/a","type":"file","size":1,"mode":"0644"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &n, &rejected
}

// routerHandle is a handle in router mode through srv with conn c and REST config rc.
func routerHandle(t *testing.T, srv *httptest.Server, c Connection, rc *rest.Config) *Sandbox {
	t.Helper()
	k := newFakeKube()
	k.sbx.Add(readySandbox("sb", "127.0.0.1"))
	c.RouterURL = srv.URL
	cl, err := NewClient(Options{Namespace: "ns", kube: k, RestConfig: rc, Connection: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.CloseIdleConnections)
	sb, err := cl.Attach(testCtx(t), "sb")
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// rotate replaces the token file the way the kubelet does (a new file renamed over
// the old one) or rewrites it in place.
func rotate(t *testing.T, path, tok string, inPlace bool) {
	t.Helper()
	if inPlace {
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func setTokenRecheck(t *testing.T, d time.Duration) {
	old := tokenRecheck
	tokenRecheck = d
	t.Cleanup(func() { tokenRecheck = old })
}

// TestRouterTokenFileRotation: a token read from the REST config's BearerTokenFile
// follows the file; a literal RouterToken does not.
func TestRouterTokenFileRotation(t *testing.T) {
	tests := []struct {
		name    string
		recheck time.Duration // how often the file is looked at
		inPlace bool          // rewrite the file instead of renaming a new one over it
		literal string        // Connection.RouterToken
		want    []string      // the token the router accepts at each request
		reqs    int32         // requests the router sees in all
		rejects int32         // of which 401
	}{
		{"renamed over, next request", 0, false, "", []string{"t1", "t2", "t3"}, 3, 0},
		{"rewritten in place, next request", 0, true, "", []string{"t1", "t2", "t3"}, 3, 0},
		{"within the recheck period, after a 401", time.Hour, false, "", []string{"t1", "t2", "t3"}, 5, 2},
		{"literal token is kept", 0, false, "lit", []string{"lit", "lit", "lit"}, 3, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setTokenRecheck(t, tc.recheck)
			file := filepath.Join(t.TempDir(), "token")
			rotate(t, file, "t1", tc.inPlace)
			var want atomic.Value
			want.Store(tc.want[0])
			srv, n, rejected := tokenRouter(t, func() string { return want.Load().(string) })
			// In-cluster shape: the token as read when the config was made, and its file.
			rc := &rest.Config{Host: "https://x", BearerToken: "t1", BearerTokenFile: file}
			sb := routerHandle(t, srv, Connection{RouterToken: tc.literal}, rc)
			for i, w := range tc.want {
				if i > 0 {
					rotate(t, file, fmt.Sprintf("t%d", i+1), tc.inPlace)
				}
				want.Store(w)
				if _, err := sb.Files().Stat(testCtx(t), "a"); err != nil {
					t.Fatalf("request %d: %v", i+1, err)
				}
			}
			if n.Load() != tc.reqs || rejected.Load() != tc.rejects {
				t.Errorf("%d requests, %d rejected; want %d, %d", n.Load(), rejected.Load(), tc.reqs, tc.rejects)
			}
		})
	}
}

// TestRouterTokenFileHTTPClient: Sandbox.HTTPClient sends the current token.
func TestRouterTokenFileHTTPClient(t *testing.T) {
	setTokenRecheck(t, 0)
	file := filepath.Join(t.TempDir(), "token")
	rotate(t, file, "t1", false)
	var want atomic.Value
	want.Store("t1")
	srv, _, rejected := tokenRouter(t, func() string { return want.Load().(string) })
	sb := routerHandle(t, srv, Connection{}, &rest.Config{Host: "https://x", BearerTokenFile: file})
	hc, base, err := sb.HTTPClient(3000)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"t1", "t2"} {
		rotate(t, file, tok, false)
		want.Store(tok)
		resp, err := hc.Get(base + "x")
		if err != nil {
			t.Fatal(err)
		}
		_ = drain(resp)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("token %s: HTTP %d", tok, resp.StatusCode)
		}
		if p, _ := sb.PortURL(3000, "/"); p.Token != tok {
			t.Errorf("PortURL token %q, want %q", p.Token, tok)
		}
	}
	if rejected.Load() != 0 {
		t.Errorf("%d rejected", rejected.Load())
	}
}

// TestTokenFileConcurrent reads a token file from many goroutines while it rotates
// (run with -race).
func TestTokenFileConcurrent(t *testing.T) {
	setTokenRecheck(t, 0)
	file := filepath.Join(t.TempDir(), "token")
	rotate(t, file, "t0", false)
	tf := newTokenFile(file)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if tok := tf.token("fallback"); tok == "" || tok == "fallback" {
					t.Errorf("token %q", tok)
					return
				}
			}
		}()
	}
	for i := 1; i <= 50; i++ {
		rotate(t, file, fmt.Sprintf("t%d", i), false)
		tf.renew()
	}
	close(stop)
	wg.Wait()
	if got := tf.token(""); got != "t50" {
		t.Errorf("final token %q, want t50", got)
	}
}

// TestTokenFileFallback: without a readable file the literal token is used, and a file
// that disappears or empties keeps the last token.
func TestTokenFileFallback(t *testing.T) {
	setTokenRecheck(t, 0)
	dir := t.TempDir()
	if got := newTokenFile(filepath.Join(dir, "missing")).token("lit"); got != "lit" {
		t.Errorf("missing file: %q, want lit", got)
	}
	if got := (*tokenFile)(nil).token("lit"); got != "lit" {
		t.Errorf("no file: %q, want lit", got)
	}
	file := filepath.Join(dir, "token")
	rotate(t, file, "t1", false)
	tf := newTokenFile(file)
	rotate(t, file, "", true)
	if got := tf.token("lit"); got != "t1" {
		t.Errorf("emptied file: %q, want t1", got)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if got := tf.token("lit"); got != "t1" {
		t.Errorf("removed file: %q, want t1", got)
	}
}
