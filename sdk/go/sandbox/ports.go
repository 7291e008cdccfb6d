package sandbox

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
)

// PortURL says where a TCP port of a sandbox answers (any server listening in the pod,
// not only sandboxd) over the client's connection mode:
//
//   - ModeRouter: the router's path form {RouterURL}/s/{namespace}/{name}/{port}/{path}
//     with "Authorization: Bearer {RouterToken}";
//   - ModePodProxy: the API server's pod proxy
//     {server}/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy/{path} with the REST
//     config's credentials (a bearer token is in Header; client certificates only work
//     through Sandbox.HTTPClient, whose transport carries them);
//   - ModeDirect: http://{podIP}:{port}/{path} (inside the cluster network only).
type PortURL struct {
	// URL is the full URL of the path asked for.
	URL string
	// BaseURL is the URL of the port's root; it ends with "/".
	BaseURL string
	// Header holds the headers every request must carry (nil-safe to range over).
	Header http.Header
	// Token is the bearer token in Header, or "". It is the token at the time of the
	// call: a token read from a file rotates (Sandbox.HTTPClient follows it).
	Token string
	// Mode is the connection mode the URL is for.
	Mode Mode
}

// portURL computes the PortURL of port in t for this connection.
func (c *conn) portURL(t target, port int, path string) (PortURL, error) {
	if port < 1 || port > 65535 {
		return PortURL{}, fmt.Errorf("%w: port %d out of range", ErrInvalidArgument, port)
	}
	p := PortURL{Header: http.Header{}, Mode: c.mode}
	switch c.mode {
	case ModeRouter:
		p.BaseURL = fmt.Sprintf("%s/s/%s/%s/%d/", c.routerURL, url.PathEscape(t.ns), url.PathEscape(t.name), port)
	case ModePodProxy:
		pod := t.podName
		if pod == "" {
			pod = t.name
		}
		p.BaseURL = fmt.Sprintf("%s/api/v1/namespaces/%s/pods/%s:%d/proxy/", c.apiBase,
			url.PathEscape(t.ns), url.PathEscape(pod), port)
	case ModeDirect:
		if t.podIP == "" {
			return PortURL{}, fmt.Errorf("%w: %s/%s has no pod IP", ErrNotReady, t.ns, t.name)
		}
		p.BaseURL = "http://" + net.JoinHostPort(t.podIP, strconv.Itoa(port)) + "/"
	default:
		return PortURL{}, fmt.Errorf("%w: unknown connection mode %q", ErrInvalidArgument, c.mode)
	}
	p.Token = c.portBearer(port)()
	if p.Token != "" {
		p.Header.Set("Authorization", "Bearer "+p.Token)
	}
	p.URL = p.BaseURL + strings.TrimLeft(path, "/")
	return p, nil
}

// portBearer returns the bearer token for port in the client's mode, read at each call
// (a token file may rotate).
func (c *conn) portBearer(port int) func() string {
	switch {
	case c.mode == ModeRouter:
		return c.routerBearer
	case c.mode == ModePodProxy:
		return c.apiBearer
	case c.mode == ModeDirect && port == c.port: // sandboxd's own token goes to sandboxd only
		return func() string { return c.sbdToken }
	}
	return func() string { return "" }
}

// PortURL returns where port of the sandbox answers, for path ("" or "/" is the root;
// a query may follow), with the headers a request needs in the client's mode.
func (s *Sandbox) PortURL(port int, path string) (PortURL, error) {
	t, err := s.target()
	if err != nil {
		return PortURL{}, err
	}
	return s.c.conn.portURL(t, port, path)
}

// URL is PortURL(port, path).URL: send PortURL's Header with it.
func (s *Sandbox) URL(port int, path string) (string, error) {
	p, err := s.PortURL(port, path)
	return p.URL, err
}

// HTTPClient returns an *http.Client for port that adds the mode's headers and
// credentials to the requests for the port, and the port's base URL (ending with "/") to
// resolve request paths against. Only a request whose scheme, host and port are the base
// URL's, and in router and pod-proxy modes whose path (with its dot segments resolved)
// is under the base URL's path, gets them; any other request (an absolute link or a
// Location the sandbox's server gave, another path of the router or the API server) goes
// without, through a transport that adds no credential. It shares the client's
// connection pool; redirects are not followed. The bearer token is the current one at
// each request. A request whose context has no deadline waits for its answer's head at
// most Options.DefaultTimeout (the time its body's reader takes does not count); the
// body then streams for as long as it lasts: the port's server may be silent for as long
// as it likes (a long poll, events without heartbeats), unless
// Options.HTTPClientStreamIdleTimeout is set (then a read that waits that long for a
// byte fails with a *StreamIdleError and closes the connection; an upgraded connection,
// 101, is never bounded). The client has no Timeout of its own.
func (s *Sandbox) HTTPClient(port int) (*http.Client, string, error) {
	p, err := s.PortURL(port, "/")
	if err != nil {
		return nil, "", err
	}
	base := s.c.conn.hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	u, err := url.Parse(p.BaseURL)
	if err != nil {
		return nil, "", fmt.Errorf("sandbox: base URL %q: %w", p.BaseURL, err)
	}
	header := p.Header.Clone()
	header.Del("Authorization")
	ht := &headerTransport{base: base, plain: s.c.conn.plainTransport(), header: header,
		token: s.c.conn.portBearer(port), scheme: strings.ToLower(u.Scheme), host: hostPort(u),
		timeout: s.c.conn.timeout, idle: s.c.conn.portIdle}
	if p.Mode != ModeDirect {
		ht.prefix, ht.rawPrefix = u.Path, u.EscapedPath()
	}
	hc := &http.Client{
		Transport:     ht,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return hc, p.BaseURL, nil
}

// headerTransport adds fixed headers and the current bearer token (those not set
// already) to each request for its port (ours), which goes through base; other requests
// go unchanged through plain.
type headerTransport struct {
	base   http.RoundTripper
	plain  http.RoundTripper // no credentials
	header http.Header
	token  func() string
	// the port's scheme (lower case), host:port (lower case, the scheme's default port
	// filled in) and, when set, path prefix (ending with "/"), decoded and escaped
	scheme, host      string
	prefix, rawPrefix string
	// timeout: the default limit until an answer's head (limitHead) of a request whose
	// context has no deadline; 0: none
	timeout time.Duration
	// idle: the idle bound of an answer's body (Options.HTTPClientStreamIdleTimeout); 0:
	// none
	idle time.Duration
}

// hostPort is u's host name (lower case, no trailing dot) and port, the scheme's default
// port when u has none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return net.JoinHostPort(strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), port)
}

// underPrefix: p with its dot segments resolved is prefix (a directory path ending with
// "/") or beneath it.
func underPrefix(p, prefix string) bool {
	if p == "" {
		p = "/"
	}
	c := path.Clean(p)
	return c+"/" == prefix || strings.HasPrefix(c, prefix)
}

// ours: req is for the port: the same scheme, host and port, and path prefix.
func (h *headerTransport) ours(req *http.Request) bool {
	u := req.URL
	if u == nil || strings.ToLower(u.Scheme) != h.scheme || hostPort(u) != h.host {
		return false
	}
	return h.prefix == "" || (underPrefix(u.Path, h.prefix) && underPrefix(u.EscapedPath(), h.rawPrefix))
}

func (h *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	l := newLimiter(req.Context(), h.timeout, limitHead, 0)
	if l != nil {
		req = req.WithContext(l.ctx) // a copy: the caller's request is left alone
		l.watchBody(req)
	}
	ib, ctx := newIdleBound(req.Context(), req.Method+" "+req.URL.Path, h.idle)
	if ib != nil {
		req = req.WithContext(ctx)
	}
	return l.finish(ib.answer(h.roundTrip(req)))
}

func (h *headerTransport) roundTrip(req *http.Request) (*http.Response, error) {
	if !h.ours(req) {
		return h.plain.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	for k, v := range h.header {
		if r.Header.Get(k) == "" {
			r.Header[k] = append([]string(nil), v...)
		}
	}
	if tok := h.token(); tok != "" && r.Header.Get("Authorization") == "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return h.base.RoundTrip(r)
}
