package sandbox

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestPortURL(t *testing.T) {
	router := &conn{mode: ModeRouter, routerURL: "http://router:8080", routerToken: "rt", port: 8080}
	proxy := &conn{mode: ModePodProxy, apiBase: "https://api:6443", apiToken: "kt", port: 8080}
	proxyCert := &conn{mode: ModePodProxy, apiBase: "https://api:6443", port: 8080}
	direct := &conn{mode: ModeDirect, port: 8080, sbdToken: "st"}
	tg := target{ns: "team a", name: "sb-1", podName: "pod-x", podIP: "10.1.2.3"}
	tests := []struct {
		name  string
		c     *conn
		t     target
		port  int
		path  string
		url   string
		token string
		err   error
	}{
		{"router root", router, tg, 3000, "/", "http://router:8080/s/team%20a/sb-1/3000/", "rt", nil},
		{"router path and query", router, tg, 3000, "/a/b?x=1", "http://router:8080/s/team%20a/sb-1/3000/a/b?x=1", "rt", nil},
		{"proxy", proxy, tg, 3000, "index.html", "https://api:6443/api/v1/namespaces/team%20a/pods/pod-x:3000/proxy/index.html", "kt", nil},
		{"proxy, client certificate", proxyCert, tg, 3000, "", "https://api:6443/api/v1/namespaces/team%20a/pods/pod-x:3000/proxy/", "", nil},
		{"proxy without pod name", proxy, target{ns: "n", name: "sb"}, 1, "/", "https://api:6443/api/v1/namespaces/n/pods/sb:1/proxy/", "kt", nil},
		{"direct, other port: no sandboxd token", direct, tg, 3000, "/x", "http://10.1.2.3:3000/x", "", nil},
		{"direct, sandboxd port", direct, tg, 8080, "/v1/health", "http://10.1.2.3:8080/v1/health", "st", nil},
		{"direct IPv6", direct, target{ns: "n", name: "s", podIP: "fd00::5"}, 80, "/", "http://[fd00::5]:80/", "", nil},
		{"direct without pod IP", direct, target{ns: "n", name: "s"}, 80, "/", "", "", ErrNotReady},
		{"port 0", router, tg, 0, "/", "", "", ErrInvalidArgument},
		{"port 65536", router, tg, 65536, "/", "", "", ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.c.portURL(tc.t, tc.port, tc.path)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if got.URL != tc.url || got.Token != tc.token || got.Mode != tc.c.mode {
				t.Errorf("got %+v, want URL %q token %q", got, tc.url, tc.token)
			}
			if !strings.HasSuffix(got.BaseURL, "/") || !strings.HasPrefix(got.URL, got.BaseURL) {
				t.Errorf("BaseURL %q does not prefix URL %q", got.BaseURL, got.URL)
			}
			wantAuth := ""
			if tc.token != "" {
				wantAuth = "Bearer " + tc.token
			}
			if a := got.Header.Get("Authorization"); a != wantAuth {
				t.Errorf("Authorization = %q, want %q", a, wantAuth)
			}
		})
	}
}

func TestHTTPClientAddsHeaders(t *testing.T) {
	var gotPath, gotAuth, gotOther string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotAuth, gotOther = r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("X-Other")
		_, _ = io.WriteString(w, "hi")
	}))
	defer srv.Close()
	k := newFakeKube()
	c := newTestClient(t, k)
	c.conn = &conn{mode: ModeRouter, routerURL: srv.URL, routerToken: "rt", port: 8080, hc: srv.Client()}
	s := &Sandbox{c: c, ns: "ns", name: "sb"}
	hc, base, err := s.HTTPClient(5000)
	if err != nil {
		t.Fatal(err)
	}
	if base != srv.URL+"/s/ns/sb/5000/" {
		t.Fatalf("base = %q", base)
	}
	req, _ := http.NewRequest("GET", base+"files/a.txt?x=1", nil)
	req.Header.Set("X-Other", "o")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != "hi" || gotPath != "/s/ns/sb/5000/files/a.txt?x=1" || gotAuth != "Bearer rt" || gotOther != "o" {
		t.Errorf("body %q path %q auth %q other %q", body, gotPath, gotAuth, gotOther)
	}
	if req.Header.Get("Authorization") != "" {
		t.Error("the caller's request was modified")
	}
	u, err := s.URL(5000, "/x")
	if err != nil || u != srv.URL+"/s/ns/sb/5000/x" {
		t.Errorf("URL = %q, %v", u, err)
	}
	s.deleted = true
	if _, _, err := s.HTTPClient(5000); !errors.Is(err, ErrClosed) {
		t.Errorf("deleted handle: err = %v", err)
	}
}

// TestHTTPClientCredentialsOnlyForItsPort: Sandbox.HTTPClient adds the mode's
// credentials (the router token, an exec plugin's token, the pod proxy's kube
// credentials through client-go's transport, sandboxd's token) to the port's own requests
// only: another host or port, another path of the router or the API server, or a path
// whose dot segments lead out of the port's prefix goes without any.
func TestHTTPClientCredentialsOnlyForItsPort(t *testing.T) {
	t.Setenv(EnvRouterToken, "")
	// each server answers with the Authorization it was sent
	echoAuth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Header.Get("Authorization"))
	})
	other := httptest.NewServer(echoAuth)
	defer other.Close()
	srv := httptest.NewServer(echoAuth)
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(echoAuth)
	defer tlsSrv.Close()
	srvPort, _ := strconv.Atoi(strings.TrimPrefix(srv.URL, "http://127.0.0.1:"))

	dir := t.TempDir()
	script := filepath.Join(dir, "plugin.sh")
	cred := `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"plugin-token"}}`
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho '"+cred+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plugin := &rest.Config{Host: "https://127.0.0.1:1", ExecProvider: &clientcmdapi.ExecConfig{
		Command: script, APIVersion: "client.authentication.k8s.io/v1",
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}

	tests := []struct {
		name   string
		conn   Connection
		rc     *rest.Config
		port   int
		auth   string   // what the port's own requests carry
		others []string // same-server URLs (after the server's URL) that get none
	}{
		{name: "router token", conn: Connection{RouterURL: srv.URL, RouterToken: "rt"}, port: 5000,
			auth: "Bearer rt", others: []string{"/v1/processes", "/s/ns/sb/50001/", "/s/ns/sb/5000/../../other/5000/x",
				"/s/ns/sb/5000/a/%2e%2e/%2e%2e/%2e%2e/sb2/5000/"}},
		{name: "router, exec plugin", conn: Connection{RouterURL: srv.URL}, rc: plugin, port: 5000,
			auth: "Bearer plugin-token", others: []string{"/v1/processes", "/s/ns/sb/5000/../../../x"}},
		{name: "pod proxy", conn: Connection{Mode: ModePodProxy}, rc: &rest.Config{Host: srv.URL, BearerToken: "kt"},
			port: 5000, auth: "Bearer kt", others: []string{"/api/v1/namespaces/ns/secrets",
				"/api/v1/namespaces/ns/pods/sb-pod:5000/proxy/../../other:5000/proxy/"}},
		{name: "pod proxy, TLS", conn: Connection{Mode: ModePodProxy}, rc: &rest.Config{Host: tlsSrv.URL, BearerToken: "kt",
			TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, port: 5000, auth: "Bearer kt"},
		{name: "direct, sandboxd's port", conn: Connection{Mode: ModeDirect, Port: srvPort, SandboxdToken: "st"},
			port: srvPort, auth: "Bearer st"},
	}
	get := func(t *testing.T, hc *http.Client, u string) string {
		t.Helper()
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := attachReady(t, tc.conn, func(o *Options) { o.RestConfig = tc.rc })
			hc, base, err := sb.HTTPClient(tc.port)
			if err != nil {
				t.Fatal(err)
			}
			if got := get(t, hc, base+"a/b?x=1"); got != tc.auth {
				t.Errorf("GET %sa/b: Authorization %q, want %q", base, got, tc.auth)
			}
			srvURL := base[:strings.Index(base[len("https://"):], "/")+len("https://")]
			for _, u := range append([]string{other.URL + "/collect", other.URL + strings.TrimPrefix(base, srvURL)},
				prefixAll(srvURL, tc.others)...) {
				if got := get(t, hc, u); got != "" {
					t.Errorf("GET %s: Authorization %q, want none", u, got)
				}
			}
		})
	}
}

func prefixAll(p string, s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = p + x
	}
	return out
}
