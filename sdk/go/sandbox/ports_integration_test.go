//go:build integration

package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestIntegrationStackPorts starts an HTTP server in a claimed sandbox (a process kept
// running by an open Start) and reaches it through PortURL (with its Header) and
// HTTPClient in every connection mode.
func TestIntegrationStackPorts(t *testing.T) {
	s := needStack(t)
	c := stackClient(t, s, ModePodProxy)
	ctx := testCtx(t)
	sb, err := c.CreateSandbox(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Delete(context.Background()) })
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	tag := hex.EncodeToString(b)
	port := 30000 + int(b[0])*16 + int(b[1]&15)
	dir := "/tmp/go-ports-" + tag
	if r, err := sb.Run(ctx, fmt.Sprintf("mkdir -p %s && printf %s > %s/hello.txt", dir, tag, dir)); err != nil || r.ExitCode != 0 {
		t.Fatalf("prepare: %+v %v", r, err)
	}
	srvCtx, stop := context.WithCancel(context.Background())
	defer stop()
	p, err := sb.Start(srvCtx, Cmd{Command: fmt.Sprintf("exec python3 -m http.server %d --bind 0.0.0.0 --directory %s >/dev/null 2>&1", port, dir)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(context.Background()) }()
	probe := fmt.Sprintf("python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:%d/hello.txt').read().decode())\"", port)
	for deadline := time.Now().Add(60 * time.Second); ; {
		if r, err := sb.Run(ctx, probe); err == nil && strings.TrimSpace(r.Stdout) == tag {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the HTTP server in the sandbox did not come up")
		}
		time.Sleep(300 * time.Millisecond)
	}
	for _, mode := range []Mode{ModePodProxy, ModeRouter, ModeDirect} {
		t.Run(string(mode), func(t *testing.T) {
			h, err := stackClient(t, s, mode).AttachClaim(testCtx(t), sb.ClaimName())
			if err != nil {
				t.Fatal(err)
			}
			if mode == ModeDirect {
				d, err := net.DialTimeout("tcp", net.JoinHostPort(h.PodIP(), strconv.Itoa(port)), 2*time.Second)
				if err != nil {
					t.Skipf("direct: pod IP %s not reachable from here: %v", h.PodIP(), err)
				}
				d.Close()
			}
			hc, base, err := h.HTTPClient(port)
			if err != nil {
				t.Fatal(err)
			}
			get := func(client *http.Client, u string, hdr http.Header) (int, string) {
				req, _ := http.NewRequestWithContext(testCtx(t), "GET", u, nil)
				for k, v := range hdr {
					req.Header[k] = v
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("GET %s: %v", u, err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(body)
			}
			if code, body := get(hc, base+"hello.txt", nil); code != 200 || body != tag {
				t.Errorf("HTTPClient: %d %q", code, body)
			}
			if code, _ := get(hc, base+"no-such-file", nil); code != 404 {
				t.Errorf("HTTPClient, missing file: %d", code)
			}
			u, err := h.PortURL(port, "/hello.txt")
			if err != nil {
				t.Fatal(err)
			}
			if mode != ModePodProxy { // the pod proxy needs the REST config's TLS: HTTPClient
				if code, body := get(http.DefaultClient, u.URL, u.Header); code != 200 || body != tag {
					t.Errorf("PortURL %s: %d %q", u.URL, code, body)
				}
			}
		})
	}
	_, _ = sb.Run(context.Background(), "rm -rf "+dir)
}
