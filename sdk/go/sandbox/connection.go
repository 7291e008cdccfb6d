package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// Mode is how the SDK reaches sandboxd inside a sandbox.
type Mode string

const (
	// ModeRouter goes through sandbox-router (RouterURL) with the X-Sandbox-* headers and
	// a bearer token that the router checks with TokenReview/SubjectAccessReview.
	ModeRouter Mode = "router"
	// ModeDirect dials the pod IP (programs running inside the cluster network).
	ModeDirect Mode = "direct"
	// ModePodProxy goes through the API server's pod proxy
	// (/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy/...) with the kubeconfig's
	// credentials: only a kubeconfig is needed, no kubectl, no port-forward.
	ModePodProxy Mode = "pod-proxy"
)

// DefaultPort is sandboxd's REST port.
const DefaultPort = 8080

// Connection configures the data plane (processes and files).
type Connection struct {
	// Mode: empty means ModeRouter when RouterURL is set, else ModePodProxy.
	Mode Mode
	// RouterURL is the router's base URL, e.g. http://127.0.0.1:8080.
	RouterURL string
	// RouterToken is sent as "Authorization: Bearer ..." to the router, as given.
	// Empty: the bearer token of the REST config, if any. Its BearerTokenFile, when
	// set and readable, wins over BearerToken (as in client-go) and is read again when
	// the file changes (looked at once a second, and at once when the router answers
	// 401), so rotated service-account tokens are picked up. A credential of the REST
	// config (token, token file, exec plugin, auth provider) goes only where it cannot
	// be read on the way: see AllowPlaintextToken.
	RouterToken string
	// AllowPlaintextToken lets the REST config's credential go to an http:// router on a
	// host that is not a loopback host (the same as $AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN
	// =true). Without it, and without a RouterToken or $AGENT_SANDBOX_ROUTER_TOKEN, such
	// a credential is sent only to an https router URL, to an http one on a loopback host
	// (localhost, *.localhost, 127.0.0.0/8, ::1) or when the REST config is the in-cluster
	// one (the pod's service account: the in-cluster router Service is plain HTTP);
	// NewClient refuses other router URLs with ErrInvalidArgument. An explicit router
	// token is always sent.
	AllowPlaintextToken bool
	// Port is sandboxd's port in the pod (default 8080).
	Port int
	// SandboxdToken, when set, is sent as a bearer token in ModeDirect (sandboxd's
	// --token-file). The router and the pod proxy consume the Authorization header
	// themselves.
	SandboxdToken string
	// HTTPClient is used in ModeRouter and ModeDirect. Nil: a pooled client without an
	// overall timeout (its Timeout would cut streams): calls are bounded by their
	// contexts and, without a deadline, by Options.DefaultTimeout.
	HTTPClient *http.Client
}

// target is what a request needs to know about a sandbox.
type target struct {
	ns, name, podName, podIP string
}

// conn sends data-plane requests in one mode.
type conn struct {
	mode        Mode
	routerURL   string
	routerToken string
	routerFile  *tokenFile // the REST config's token file: wins over routerToken
	port        int
	sbdToken    string
	hc          *http.Client
	apiBase     string     // pod proxy: API server URL (no trailing slash)
	apiToken    string     // pod proxy: the REST config's bearer token, if any (PortURL)
	apiFile     *tokenFile // pod proxy: the REST config's token file: wins over apiToken
	// ownTransport: pod proxy: the transport the SDK made under client-go's wrappers
	// (nil when client-go's own is used), closed by closeIdle.
	ownTransport *http.Transport
	// plain is the transport without the mode's credentials, for Sandbox.HTTPClient's
	// requests to other hosts: in router mode the one under an exec plugin's wrappers
	// (set by routerPluginAuth), in pod-proxy mode ownTransport or one of its own (nil:
	// the client's, see plainTransport).
	plain http.RoundTripper
	// timeout is the default time limit of a request whose context has no deadline
	// (Options.DefaultTimeout; 0: none).
	timeout time.Duration
	// streamIdle bounds the silence of an answer's body (Options.StreamIdleTimeout; 0:
	// none); portIdle that of Sandbox.HTTPClient's answers
	// (Options.HTTPClientStreamIdleTimeout; 0: none).
	streamIdle, portIdle time.Duration
}

func defaultHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 128
	tr.IdleConnTimeout = 90 * time.Second
	return &http.Client{
		Transport:     tr,
		CheckRedirect: noRedirect,
	}
}

// noRedirect: redirects are never followed: a redirect is an answer of its own.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// podProxyClient is the data-plane client of pod-proxy mode: client-go's transport for
// rc (TLS, credentials, proxy), in an http.Client of the SDK's own. It has no Timeout:
// rest.Config.Timeout would cut every run, stream and watch at that age; calls are
// bounded by their contexts and the default limit (limit.go). Nothing client-go returns
// is changed (for a config without TLS, dialer or proxy it returns http.DefaultTransport,
// shared by the whole program):
// such a config gets a transport of the SDK's own under client-go's wrappers, returned as
// own so that CloseIdleConnections closes that one and not the program's.
func podProxyClient(rc *rest.Config) (*http.Client, *http.Transport, error) {
	var own *http.Transport
	if rc.Transport == nil && rc.Dial == nil && rc.Proxy == nil {
		tlsCfg, err := rest.TLSConfigFor(rc)
		if err != nil {
			return nil, nil, err
		}
		if tlsCfg == nil {
			own = defaultHTTPClient().Transport.(*http.Transport)
			rc = rest.CopyConfig(rc)
			rc.Transport = own
		}
	}
	rt, err := rest.TransportFor(rc)
	if err != nil {
		return nil, nil, err
	}
	return &http.Client{Transport: rt, CheckRedirect: noRedirect}, own, nil
}

// plainTransport is the transport without credentials (plain).
func (c *conn) plainTransport() http.RoundTripper {
	switch {
	case c.plain != nil:
		return c.plain
	case c.mode == ModePodProxy: // never client-go's: it carries the API server's credentials
		return http.DefaultTransport
	case c.hc.Transport != nil:
		return c.hc.Transport
	}
	return http.DefaultTransport
}

// closeIdle closes the idle data-plane connections of the SDK's own transport. In
// pod-proxy mode a transport client-go made (TLS, a dialer or a proxy; cached by client-go
// and shared with every client of that config) is left alone.
func (c *conn) closeIdle() {
	switch {
	case c.mode != ModePodProxy:
		// through client-go's credential wrappers (an exec plugin's or an auth
		// provider's token for the router), which have no CloseIdleConnections of their
		// own: http.Client's would do nothing there
		if c.hc.Transport == nil {
			c.hc.CloseIdleConnections() // http.DefaultTransport's
		} else {
			utilnet.CloseIdleConnectionsFor(c.hc.Transport)
		}
	case c.ownTransport != nil:
		c.ownTransport.CloseIdleConnections()
	default:
		// the plain transport of HTTPClient's requests to other hosts
		if tr, ok := c.plain.(*http.Transport); ok {
			tr.CloseIdleConnections()
		}
	}
}

func newConn(c Connection, rc *rest.Config) (*conn, error) {
	cn := &conn{mode: c.Mode, port: c.Port, sbdToken: c.SandboxdToken, hc: c.HTTPClient}
	if cn.mode == "" {
		cn.mode = ModePodProxy
		if c.RouterURL != "" {
			cn.mode = ModeRouter
		}
	}
	if cn.port == 0 {
		cn.port = DefaultPort
	}
	if cn.port < 1 || cn.port > 65535 {
		return nil, fmt.Errorf("%w: port %d out of range", ErrInvalidArgument, cn.port)
	}
	if cn.hc == nil {
		cn.hc = defaultHTTPClient()
	}
	switch cn.mode {
	case ModeRouter:
		u, err := url.Parse(c.RouterURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%w: router URL %q must be http(s)://host[:port]", ErrInvalidArgument, c.RouterURL)
		}
		cn.routerURL = strings.TrimRight(c.RouterURL, "/")
		cn.routerToken = c.RouterToken
		if cn.routerToken == "" {
			cn.routerToken = os.Getenv(EnvRouterToken)
		}
		if cn.routerToken == "" && rc != nil {
			if err := plaintextCredentialAllowed(u, rc, c.AllowPlaintextToken); err != nil {
				return nil, err
			}
			cn.routerToken, cn.routerFile = rc.BearerToken, newTokenFile(rc.BearerTokenFile)
			if err := cn.routerPluginAuth(rc); err != nil {
				return nil, fmt.Errorf("sandbox: router credentials: %w", err)
			}
		}
	case ModeDirect:
	case ModePodProxy:
		if rc == nil {
			return nil, fmt.Errorf("%w: pod-proxy mode needs a REST config", ErrInvalidArgument)
		}
		hc, own, err := podProxyClient(rc)
		if err != nil {
			return nil, fmt.Errorf("sandbox: API server client: %w", err)
		}
		cn.hc, cn.ownTransport = hc, own
		if own != nil {
			cn.plain = own
		} else {
			cn.plain = defaultHTTPClient().Transport // client-go's carries the credentials
		}
		base, err := apiServerURL(rc)
		if err != nil {
			return nil, err
		}
		cn.apiBase = base
		cn.apiToken, cn.apiFile = rc.BearerToken, newTokenFile(rc.BearerTokenFile)
	default:
		return nil, fmt.Errorf("%w: unknown connection mode %q", ErrInvalidArgument, cn.mode)
	}
	return cn, nil
}

// EnvRouterToken holds the router's bearer token when Connection.RouterToken is empty
// (before the REST config's credentials), as in the Python SDK.
const EnvRouterToken = "AGENT_SANDBOX_ROUTER_TOKEN"

// EnvRouterAllowPlaintextToken set to "true" (or "t" or "1", any case) lets the REST config's credential go
// to an http:// router that is not on a loopback host (Connection.AllowPlaintextToken).
const EnvRouterAllowPlaintextToken = "AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN"

// inClusterTokenFile is the service-account token file of rest.InClusterConfig.
const inClusterTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// plaintextCredentialAllowed: the router at u may get rc's credential (none is an
// explicit router token): an https URL, an http one on a loopback host, the in-cluster
// config (the pod's service account; the in-cluster router Service is plain HTTP), or the
// caller's opt-in (allow, $AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN). A REST config
// without a credential the router could be sent (client certificates only) passes.
func plaintextCredentialAllowed(u *url.URL, rc *rest.Config, allow bool) error {
	hasCred := rc.BearerToken != "" || rc.BearerTokenFile != "" || rc.ExecProvider != nil || rc.AuthProvider != nil
	if !hasCred || strings.EqualFold(u.Scheme, "https") || loopbackHost(u.Hostname()) ||
		rc.BearerTokenFile == inClusterTokenFile || allow || envTrue(os.Getenv(EnvRouterAllowPlaintextToken)) {
		return nil
	}
	return fmt.Errorf("%w: refusing to send the kubeconfig's credentials in clear text to %s://%s (not a loopback "+
		"host); use an https router URL, a port-forward to localhost, a router token ($%s), or set %s=true",
		ErrInvalidArgument, strings.ToLower(u.Scheme), u.Host, EnvRouterToken, EnvRouterAllowPlaintextToken)
}

// loopbackHost: host (a URL's host name, without brackets or port) names this machine:
// localhost, a name ending in .localhost, 127.0.0.0/8, ::1 or ::ffff:127.x.x.x; a
// trailing dot is allowed.
func loopbackHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// envTrue: an opt-in variable's value that means yes ("true" in any case, or "1").
func envTrue(v string) bool {
	v = strings.TrimSpace(v)
	return strings.EqualFold(v, "true") || strings.EqualFold(v, "t") || v == "1"
}

// routerPluginAuth: a REST config whose credential comes from an exec plugin (EKS, GKE,
// kubelogin) or an auth provider, and no bearer token or token file: the router's
// requests carry that credential through client-go's own wrappers, which run the plugin,
// cache its token until it expires and run it again after a 401. Only the credential
// wrappers are applied (the REST config's TLS is the API server's, not the router's).
func (c *conn) routerPluginAuth(rc *rest.Config) error {
	if c.routerToken != "" || rc.BearerTokenFile != "" || (rc.ExecProvider == nil && rc.AuthProvider == nil) {
		return nil
	}
	base := c.hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	rt, err := rest.HTTPWrappersForConfig(rc, base)
	if err != nil {
		return err
	}
	c.plain = base
	hc := *c.hc
	hc.Transport = rt
	c.hc = &hc
	return nil
}

// routerBearer is the router's bearer token now.
func (c *conn) routerBearer() string { return c.routerFile.token(c.routerToken) }

// apiBearer is the API server's bearer token now (pod proxy).
func (c *conn) apiBearer() string { return c.apiFile.token(c.apiToken) }

// tokenRenewed: e is the router rejecting the token and a token file holds a new one,
// so the request may be sent again at once (the router answered before forwarding).
func (c *conn) tokenRenewed(e *HTTPError) bool {
	return c.mode == ModeRouter && e.StatusCode == http.StatusUnauthorized && e.Code == routerCode &&
		c.routerFile.renew()
}

func apiServerURL(rc *rest.Config) (string, error) {
	host := rc.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%w: API server host %q", ErrInvalidArgument, rc.Host)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// requestURL is the full URL of path (already escaped, starting with "/") for t.
func (c *conn) requestURL(t target, path string, q url.Values) (string, error) {
	var base string
	switch c.mode {
	case ModeRouter:
		base = c.routerURL
	case ModeDirect:
		if t.podIP == "" {
			return "", fmt.Errorf("%w: %s/%s has no pod IP", ErrNotReady, t.ns, t.name)
		}
		base = "http://" + net.JoinHostPort(t.podIP, strconv.Itoa(c.port))
	case ModePodProxy:
		pod := t.podName
		if pod == "" {
			pod = t.name
		}
		base = fmt.Sprintf("%s/api/v1/namespaces/%s/pods/%s:%d/proxy", c.apiBase,
			url.PathEscape(t.ns), url.PathEscape(pod), c.port)
	}
	s := base + path
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s, nil
}

// newRequest builds a request for t with the mode's headers.
func (c *conn) newRequest(ctx context.Context, t target, method, path string, q url.Values,
	body io.Reader) (*http.Request, error) {
	u, err := c.requestURL(t, path, q)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %s %s: %w", method, path, err)
	}
	req.Header.Set("User-Agent", "agent-sandbox-go-sdk")
	switch c.mode {
	case ModeRouter:
		req.Header.Set("X-Sandbox-ID", t.name)
		req.Header.Set("X-Sandbox-Namespace", t.ns)
		req.Header.Set("X-Sandbox-Port", strconv.Itoa(c.port))
		if dl, ok := ctx.Deadline(); ok {
			// at least 0.001: the router ignores "0.000" (and uses its default, 180 s)
			if s := time.Until(dl).Seconds(); s > 0 {
				req.Header.Set("X-Sandbox-Timeout", strconv.FormatFloat(max(s, 0.001), 'f', 3, 64))
			}
		}
		if tok := c.routerBearer(); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	case ModeDirect:
		if c.sbdToken != "" {
			req.Header.Set("Authorization", "Bearer "+c.sbdToken)
		}
	}
	return req, nil
}

// call describes one data-plane request.
type call struct {
	op          string // for errors
	method      string
	path        string // escaped, starting with "/"
	query       url.Values
	body        []byte    // replayable body (retries allowed)
	stream      io.Reader // streamed body (no retries); overrides body
	contentType string
	idempotent  bool // retry on 502/504 and transport errors as well
	// mayHaveRun, when set, is set to true by a failed attempt whose outcome is
	// unknown (outcomeUnknown): an error answer to a later attempt may then be the
	// earlier attempt's doing (a 404 for a delete, a 409 for a mkdir).
	mayHaveRun *bool
	// limit is how the default time limit bounds the call when its context has no
	// deadline (limit.go); runTimeout is the call's own time for limitRun.
	limit      limitKind
	runTimeout time.Duration
}

// retry budget: back-off retryDelay (50 ms) doubling to 1 s, at most this many attempts.
const maxAttempts = 8

// retryDelay is the first back-off of a retried data-plane request (a variable for tests).
var retryDelay = 50 * time.Millisecond

// do sends cl and returns a 2xx response (caller closes the body) or an error. Answers
// that say nothing reached sandboxd (router cache lag, 503, 429) are retried with
// back-off within ctx, except the router's 503 after its start hold (heldNotReady): the
// router already waited for the Sandbox to start, and each attempt would be held as long
// again, so it is returned at once as an error that matches ErrNotReady (routerError). A
// router's 401 is sent again at once, once, when the token file holds a new token.
// Without a context deadline the default limit of cl.limit applies (limit.go), to the
// attempts and back-offs together; a 2xx answer's body carries it on. The body is under
// the idle bound as well (streamidle.go), whatever the context.
func (c *conn) do(ctx context.Context, t target, cl call) (resp *http.Response, err error) {
	l := newLimiter(ctx, c.timeout, cl.limit, cl.runTimeout)
	if l != nil {
		ctx = l.ctx
		defer func() { resp, err = l.finish(resp, err) }()
	}
	var ib *idleBound
	if ib, ctx = newIdleBound(ctx, cl.op, c.streamIdle); ib != nil {
		defer func() { resp, err = ib.answer(resp, err) }() // before finish: the limit wraps the bound
	}
	delay := retryDelay
	renewed := false
	for attempt := 1; ; attempt++ {
		var body io.Reader
		emptyPut := cl.stream == nil && cl.body != nil && len(cl.body) == 0 && cl.method == http.MethodPut
		chunked := cl.stream == nil && cl.body != nil && (emptyPut || chunkedBody(cl.method, cl.path))
		switch {
		case cl.stream != nil:
			body = cl.stream
		case chunked:
			// An empty upload goes chunked: sandboxd's streamed-body routes wait forever
			// on "Content-Length: 0" (a server defect; a zero-length chunked body works).
			// Process and code requests go chunked too: through a Go reverse proxy on
			// HTTP/1.1 (the API server's pod proxy behind kubectl proxy or an HTTP/1.1
			// hop) a Content-Length body can get its streamed answer cut, and sandboxd then
			// kills the process (docs/sandboxd.md).
			body = struct{ io.Reader }{bytes.NewReader(cl.body)}
		case cl.body != nil:
			body = bytes.NewReader(cl.body)
		}
		req, err := c.newRequest(ctx, t, cl.method, cl.path, cl.query, body)
		if err != nil {
			return nil, err
		}
		if cl.contentType != "" {
			req.Header.Set("Content-Type", cl.contentType)
		}
		if cl.stream == nil && cl.body != nil && !chunked {
			req.ContentLength = int64(len(cl.body))
		}
		l.watchBody(req)
		resp, err := c.hc.Do(req)
		var herr *HTTPError
		retry := false
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctxErr(ctx)
			}
			err = fmt.Errorf("sandbox: %s: %w: %w", cl.op, ErrUnavailable, err)
			retry = cl.idempotent || isDialError(err)
		} else if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		} else {
			herr = readHTTPError(cl.op, resp)
			err = herr
			retry = retryable(herr, cl.idempotent)
			if !renewed && cl.stream == nil && c.tokenRenewed(herr) {
				renewed = true
				continue
			}
		}
		if cl.mayHaveRun != nil && outcomeUnknown(err) {
			*cl.mayHaveRun = true
		}
		if !retry || cl.stream != nil || attempt >= maxAttempts {
			return nil, c.routerError(t, herr, err)
		}
		select {
		case <-ctx.Done():
			// The context's end, which also carries the last attempt's error.
			return nil, &retryEndedError{ctx: ctxErr(ctx), last: err}
		case <-time.After(delay):
		}
		if delay *= 2; delay > time.Second {
			delay = time.Second
		}
	}
}

// retryEndedError is a retried request whose context ended during the back-off: it
// matches the context's error (errors.Is: context.DeadlineExceeded or context.Canceled)
// and the last attempt's (e.g. a *HTTPError with errors.As, ErrUnavailable).
type retryEndedError struct {
	ctx  error // ctxErr(ctx)
	last error
}

func (e *retryEndedError) Error() string {
	return fmt.Sprintf("%v (gave up retrying: %v)", e.last, e.ctx)
}

func (e *retryEndedError) Unwrap() []error { return []error{e.ctx, e.last} }

// routerError maps the router's answers that have an error of their own in the SDK:
// its 409 for a suspended Sandbox whose idle policy does not resume it on traffic
// ("Sandbox ns/name is suspended and its idle policy does not resume it on traffic
// ...") to a *SuspendedError, as direct and pod-proxy modes report it, and its 503 after
// the start hold (heldNotReady) to an error that matches ErrNotReady and still unwraps
// to the *HTTPError (errors.As; ErrUnavailable matches as well). Other errors are
// returned as they are.
func (c *conn) routerError(t target, herr *HTTPError, err error) error {
	switch {
	case heldNotReady(herr):
		return fmt.Errorf("%w: %w", ErrNotReady, herr)
	case herr == nil || c.mode != ModeRouter || herr.StatusCode != http.StatusConflict || herr.Code != routerCode ||
		!strings.Contains(herr.Message, " is suspended"):
		return err
	}
	return &SuspendedError{Namespace: t.ns, Name: t.name, HasPolicy: true, Err: herr}
}

// heldNotReady: e is the router's 503 for a Sandbox that was starting and did not become
// Ready while the router held the request (its --start-hold, 30 s by default, or the
// shorter hold for a Sandbox not Ready for longer): "Sandbox ns/name is not ready:
// <Ready reason> (waited 30.0s for it)." (docs/router.md). The router already waited, so
// the SDK does not: such an answer is never retried. The router's other 503s (not Ready
// without a hold, --start-hold 0, a cache not synced yet) are retried as before.
func heldNotReady(e *HTTPError) bool {
	return e != nil && e.StatusCode == http.StatusServiceUnavailable && e.Code == routerCode &&
		strings.Contains(e.Message, "(waited ")
}

// notDialed: a pod proxy message that says the API server could not connect to the pod.
func notDialed(msg string) bool {
	for _, s := range []string{"dial tcp", "connection refused", "no route to host"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// neverReached: err proves the request did not reach sandboxd, so a call that must not
// run twice may be sent again: no connection was made, the router refused it before
// forwarding (503, or a 502 from a failed connect), or the pod proxy found no pod (404)
// or could not dial it.
func neverReached(err error) bool {
	var he *HTTPError
	if errors.As(err, &he) {
		switch {
		case he.Code == routerCode:
			return he.StatusCode == http.StatusServiceUnavailable ||
				(he.StatusCode == http.StatusBadGateway && strings.HasPrefix(he.Message, "Could not connect"))
		case he.Code == apiServerCode:
			return he.StatusCode == http.StatusNotFound ||
				(he.StatusCode == http.StatusServiceUnavailable && notDialed(he.Message))
		}
		return false
	}
	return isDialError(err) || errors.Is(err, ErrNotReady)
}

// outcomeUnknown: err leaves open whether the request ran in sandboxd: the connection
// broke after the request was sent, or a proxy failed (502, 503, 504) after it may have
// forwarded it. An answer of sandboxd and what neverReached proves harmless are known.
func outcomeUnknown(err error) bool {
	if neverReached(err) {
		return false
	}
	var he *HTTPError
	if errors.As(err, &he) {
		switch he.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	return errors.Is(err, ErrUnavailable)
}

// sandboxdStatus is the status of an error answer of sandboxd itself in err, or 0 (the
// router's or the API server's answers, transport errors).
func sandboxdStatus(err error) int {
	var he *HTTPError
	if errors.As(err, &he) && he.Code != routerCode && he.Code != apiServerCode {
		return he.StatusCode
	}
	return 0
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Codes given to errors that come from the router ({"detail": ...} bodies) and from the
// API server (Status objects) rather than from sandboxd.
const (
	routerCode    = "ROUTER"
	apiServerCode = "APISERVER"
)

// retryable: the request did not reach sandboxd (or, for idempotent calls, may be
// repeated safely). The API server's pod proxy answers 503 for any failure to reach the
// pod, a connection cut after the request was written included: for a call that must
// not run twice only a failed dial counts, and of other 503s only the router's. The router's 503 after its start hold
// (heldNotReady) is not retried, idempotent or not: the router already waited.
func retryable(e *HTTPError, idempotent bool) bool {
	switch e.StatusCode {
	case http.StatusTooManyRequests:
		return true
	case http.StatusServiceUnavailable:
		if heldNotReady(e) {
			return false
		}
		// Only the router's own 503 and the pod proxy's failed dial prove the request
		// was not forwarded: a 503 of sandboxd or of another proxy in front (an ingress
		// whose upstream reset) proves nothing, and a run must not go twice.
		return idempotent || neverReached(e)
	case http.StatusNotFound:
		return e.Code == routerCode // the router's cache has not seen the Sandbox yet
	case http.StatusBadGateway:
		return idempotent || (e.Code == routerCode && strings.HasPrefix(e.Message, "Could not connect"))
	case http.StatusGatewayTimeout:
		return idempotent
	}
	return false
}

// readHTTPError reads (at most 4 KiB of) an error body and closes it.
func readHTTPError(op string, resp *http.Response) *HTTPError {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	e := &HTTPError{Op: op, StatusCode: resp.StatusCode}
	var j struct {
		Code    json.RawMessage `json:"code"` // a string from sandboxd, a number in a Status
		Message string          `json:"message"`
		Detail  string          `json:"detail"`
		Kind    string          `json:"kind"`
	}
	if json.Unmarshal(b, &j) == nil {
		var code string
		_ = json.Unmarshal(j.Code, &code)
		switch {
		case j.Detail != "":
			e.Code, e.Message = routerCode, j.Detail
		case j.Kind == "Status":
			e.Code, e.Message = apiServerCode, j.Message
		default:
			e.Code, e.Message = code, j.Message
		}
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(b))
		if len(e.Message) > 256 {
			e.Message = e.Message[:256] + "..."
		}
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
	}
	return e
}

// chunkedBody: the requests whose JSON body is sent chunked (see do): starting a process
// (streamed or in the background), a run, a code execution.
func chunkedBody(method, path string) bool {
	return method == http.MethodPost &&
		(path == "/v1/processes" || path == "/v1/processes/run" || path == "/v1/code/execute")
}
