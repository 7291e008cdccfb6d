package sandbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
)

func TestFilesPath(t *testing.T) {
	tests := []struct {
		in        string
		allowRoot bool
		want      string
		err       error
	}{
		{"a.txt", false, "/v1/files/a.txt", nil},
		{"/a/b/c", false, "/v1/files/a/b/c", nil},
		{"a//./b/", false, "/v1/files/a/b", nil},
		{"a b/%?#.txt", false, "/v1/files/a%20b/%25%3F%23.txt", nil},
		{"", true, "/v1/files", nil},
		{"/", true, "/v1/files", nil},
		{"", false, "", ErrInvalidPath},
		{"/.", false, "", ErrInvalidPath},
		{"a/../b", false, "", ErrInvalidPath},
		{"..", true, "", ErrInvalidPath},
		{"a\x00b", false, "", ErrInvalidPath},
		{"a\nb", false, "", ErrInvalidPath},
		{"x\x7f", false, "", ErrInvalidPath},
		{"...", false, "/v1/files/...", nil},
	}
	for _, tc := range tests {
		got, err := filesPath(tc.in, tc.allowRoot)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("filesPath(%q, %v) = %q, %v; want %q, %v", tc.in, tc.allowRoot, got, err, tc.want, tc.err)
		}
	}
}

func TestHTTPErrorIs(t *testing.T) {
	all := []error{ErrNotFound, ErrInvalidArgument, ErrUnauthorized, ErrForbidden, ErrConflict, ErrTooLarge, ErrUnavailable}
	tests := []struct {
		status int
		want   error
	}{
		{404, ErrNotFound}, {400, ErrInvalidArgument}, {416, ErrInvalidArgument}, {401, ErrUnauthorized},
		{403, ErrForbidden}, {409, ErrConflict}, {413, ErrTooLarge}, {429, ErrUnavailable},
		{502, ErrUnavailable}, {503, ErrUnavailable}, {504, ErrUnavailable}, {500, nil},
	}
	for _, tc := range tests {
		var err error = fmt.Errorf("wrapped: %w", &HTTPError{Op: "x", StatusCode: tc.status})
		for _, s := range all {
			if got := errors.Is(err, s); got != (s == tc.want) {
				t.Errorf("status %d: Is(%v) = %v", tc.status, s, got)
			}
		}
		var he *HTTPError
		if !errors.As(err, &he) || he.StatusCode != tc.status {
			t.Errorf("status %d: As failed", tc.status)
		}
	}
}

func TestTimeoutError(t *testing.T) {
	tests := []struct {
		ctxErr      error
		timeout     bool
		matchesCtxE bool
	}{
		{context.DeadlineExceeded, true, true},
		{context.Canceled, false, true},
	}
	for _, tc := range tests {
		err := error(&TimeoutError{What: "x", Err: tc.ctxErr})
		if errors.Is(err, ErrTimeout) != tc.timeout || errors.Is(err, tc.ctxErr) != tc.matchesCtxE {
			t.Errorf("%v: Is(ErrTimeout)=%v Is(ctx)=%v", tc.ctxErr, errors.Is(err, ErrTimeout), errors.Is(err, tc.ctxErr))
		}
	}
}

func TestNewConnValidation(t *testing.T) {
	tests := []struct {
		name string
		c    Connection
		rc   *rest.Config
		mode Mode
		err  bool
	}{
		{"default is pod proxy", Connection{}, &rest.Config{Host: "https://127.0.0.1:6443"}, ModePodProxy, false},
		{"router URL selects router", Connection{RouterURL: "http://127.0.0.1:8080"}, nil, ModeRouter, false},
		{"router without URL", Connection{Mode: ModeRouter}, nil, "", true},
		{"router with bad URL", Connection{RouterURL: "ftp://x"}, nil, "", true},
		{"pod proxy without config", Connection{Mode: ModePodProxy}, nil, "", true},
		{"bad port", Connection{Mode: ModeDirect, Port: 70000}, nil, "", true},
		{"unknown mode", Connection{Mode: "carrier-pigeon"}, nil, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cn, err := newConn(tc.c, tc.rc)
			if (err != nil) != tc.err {
				t.Fatalf("err %v", err)
			}
			if err == nil && cn.mode != tc.mode {
				t.Errorf("mode %q, want %q", cn.mode, tc.mode)
			}
			if err != nil && !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("error %v is not ErrInvalidArgument", err)
			}
		})
	}
}

func TestRouterTokenFromRestConfig(t *testing.T) {
	cn, err := newConn(Connection{RouterURL: "http://127.0.0.1:1"}, &rest.Config{Host: "https://x", BearerToken: "kube-token"})
	if err != nil || cn.routerToken != "kube-token" {
		t.Fatalf("token %q, %v", cn.routerToken, err)
	}
}

// TestRouterCredentialRule: the REST config's credential (token, token file, exec plugin)
// goes to the router only over https, to a loopback host, from the in-cluster config or on
// the caller's opt-in; NewClient refuses other plain-http router URLs before any request.
// An explicit router token is always sent.
func TestRouterCredentialRule(t *testing.T) {
	kubeTok := &rest.Config{Host: "https://api:6443", BearerToken: "kube-token"}
	inCluster := &rest.Config{Host: "https://10.96.0.1:443", BearerToken: "sa-token", BearerTokenFile: inClusterTokenFile}
	plugin := &rest.Config{Host: "https://api:6443", ExecProvider: &clientcmdapi.ExecConfig{
		Command: "/nonexistent/plugin", APIVersion: "client.authentication.k8s.io/v1",
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	certOnly := &rest.Config{Host: "https://api:6443"}
	tests := []struct {
		name     string
		url      string
		rc       *rest.Config
		token    string // Connection.RouterToken
		envToken string // $AGENT_SANDBOX_ROUTER_TOKEN
		allow    bool   // Connection.AllowPlaintextToken
		envAllow string // $AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN
		refused  bool
		sent     string // the router's bearer token when not refused
	}{
		{name: "http loopback IPv4", url: "http://127.0.0.1:8080", rc: kubeTok, sent: "kube-token"},
		{name: "http 127.0.0.0/8", url: "http://127.1.2.3", rc: kubeTok, sent: "kube-token"},
		{name: "http localhost", url: "http://localhost:8080", rc: kubeTok, sent: "kube-token"},
		{name: "http localhost, trailing dot", url: "http://LOCALHOST.:8080", rc: kubeTok, sent: "kube-token"},
		{name: "http *.localhost", url: "http://router.localhost:8080", rc: kubeTok, sent: "kube-token"},
		{name: "http [::1]", url: "http://[::1]:8080", rc: kubeTok, sent: "kube-token"},
		{name: "http [::ffff:127.0.0.1]", url: "http://[::ffff:127.0.0.1]:8080", rc: kubeTok, sent: "kube-token"},
		{name: "http 10.0.0.1", url: "http://10.0.0.1:8080", rc: kubeTok, refused: true},
		{name: "http name", url: "http://router.example.net", rc: kubeTok, refused: true},
		{name: "http localhost.example", url: "http://localhost.example:8080", rc: kubeTok, refused: true},
		{name: "http [::ffff:10.0.0.1]", url: "http://[::ffff:10.0.0.1]:8080", rc: kubeTok, refused: true},
		{name: "http 10.0.0.1, exec plugin", url: "http://10.0.0.1:8080", rc: plugin, refused: true},
		{name: "http 10.0.0.1, token file", url: "http://10.0.0.1:8080",
			rc: &rest.Config{Host: "https://api", BearerTokenFile: "/nonexistent/token"}, refused: true},
		{name: "https 10.0.0.1", url: "https://10.0.0.1:8443", rc: kubeTok, sent: "kube-token"},
		{name: "in-cluster", url: "http://sandbox-router.agent-sandbox-system.svc:8080", rc: inCluster, sent: "sa-token"},
		{name: "explicit token", url: "http://10.0.0.1:8080", rc: kubeTok, token: "router-token", sent: "router-token"},
		{name: "explicit token from env", url: "http://10.0.0.1:8080", rc: kubeTok, envToken: "env-token", sent: "env-token"},
		{name: "opt-in", url: "http://10.0.0.1:8080", rc: kubeTok, allow: true, sent: "kube-token"},
		{name: "opt-in from env", url: "http://10.0.0.1:8080", rc: kubeTok, envAllow: "true", sent: "kube-token"},
		{name: "env opt-in not true", url: "http://10.0.0.1:8080", rc: kubeTok, envAllow: "no", refused: true},
		{name: "no credential to send", url: "http://10.0.0.1:8080", rc: certOnly, sent: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvRouterToken, tc.envToken)
			t.Setenv(EnvRouterAllowPlaintextToken, tc.envAllow)
			c, err := NewClient(Options{Namespace: "ns", kube: newFakeKube(), RestConfig: tc.rc,
				Connection: Connection{RouterURL: tc.url, RouterToken: tc.token, AllowPlaintextToken: tc.allow}})
			if tc.refused {
				u, _ := url.Parse(tc.url)
				if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(),
					"refusing to send the kubeconfig's credentials in clear text to http://"+u.Host+" (not a loopback host)") ||
					!strings.Contains(err.Error(), EnvRouterAllowPlaintextToken+"=true") {
					t.Fatalf("err = %v, want the clear-text refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.conn.routerBearer(); got != tc.sent {
				t.Errorf("router token %q, want %q", got, tc.sent)
			}
		})
	}
}

// deadlineCtx has the deadline dl but never ends (so a request built with it is not
// cancelled whatever dl is).
type deadlineCtx struct {
	context.Context
	dl time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.dl, true }

// TestSandboxTimeoutHeader: router requests carry the context's remaining time as
// X-Sandbox-Timeout (seconds, 3 decimals), at least 0.001 (the router takes "0.000" for
// no value and applies its 180 s default); no deadline or one passed: no header; other
// modes: never.
func TestSandboxTimeoutHeader(t *testing.T) {
	router := &conn{mode: ModeRouter, routerURL: "http://127.0.0.1:1", port: 8080}
	direct := &conn{mode: ModeDirect, port: 8080}
	tg := target{ns: "ns", name: "sb", podIP: "10.0.0.5"}
	tests := []struct {
		name     string
		c        *conn
		left     time.Duration // the deadline from now; 0: none
		min, max float64       // the header's value; both 0: no header
	}{
		{"no deadline", router, 0, 0, 0},
		{"30 s", router, 30 * time.Second, 29, 30},
		{"1.5 s", router, 1500 * time.Millisecond, 1.4, 1.5},
		{"under half a millisecond", router, 300 * time.Microsecond, 0.001, 0.001},
		{"passed", router, -time.Second, 0, 0},
		{"direct mode", direct, 30 * time.Second, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h []string
			ok := false
			// a deadline 300 µs away may have passed before the request is built on a
			// busy machine: try again then
			for try := 0; try < 20 && !ok; try++ {
				ctx := context.Background()
				if tc.left != 0 {
					ctx = deadlineCtx{ctx, time.Now().Add(tc.left)}
				}
				req, err := tc.c.newRequest(ctx, tg, http.MethodGet, "/v1/health", nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				h, ok = req.Header["X-Sandbox-Timeout"]
				if tc.left > time.Millisecond || tc.max == 0 {
					break
				}
			}
			if tc.max == 0 {
				if ok {
					t.Errorf("X-Sandbox-Timeout %q, want none", h)
				}
				return
			}
			if !ok {
				t.Fatal("no X-Sandbox-Timeout")
			}
			v, err := strconv.ParseFloat(h[0], 64)
			if err != nil || v < tc.min || v > tc.max || !strings.Contains(h[0], ".") || len(h[0])-strings.Index(h[0], ".") != 4 {
				t.Errorf("X-Sandbox-Timeout %q, want %.3f to %.3f with 3 decimals", h, tc.min, tc.max)
			}
		})
	}
	// on the wire, from a real call's context
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("X-Sandbox-Timeout"))
		answer(w, http.StatusOK, `{"name":"x","path":"/x","type":"file","size":1,"mode":"0644"}`)
	}))
	defer srv.Close()
	sb := attachReady(t, Connection{RouterURL: srv.URL, RouterToken: "t"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := sb.Files().Stat(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if v, err := strconv.ParseFloat(got.Load().(string), 64); err != nil || v <= 9 || v > 10 {
		t.Errorf("Stat sent X-Sandbox-Timeout %q, want 9 to 10", got.Load())
	}
}

// TestRetries: answers that prove sandboxd was not reached are retried; others are not.
func TestRetries(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		op       func(*Sandbox) error
		attempts int32
		want     error
	}{
		{"router 404 (cache lag) then ok", 404, `{"detail":"Sandbox ns/sb not found."}`,
			func(s *Sandbox) error { _, err := s.Files().ReadFile(testCtx(t), "a"); return err }, 3, nil},
		{"sandboxd 404 is final", 404, `{"code":"NOT_FOUND","message":"open: not found"}`,
			func(s *Sandbox) error { _, err := s.Files().ReadFile(testCtx(t), "a"); return err }, 1, ErrNotFound},
		{"503 then ok, even for run", 503, `{"detail":"Sandbox ns/sb is not ready: x."}`,
			func(s *Sandbox) error { _, err := s.Run(testCtx(t), "true"); return err }, 3, nil},
		{"502 after connect is final for run", 502, `{"detail":"Could not write to the backend sandbox."}`,
			func(s *Sandbox) error { _, err := s.Run(testCtx(t), "true"); return err }, 1, ErrUnavailable},
		{"502 is retried for reads", 502, `{"detail":"Could not write to the backend sandbox."}`,
			func(s *Sandbox) error { _, err := s.Files().ReadFile(testCtx(t), "a"); return err }, 3, nil},
		{"API server Status", 403, `{"kind":"Status","code":403,"message":"pods/proxy is forbidden"}`,
			func(s *Sandbox) error { _, err := s.Files().ReadFile(testCtx(t), "a"); return err }, 1, ErrForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if got := r.Header.Get("Authorization"); got != "Bearer sbd-token" {
					t.Errorf("Authorization %q", got)
				}
				if n.Add(1) < 3 {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.status)
					_, _ = w.Write([]byte(tc.body))
					return
				}
				if strings.HasSuffix(r.URL.Path, "/run") {
					_, _ = w.Write([]byte(`{"id":1,"exit_code":0,"stdout":"","stderr":""}`))
					return
				}
				w.Header().Set("Content-Type", "application/octet-stream")
				_, _ = w.Write([]byte("data"))
			}))
			defer srv.Close()
			err := tc.op(handleFor(t, srv))
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			if got := n.Load(); got != tc.attempts {
				t.Errorf("%d attempts, want %d", got, tc.attempts)
			}
			var he *HTTPError
			if tc.want != nil && (!errors.As(err, &he) || he.StatusCode != tc.status || he.Message == "") {
				t.Errorf("HTTPError %+v", he)
			}
		})
	}
}

func TestStartCancelDoesNotLeak(t *testing.T) {
	base := countGoroutines()
	var kills atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			kills.Add(1)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		_, _ = w.Write([]byte(`{"type":"start","id":5,"pid":9}` + "\n"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	sb := handleFor(t, srv)
	for i := 0; i < 10; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		p, err := sb.Start(ctx, Cmd{Args: []string{"sleep", "100"}, Stdin: strings.NewReader("in")})
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if _, err := p.Wait(); err == nil {
			t.Fatal("Wait after cancel: no error")
		}
	}
	close(release)
	srv.CloseClientConnections()
	srv.Close()
	if kills.Load() != 10 {
		t.Errorf("%d kills, want 10", kills.Load())
	}
	sb.c.conn.hc.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for countGoroutines() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if countGoroutines() > base {
		t.Errorf("goroutines: %d > %d", countGoroutines(), base)
	}
}

// TestPodProxyClientLeavesDefaultsAlone: for a REST config without TLS, dialer or proxy
// (a kubectl proxy URL) client-go hands out http.DefaultClient and DefaultTransport; the
// pod-proxy client must neither change them nor close the program's idle connections,
// and it has no overall timeout.
func TestPodProxyClientLeavesDefaultsAlone(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	get := func() {
		resp, err := http.Get(srv.URL) // http.DefaultClient
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	tests := []struct {
		name    string
		timeout time.Duration
	}{{"no timeout", 0}, {"timeout", time.Second}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			get() // an idle connection in http.DefaultTransport
			before := conns.Load()
			c, err := NewClient(Options{Namespace: "ns", kube: newFakeKube(),
				RestConfig: &rest.Config{Host: "http://127.0.0.1:1", Timeout: tc.timeout}})
			if err != nil {
				t.Fatal(err)
			}
			if http.DefaultClient.CheckRedirect != nil {
				http.DefaultClient.CheckRedirect = nil
				t.Error("NewClient set http.DefaultClient.CheckRedirect")
			}
			if hc := c.conn.hc; hc == http.DefaultClient || hc.Transport == http.DefaultTransport ||
				hc.Timeout != 0 || hc.CheckRedirect == nil {
				t.Errorf("pod-proxy client %+v", hc)
			}
			c.CloseIdleConnections()
			get()
			if n := conns.Load(); n != before {
				t.Errorf("%d new connections: CloseIdleConnections closed http.DefaultTransport's idle one",
					n-before)
			}
		})
	}
}

// TestReadCapWithoutLimit: MaxReadSize math.MaxInt64 reads the whole file (a cap of
// max+1 must not wrap).
func TestReadCapWithoutLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("X-File-Size", "5")
		_, _ = io.WriteString(w, "hello")
	}))
	defer srv.Close()
	sb := handleFor(t, srv)
	sb.c.maxRead = math.MaxInt64
	tests := []struct {
		name string
		read func(ctx context.Context) ([]byte, error)
	}{
		{"ReadFile", func(ctx context.Context) ([]byte, error) { return sb.Files().ReadFile(ctx, "a") }},
		{"ReadRange", func(ctx context.Context) ([]byte, error) {
			r, err := sb.Files().ReadRange(ctx, "a", 0, -1)
			if err != nil {
				return nil, err
			}
			return r.Data, nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if b, err := tc.read(testCtx(t)); err != nil || string(b) != "hello" {
				t.Errorf("got %q, %v; want \"hello\"", b, err)
			}
		})
	}
}

// TestTransient: waits retry the API server's "later" answers and network failures,
// not failures that a retry cannot fix.
func TestTransient(t *testing.T) {
	gr := extv1beta1.Resource("sandboxclaims")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"503", apierrors.NewServiceUnavailable("x"), true},
		{"429", apierrors.NewTooManyRequests("x", 1), true},
		{"server timeout", apierrors.NewServerTimeout(gr, "get", 1), true},
		{"500", apierrors.NewInternalError(errors.New("x")), true},
		{"forbidden", apierrors.NewForbidden(gr, "c", errors.New("x")), false},
		{"not found", apierrors.NewNotFound(gr, "c"), false},
		{"bad request", apierrors.NewBadRequest("x"), false},
		{"deadline", context.DeadlineExceeded, true},
		{"dial", &url.Error{Op: "Get", URL: "https://x", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, true},
		{"reset", &url.Error{Op: "Get", URL: "https://x", Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}}, true},
		{"unexpected EOF", fmt.Errorf("decode: %w", io.ErrUnexpectedEOF), true},
		{"GOAWAY", errors.New("http2: server sent GOAWAY and closed the connection"), true},
		{"TLS alert", &url.Error{Op: "Get", URL: "https://x", Err: &net.OpError{Op: "remote error",
			Err: errors.New("tls: bad certificate")}}, false},
		{"unknown authority", &url.Error{Op: "Get", URL: "https://x",
			Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}, false},
		{"exec plugin", &url.Error{Op: "Get", URL: "https://x", Err: errors.New("getting credentials: exec: executable kubelogin not found")}, false},
		{"empty name", errors.New("resource name may not be empty"), false},
		{"decode", errors.New("json: cannot unmarshal string into Go value"), false},
		{"HTTP/2 stream reset", &url.Error{Op: "Get", URL: "https://x",
			Err: http2.StreamError{StreamID: 3, Code: http2.ErrCodeInternal}}, true},
		{"net/http's HTTP/2 stream error", errors.New("stream error: stream ID 5; INTERNAL_ERROR; received from peer"),
			true},
		{"HTTP/2 connection force closed", &url.Error{Op: "Get", URL: "https://x",
			Err: errors.New("http2: client connection force closed via ClientConn.Close")}, true},
		{"HTTP/2 connection lost", errors.New("http2: client connection lost"), true},
		{"rate limiter (a timeout of its own, not retried)", limiterErr, false},
	}
	for _, tc := range tests {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("%s: transient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestRouterTokenFromExecPlugin: a kubeconfig whose user is an exec plugin (EKS, GKE,
// kubelogin) and no token: router requests carry the plugin's token, as in the Python
// SDK (before, they went without one and got the router's 401). $AGENT_SANDBOX_ROUTER_TOKEN
// wins over the kubeconfig's credentials.
func TestRouterTokenFromExecPlugin(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "plugin.sh")
	cred := `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t1"}}`
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho '"+cred+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		answer(w, http.StatusOK, `{"exit_code":0,"stdout":"","stderr":""}`)
	}))
	defer srv.Close()
	rc := &rest.Config{Host: "https://127.0.0.1:1", ExecProvider: &clientcmdapi.ExecConfig{
		Command: script, APIVersion: "client.authentication.k8s.io/v1",
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	for _, tc := range []struct{ env, want string }{{"", "Bearer t1"}, {"from-env", "Bearer from-env"}} {
		t.Setenv(EnvRouterToken, tc.env)
		sb := attachReady(t, Connection{RouterURL: srv.URL}, func(o *Options) { o.RestConfig = rc })
		if _, err := sb.Files().Stat(testCtx(t), "x"); err != nil && !errors.Is(err, ErrInvalidArgument) {
			t.Logf("stat: %v", err) // the answer's shape does not matter: the header does
		}
		if g, _ := got.Load().(string); g != tc.want {
			t.Errorf("env %q: Authorization %q, want %q", tc.env, g, tc.want)
		}
	}
}
