package sandbox

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
