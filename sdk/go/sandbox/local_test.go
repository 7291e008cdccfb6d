package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// sandboxdBinary finds a built sandboxd: $AS_SANDBOXD, else build/*/sandboxd of the
// repository.
func sandboxdBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("AS_SANDBOXD"); p != "" {
		return p
	}
	wd, _ := os.Getwd()
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		matches, _ := filepath.Glob(filepath.Join(d, "build", "*", "sandboxd"))
		for _, m := range matches {
			if st, err := os.Stat(m); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				return m
			}
		}
	}
	t.Skip("no sandboxd binary (set AS_SANDBOXD or build it: ninja -C build/<dir> sandboxd)")
	return ""
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startSandboxd runs sandboxd on 127.0.0.1 with a temporary root; it stops with the test.
// Its keepalives come every 0.3 s (15 s by default), so that every call that waits on
// sandboxd longer (a run, a process stream, a background output follow or wait) meets
// them: the leading spaces of a late answer and the keepalive events.
func startSandboxd(t testing.TB) int {
	t.Helper()
	bin := sandboxdBinary(t)
	port := freePort(t)
	cmd := exec.Command(bin, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--legacy-port", "-1",
		"--grpc-port", "0", "--root", t.TempDir(), "--log-level", "warn", "--process-keepalive", "0.3")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandboxd did not listen on %d", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// forwarder is a reverse proxy to sandboxd that checks what a mode must send.
func forwarder(t testing.TB, sbdPort int, check func(r *http.Request) (path string, err error)) *httptest.Server {
	target, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", sbdPort))
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Del("Authorization")
		},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := check(r)
		if err != nil {
			t.Errorf("%s %s: %v", r.Method, r.URL, err)
			http.Error(w, `{"detail":"`+err.Error()+`"}`, http.StatusBadRequest)
			return
		}
		dec, err := url.PathUnescape(p)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.URL.Path, r.URL.RawPath = dec, p
		// sandboxd answers a process start while Go's transport may still be checking
		// the request body for EOF; without full duplex the server would close that
		// body when the answer starts and the transport would drop the stream.
		_ = http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func routerCheck(port int) func(r *http.Request) (string, error) {
	return func(r *http.Request) (string, error) {
		want := map[string]string{"X-Sandbox-ID": "sb", "X-Sandbox-Namespace": "ns",
			"X-Sandbox-Port": strconv.Itoa(port), "Authorization": "Bearer router-token"}
		for k, v := range want {
			if got := r.Header.Get(k); got != v {
				return "", fmt.Errorf("header %s = %q, want %q", k, got, v)
			}
		}
		return r.URL.EscapedPath(), nil
	}
}

func podProxyCheck(port int) func(r *http.Request) (string, error) {
	prefix := fmt.Sprintf("/api/v1/namespaces/ns/pods/sb-pod:%d/proxy", port)
	return func(r *http.Request) (string, error) {
		p := r.URL.EscapedPath()
		if !strings.HasPrefix(p, prefix+"/") {
			return "", fmt.Errorf("path %q lacks %q", p, prefix)
		}
		if r.Header.Get("X-Sandbox-ID") != "" {
			return "", fmt.Errorf("router headers sent to the API server")
		}
		return strings.TrimPrefix(p, prefix), nil
	}
}

// localSandbox builds a client in mode with a fake Kubernetes API that holds a Ready
// Sandbox "sb" (pod "sb-pod", IP 127.0.0.1) served by a local sandboxd. tweaks change
// the options before NewClient.
func localSandbox(t testing.TB, mode Mode, tweaks ...func(*Options)) *Sandbox {
	t.Helper()
	port := startSandboxd(t)
	return attachReady(t, Connection{Mode: mode, Port: port}, func(o *Options) {
		switch mode {
		case ModeRouter:
			o.Connection.RouterURL = forwarder(t, port, routerCheck(port)).URL
			o.Connection.RouterToken = "router-token"
		case ModePodProxy:
			o.RestConfig = &rest.Config{Host: forwarder(t, port, podProxyCheck(port)).URL}
		}
		for _, f := range tweaks {
			f(o)
		}
	})
}

// attachReady is a handle on Sandbox ns/sb, Ready at 127.0.0.1 in a fake Kubernetes API,
// through conn; tweak (if any) changes the options before NewClient.
func attachReady(t testing.TB, conn Connection, tweak func(*Options)) *Sandbox {
	t.Helper()
	k := newFakeKube()
	k.sbx.Add(readySandbox("sb", "127.0.0.1"))
	opts := Options{Namespace: "ns", kube: k, Connection: conn}
	if tweak != nil {
		tweak(&opts)
	}
	c, err := NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Attach(testCtx(t), "sb")
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func TestLocalSandboxd(t *testing.T) {
	for _, mode := range []Mode{ModeDirect, ModeRouter, ModePodProxy} {
		t.Run(string(mode), func(t *testing.T) {
			dataPlaneSuite(t, localSandbox(t, mode))
		})
	}
}

// TestLocalPodProxyIgnoresRestTimeout: the REST config's Timeout bounds API requests,
// not the data plane: a run and a stream in pod-proxy mode outlive it (they are bounded
// by their contexts).
func TestLocalPodProxyIgnoresRestTimeout(t *testing.T) {
	sb := localSandbox(t, ModePodProxy, func(o *Options) { o.RestConfig.Timeout = time.Second })
	tests := []struct {
		name string
		op   func(ctx context.Context) error
	}{
		{"Run", func(ctx context.Context) error {
			r, err := sb.Run(ctx, "sleep 2; echo ok")
			if err == nil && (r.Stdout != "ok\n" || r.ExitCode != 0) {
				err = fmt.Errorf("result %+v", r)
			}
			return err
		}},
		{"Start", func(ctx context.Context) error {
			var out syncBuffer
			p, err := sb.Start(ctx, Cmd{Command: "sleep 2; echo ok", Stdout: &out})
			if err != nil {
				return err
			}
			st, err := p.Wait()
			if err == nil && (!st.Success() || out.String() != "ok\n") {
				err = fmt.Errorf("exit %+v, out %q", st, out.String())
			}
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(testCtx(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLocalNoLeaks: after every call of the suite, nothing of the SDK keeps running.
func TestLocalNoLeaks(t *testing.T) {
	sb := localSandbox(t, ModeDirect)
	_ = sb.Health(testCtx(t))
	sb.c.CloseIdleConnections()
	base := countGoroutines()
	dataPlaneSuite(t, sb)
	sb.c.CloseIdleConnections()
	waitGoroutines(t, base)
}

func BenchmarkLocalRun(b *testing.B) {
	for _, mode := range []Mode{ModeDirect, ModeRouter, ModePodProxy} {
		b.Run(string(mode), func(b *testing.B) {
			sb := localSandbox(b, mode)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := sb.Run(ctx, "true"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkLocalFileRoundTrip1MiB(b *testing.B) {
	sb := localSandbox(b, ModeDirect)
	ctx := context.Background()
	data := make([]byte, 1<<20)
	b.SetBytes(2 << 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := sb.Files().WriteFile(ctx, "bench.bin", data); err != nil {
			b.Fatal(err)
		}
		if _, err := sb.Files().ReadFile(ctx, "bench.bin"); err != nil {
			b.Fatal(err)
		}
	}
}

// The NDJSON reader is exercised here against a hand-written stream with edge cases.
func TestStreamEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr bool
		wantOut string
		code    int
		hang    bool // the server keeps the body open after the exit event
	}{
		{"normal", `{"type":"start","id":1,"pid":2}` + "\n" + `{"type":"stdout","data":"aGk="}` + "\n" +
			`{"type":"exit","exit_code":4}` + "\n", false, "hi", 4, false},
		{"cut off", `{"type":"start","id":1,"pid":2}` + "\n" + `{"type":"stdout","data":"aGk="}` + "\n", true, "hi", 0, false},
		{"bad base64", `{"type":"start","id":1,"pid":2}` + "\n" + `{"type":"stdout","data":"@@"}` + "\n", true, "", 0, false},
		{"error event", `{"type":"start","id":1,"pid":2}` + "\n" + `{"type":"error","code":"X","message":"m"}` + "\n", true, "", 0, false},
		{"body left open after exit", `{"type":"start","id":1,"pid":2}` + "\n" + `{"type":"exit","exit_code":3}` + "\n",
			false, "", 3, true},
		{"unknown events are skipped", `{"type":"start","id":1,"pid":2}` + "\n" + `{"type":"future"}` + "\n" +
			`{"type":"exit","exit_code":0}` + "\n", false, "", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/x-ndjson")
				bw := bufio.NewWriter(w)
				_, _ = bw.WriteString(tc.body)
				_ = bw.Flush()
				if tc.hang {
					w.(http.Flusher).Flush()
					<-r.Context().Done()
				}
			}))
			defer srv.Close()
			sb := handleFor(t, srv)
			var out syncBuffer
			p, err := sb.Start(testCtx(t), Cmd{Command: "x", Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			st, err := p.Wait()
			if d := time.Since(start); d > drainTimeout+3*time.Second {
				t.Errorf("Wait took %v", d)
			}
			if (err != nil) != tc.wantErr || out.String() != tc.wantOut {
				t.Fatalf("Wait: %+v %v, out %q", st, err, out.String())
			}
			if !tc.wantErr && st.ExitCode != tc.code {
				t.Errorf("exit %d, want %d", st.ExitCode, tc.code)
			}
		})
	}
}

// handleFor is a handle whose data plane is srv in direct mode.
func handleFor(t testing.TB, srv *httptest.Server) *Sandbox {
	t.Helper()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	return attachReady(t, Connection{Mode: ModeDirect, Port: port, SandboxdToken: "sbd-token"}, nil)
}

// countingTransport counts CloseIdleConnections calls; wrapper hides it the way
// client-go's credential wrappers do (only WrappedRoundTripper leads to it).
type countingTransport struct {
	http.RoundTripper
	closed int
}

func (c *countingTransport) CloseIdleConnections() { c.closed++ }

type wrapper struct{ rt http.RoundTripper }

func (w wrapper) RoundTrip(r *http.Request) (*http.Response, error) { return w.rt.RoundTrip(r) }
func (w wrapper) WrappedRoundTripper() http.RoundTripper            { return w.rt }

// TestCloseIdleThroughCredentialWrappers: closing a router client's idle connections
// reaches the transport under client-go's wrappers (an exec plugin's or an auth
// provider's token); http.Client's CloseIdleConnections stopped at the wrapper.
func TestCloseIdleThroughCredentialWrappers(t *testing.T) {
	ct := &countingTransport{RoundTripper: http.DefaultTransport}
	c := &conn{mode: ModeRouter, hc: &http.Client{Transport: wrapper{rt: ct}}}
	c.closeIdle()
	if ct.closed != 1 {
		t.Errorf("CloseIdleConnections reached the transport %d times, want 1", ct.closed)
	}
}
