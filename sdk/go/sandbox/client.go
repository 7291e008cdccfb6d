package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
	"github.com/agent-sandbox-dev/agent-sandbox/sdk/go/typed"
)

// CreatedBy is the value of the agents.x-k8s.io/created-by label on objects this SDK
// creates.
const CreatedBy = "go-client"

// Defaults.
const (
	DefaultReadyTimeout   = 180 * time.Second
	DefaultCleanupTimeout = 30 * time.Second
	DefaultMaxReadSize    = 256 << 20
)

// Options configure a Client. The zero value works with the kubeconfig of the
// environment and the API server's pod proxy.
type Options struct {
	// RestConfig reaches the API server. Nil: $KUBECONFIG or ~/.kube/config, else the
	// in-cluster config. A config without a rate limit (QPS 0) gets QPS 100, burst 200.
	RestConfig *rest.Config
	// Namespace of the sandboxes. Empty: the kubeconfig context's namespace, else
	// "default".
	Namespace string
	// Connection configures the data plane (processes and files).
	Connection Connection
	// DefaultTimeout is the default time limit of a call whose context has no deadline
	// (a context with a deadline is left alone: the caller's deadline wins, shorter or
	// longer). 0 means DefaultRequestTimeout (180 s); NoTimeout (or any negative value)
	// means none: calls are then bounded by their contexts only. It applies to each
	// request with its retries, by kind of call:
	//   - an API request (get, list, create, patch, delete) and a data-plane request
	//     with a short answer (stat, list, mkdir, a signal, stdin, StartBackground, ...):
	//     the whole request, within DefaultTimeout;
	//   - a call with a time of its own: Exec and Run (Cmd.Timeout, else sandboxd's
	//     DefaultRunTimeout of 300 s), RunCode (CodeOptions.Timeout, likewise) and each
	//     held request of BackgroundProcess.Wait (at most 25 s): that time plus
	//     DefaultTimeout, so the call's own timeout is never cut short;
	//   - a stream (Start, Files.Read, Files.Write and Create, Files.Watch,
	//     BackgroundProcess.Output, Sandbox.HTTPClient's requests): DefaultTimeout until
	//     the answer's head arrives (connecting, the body the peer does not take, the
	//     answer after it; not the time the caller's reader takes), then nothing: the
	//     stream lasts as long as its context (its silences bounded by
	//     StreamIdleTimeout);
	//   - Files.ReadFile, WriteFile, ReadRange and WriteMany: as a stream, and after the
	//     head DefaultTimeout without a byte of progress (a large file is not cut, a
	//     stalled one is).
	// Waits for Ready or Suspended are bounded by ReadyTimeout instead, whatever this
	// says. A call the limit ended returns an error that matches
	// context.DeadlineExceeded (errors.Is).
	DefaultTimeout time.Duration
	// StreamIdleTimeout bounds the silence of an answer of sandboxd once its head has
	// come: a read of its body (a process's output for Start, a watch's events, a file
	// for Files.Read, a background output follow, a run's or a code execution's answer)
	// that waits this long for a byte fails with a *StreamIdleError (it matches
	// context.DeadlineExceeded and ErrUnavailable) and closes the connection, so a
	// connection that died without a word (a half-open TCP connection: a node lost, a
	// partition) does not hold the stream for ever. It applies whatever the context's
	// deadline. sandboxd sends a keepalive after 15 s of silence on every stream (its
	// --process-keepalive and --code-keepalive; an empty line on a quiet watch), so a
	// silent process is not cut. Only the time spent waiting in a read counts: a reader
	// may take as long as it likes between reads. 0 means DefaultStreamIdleTimeout
	// (300 s, as the Python SDK); NoTimeout (or any negative value) means none. Keep it
	// well above sandboxd's keepalive interval. Sandbox.HTTPClient's answers (the port's
	// own server, which may be silent for as long as it likes) are bounded by
	// HTTPClientStreamIdleTimeout instead.
	StreamIdleTimeout time.Duration
	// HTTPClientStreamIdleTimeout is StreamIdleTimeout for the answers of
	// Sandbox.HTTPClient's requests (an upgraded connection, 101, is never bounded). 0
	// (the default) or a negative value means none: a server in the sandbox may
	// legitimately be silent for long (a long poll, events without heartbeats); set it
	// for servers known to send something more often.
	HTTPClientStreamIdleTimeout time.Duration
	// ReadyTimeout bounds a wait for Ready when the context has no deadline
	// (default 180 s).
	ReadyTimeout time.Duration
	// CleanupTimeout bounds the deletion of a claim or Sandbox whose creation failed
	// (default 30 s). It runs on a context detached from the caller's cancellation.
	CleanupTimeout time.Duration
	// MaxReadSize caps Files.ReadFile (default 256 MiB).
	MaxReadSize int64
	// WaitForClaimReady makes CreateSandbox wait for the claim's own Ready. By default
	// it returns as soon as a Sandbox bound to the claim (labelled with its UID and
	// controlled by it) is Ready, one API write sooner (the early hand-out; claims with
	// env always wait for the claim: the env is delivered after the binding).
	WaitForClaimReady bool

	kube kube // tests
}

// Client creates, finds and deletes sandboxes. It is safe for concurrent use.
type Client struct {
	kube           kube
	ns             string
	conn           *conn
	readyTimeout   time.Duration
	cleanupTimeout time.Duration
	maxRead        int64
	waitClaimReady bool
	// claimFirst: the last hand-out wait ended by the claim's Ready, not by a hand-out (a
	// controller that does not label what it binds): watch the next claim at once.
	claimFirst atomic.Bool
	// handout: the hand-out streams shared by the client's claim waits (handout_hub.go).
	handout handoutHub
}

// NewClient builds a Client.
func NewClient(opts Options) (*Client, error) {
	rc := opts.RestConfig
	ns := opts.Namespace
	if rc == nil && opts.kube == nil {
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{})
		var err error
		if rc, err = cc.ClientConfig(); err != nil {
			return nil, fmt.Errorf("sandbox: no Kubernetes configuration: %w", err)
		}
		if ns == "" {
			ns, _, _ = cc.Namespace()
		}
	}
	if ns == "" {
		ns = "default"
	}
	if rc != nil {
		rc = rest.CopyConfig(rc)
		if rc.QPS == 0 && rc.RateLimiter == nil {
			rc.QPS, rc.Burst = 100, 200
		}
	}
	limit := opts.DefaultTimeout
	if limit == 0 {
		limit = DefaultRequestTimeout
	}
	k := opts.kube
	if k == nil {
		cs, err := typed.NewForConfig(rc)
		if err != nil {
			return nil, err
		}
		k = typedKube{cs}
	}
	if limit > 0 {
		k = limitedKube{k: k, d: limit}
	}
	cn, err := newConn(opts.Connection, rc)
	if err != nil {
		return nil, err
	}
	cn.timeout = max(limit, 0)
	cn.streamIdle = opts.StreamIdleTimeout
	if cn.streamIdle == 0 {
		cn.streamIdle = DefaultStreamIdleTimeout
	}
	cn.streamIdle = max(cn.streamIdle, 0)
	cn.portIdle = max(opts.HTTPClientStreamIdleTimeout, 0)
	c := &Client{kube: k, ns: ns, conn: cn, readyTimeout: opts.ReadyTimeout,
		cleanupTimeout: opts.CleanupTimeout, maxRead: opts.MaxReadSize, waitClaimReady: opts.WaitForClaimReady}
	if c.readyTimeout <= 0 {
		c.readyTimeout = DefaultReadyTimeout
	}
	if c.cleanupTimeout <= 0 {
		c.cleanupTimeout = DefaultCleanupTimeout
	}
	if c.maxRead <= 0 {
		c.maxRead = DefaultMaxReadSize
	}
	return c, nil
}

// CloseIdleConnections closes the idle data-plane connections (the Kubernetes client's
// pool is client-go's, and so is the data plane's in pod-proxy mode when the REST config
// needs TLS, a dialer or a proxy: those are left alone) and stops the hand-out streams
// no claim waits on (they stop by themselves after 30 s without one; their goroutines
// end shortly after this returns). A Client needs no other clean-up.
func (c *Client) CloseIdleConnections() {
	c.conn.closeIdle()
	c.handout.stopIdle()
}

// Close stops the client's background work and returns once it has ended: the hand-out
// streams (those claim waits still use too: the waits go on by watching their claims)
// and their goroutines, then the idle connections as CloseIdleConnections. For programs
// and tests that check no goroutine outlives its owner. The Client stays usable (a later
// CreateSandbox starts a stream again); Close never fails, and the error is for io.Closer.
func (c *Client) Close() error {
	c.handout.close()
	c.conn.closeIdle()
	return nil
}

// Namespace is the client's namespace.
func (c *Client) Namespace() string { return c.ns }

// Mode is the client's connection mode.
func (c *Client) Mode() Mode { return c.conn.mode }

// withReadyTimeout applies ReadyTimeout when ctx has no deadline.
func (c *Client) withReadyTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.readyTimeout)
}

// cleanupCtx survives the caller's cancellation (so a failed create does not leak).
func (c *Client) cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.cleanupTimeout)
}

// ---- create options ------------------------------------------------------------------

// CreateOption customizes CreateSandbox, CreateSandboxFromTemplate and
// CreateSandboxFromSpec.
type CreateOption func(*createOptions)

type createOptions struct {
	name           string
	labels         map[string]string
	annotations    map[string]string
	podLabels      map[string]string
	podAnnotations map[string]string
	env            []extv1beta1.EnvVar
	idle           *agentsv1beta1.IdlePolicy
	shutdownAfter  time.Duration
	noWait         bool
	keepOnFailure  bool
}

// WithName gives the claim (or Sandbox) an exact name instead of one the SDK chooses
// ("sandbox-claim-" or "sandbox-" and 8 random hex digits).
func WithName(name string) CreateOption { return func(o *createOptions) { o.name = name } }

// WithLabels adds labels to the claim (or Sandbox).
func WithLabels(l map[string]string) CreateOption {
	return func(o *createOptions) { o.labels = mergeMap(o.labels, l) }
}

// WithAnnotations adds annotations to the claim (or Sandbox).
func WithAnnotations(a map[string]string) CreateOption {
	return func(o *createOptions) { o.annotations = mergeMap(o.annotations, a) }
}

// WithPodMetadata adds labels and annotations to the sandbox's Pod (a claim's
// additionalPodMetadata; the controller validates the keys).
func WithPodMetadata(labels, annotations map[string]string) CreateOption {
	return func(o *createOptions) {
		o.podLabels = mergeMap(o.podLabels, labels)
		o.podAnnotations = mergeMap(o.podAnnotations, annotations)
	}
}

// WithEnv sets environment variables of the sandbox's first container (a claim's
// spec.env forces a cold start and needs the template's envVarsInjectionPolicy). They
// are set in the order of their names (as WithEnvFrom's): a value's $(VAR) reference is
// expanded by Kubernetes only from variables set before it.
func WithEnv(env map[string]string) CreateOption {
	return func(o *createOptions) {
		for _, k := range sortedKeys(env) {
			o.env = append(o.env, extv1beta1.EnvVar{Name: k, Value: env[k]})
		}
	}
}

// sortedKeys is m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// EnvSource is an environment variable value read from a key of a Secret or a
// ConfigMap in the sandbox's namespace (see WithEnvFrom).
type EnvSource struct {
	secret bool
	name   string
	key    string
}

// EnvFromSecret reads the value from key of the Secret name.
func EnvFromSecret(name, key string) EnvSource { return EnvSource{secret: true, name: name, key: key} }

// EnvFromConfigMap reads the value from key of the ConfigMap name.
func EnvFromConfigMap(name, key string) EnvSource { return EnvSource{name: name, key: key} }

func (e EnvSource) claimSource() *extv1beta1.EnvVarSource {
	ref := &extv1beta1.KeySelector{Name: e.name, Key: e.key}
	if e.secret {
		return &extv1beta1.EnvVarSource{SecretKeyRef: ref}
	}
	return &extv1beta1.EnvVarSource{ConfigMapKeyRef: ref}
}

func (e EnvSource) podSource() *corev1.EnvVarSource {
	ref := corev1.LocalObjectReference{Name: e.name}
	if e.secret {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref, Key: e.key}}
	}
	return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref, Key: e.key}}
}

// WithEnvFrom sets environment variables whose values come from Secret or ConfigMap
// keys (EnvFromSecret, EnvFromConfigMap). For a claim they become spec.env valueFrom
// entries: a template with claimConfigDelivery.mode LateBound serves them warm and the
// values never enter an object (docs/late-binding.md); otherwise they force a cold
// start. For a Sandbox created from a spec or template they become the first
// container's env valueFrom.
func WithEnvFrom(env map[string]EnvSource) CreateOption {
	return func(o *createOptions) {
		for _, k := range sortedKeys(env) {
			o.env = append(o.env, extv1beta1.EnvVar{Name: k, ValueFrom: env[k].claimSource()})
		}
	}
}

// WithIdlePolicy gives a Sandbox created by CreateSandboxFromSpec or
// CreateSandboxFromTemplate an idle policy: it is suspended after timeout without
// activity (whole seconds, at least 1 s) and, with resumeOnTraffic, resumed by the next
// request (docs/idle.md). Claims take the policy of their template; CreateSandbox
// rejects this option.
func WithIdlePolicy(timeout time.Duration, resumeOnTraffic bool) CreateOption {
	return func(o *createOptions) {
		secs := int32((timeout + time.Second - 1) / time.Second)
		if timeout > 365*24*time.Hour {
			secs = 0 // out of range: rejected when creating
		}
		o.idle = &agentsv1beta1.IdlePolicy{TimeoutSeconds: secs, ResumeOnTraffic: &resumeOnTraffic}
	}
}

// WithShutdownAfter makes the claim (or Sandbox) expire and be deleted after d,
// measured on the client's clock.
func WithShutdownAfter(d time.Duration) CreateOption {
	return func(o *createOptions) { o.shutdownAfter = d }
}

// WithoutWait returns as soon as the object is created; call Sandbox.WaitReady later.
// For a claim, the handle is usable once WaitReady returns.
func WithoutWait() CreateOption { return func(o *createOptions) { o.noWait = true } }

// WithKeepOnFailure keeps the claim (or Sandbox) when waiting for Ready fails; by
// default it is deleted.
func WithKeepOnFailure() CreateOption { return func(o *createOptions) { o.keepOnFailure = true } }

func mergeMap(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

// meta is the object's metadata; without WithName the name is left for createNamed.
func (o *createOptions) meta() metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: o.name, Labels: mergeMap(nil, o.labels), Annotations: mergeMap(nil, o.annotations)}
	m.Labels = mergeMap(m.Labels, map[string]string{agentsv1beta1.LabelCreatedBy: CreatedBy})
	return m
}

// nameSuffix is the random part of a name the SDK chooses: 8 hex digits, as the Python
// SDK's (a variable for tests).
var nameSuffix = func() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// nameAttempts bounds the names tried when a chosen name is taken (AlreadyExists).
const nameAttempts = 3

// createNamed creates obj under its name (WithName) or under prefix + a random suffix
// chosen here, not by the server's generateName: when the create's answer is lost (a
// deadline or a cut connection after the server stored it) the object is known by name
// and deleted (del) before the error is returned, so a claim does not hold a warm
// Sandbox nobody knows of. A name the caller gave is never deleted (it may be someone
// else's object). A chosen name that is taken is replaced by another.
func createNamed[T kobject, L runtime.Object](ctx context.Context, c *Client, api kubeResource[T, L], obj T,
	prefix string, del func(context.Context, string) error) (T, error) {
	chosen := obj.GetName() == ""
	for attempt := 1; ; attempt++ {
		if chosen {
			obj.SetName(prefix + nameSuffix())
		}
		if err := ctx.Err(); err != nil {
			var zero T
			return zero, err // nothing sent
		}
		created, err := api.Create(ctx, obj, metav1.CreateOptions{})
		if err == nil {
			return created, nil
		}
		if chosen && apierrors.IsAlreadyExists(err) && attempt < nameAttempts {
			continue
		}
		err = kubeErr(err)
		if chosen && createMayHaveRun(err) {
			cctx, cancel := c.cleanupCtx(ctx)
			if derr := cleanupLost(cctx, api, obj.GetName(), del); derr != nil {
				err = errors.Join(err, fmt.Errorf("sandbox: cleanup of %s after a create without an answer: %w",
					obj.GetName(), derr))
			}
			cancel()
		}
		var zero T
		return zero, err
	}
}

// lostCreateLooks are the waits, one after the other, before each look by name for a
// create without an answer that lands after its cleanup's DELETE (the create was still
// in the API server, so the DELETE found nothing); a variable for tests.
var lostCreateLooks = []time.Duration{250 * time.Millisecond, 750 * time.Millisecond, 2 * time.Second}

// cleanupLost deletes name (del), the object a create without an answer may have stored
// under a name the SDK chose, then looks for it again by name after each of
// lostCreateLooks (within ctx) and deletes it if it appeared meanwhile: otherwise a create
// that lands late would leave a claim holding a warm Sandbox nobody knows of.
func cleanupLost[T kobject, L runtime.Object](ctx context.Context, api kubeResource[T, L], name string,
	del func(context.Context, string) error) error {
	if err := del(ctx, name); err != nil {
		return err
	}
	for _, d := range lostCreateLooks {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil // the cleanup's time is up; the delete itself was done
		case <-t.C:
		}
		if _, err := api.Get(ctx, name, metav1.GetOptions{}); err == nil {
			return del(ctx, name)
		}
	}
	return nil
}

// createMayHaveRun: a create failed without an answer that proves nothing was stored (no
// answer at all, a deadline, a cut connection, a 5xx), and not before it was sent (a
// failed dial, client-go's rate limiter refusing to wait for a token).
func createMayHaveRun(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Code >= http.StatusInternalServerError
	}
	return !isDialError(err) && !rateLimited(err)
}

// ---- create ---------------------------------------------------------------------------

// CreateSandbox claims a sandbox from the warm pool warmPool: it creates a SandboxClaim
// (named "sandbox-claim-" and 8 random hex digits chosen by the SDK, label
// agents.x-k8s.io/created-by=go-client, annotation
// agents.x-k8s.io/client-first-requested-at) and waits by watch until the claim is bound
// and Ready, or sooner until a Sandbox bound to it is Ready (see
// Options.WaitForClaimReady). On failure the claim is deleted (see WithKeepOnFailure):
// the claim created, by a precondition on its UID (another client's claim made again
// under the name is left alone), or by name when the create's answer was lost (a claim
// under a name the SDK chose).
func (c *Client) CreateSandbox(ctx context.Context, warmPool string, opts ...CreateOption) (*Sandbox, error) {
	if warmPool == "" {
		return nil, fmt.Errorf("%w: empty warm pool name", ErrInvalidArgument)
	}
	var o createOptions
	for _, f := range opts {
		f(&o)
	}
	if o.idle != nil {
		return nil, fmt.Errorf("%w: WithIdlePolicy: a claim takes the idle policy of its template", ErrInvalidArgument)
	}
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: o.meta(),
		Spec: extv1beta1.SandboxClaimSpec{
			WarmPoolRef: extv1beta1.LocalObjectReference{Name: warmPool},
			Env:         o.env,
		},
	}
	claim.Annotations = mergeMap(claim.Annotations, map[string]string{
		agentsv1beta1.AnnotationClientFirstRequestedAt: time.Now().UTC().Format(time.RFC3339Nano)})
	if len(o.podLabels)+len(o.podAnnotations) > 0 {
		claim.Spec.AdditionalPodMetadata = &agentsv1beta1.PodMetadata{Labels: o.podLabels, Annotations: o.podAnnotations}
	}
	if o.shutdownAfter > 0 {
		t := metav1.NewTime(time.Now().Add(o.shutdownAfter).UTC().Truncate(time.Second))
		claim.Spec.Lifecycle = &extv1beta1.Lifecycle{ShutdownTime: &t, ShutdownPolicy: extv1beta1.ClaimShutdownDelete}
	}
	created, err := createNamed(ctx, c, c.kube.claims(c.ns), claim, "sandbox-claim-", c.deleteClaim)
	if err != nil {
		return nil, fmt.Errorf("sandbox: create claim %s from pool %s/%s: %w", claim.Name, c.ns, warmPool, err)
	}
	sb := &Sandbox{c: c, ns: c.ns, claim: created.Name, claimUID: created.UID}
	if o.noWait {
		return sb, nil
	}
	if err := sb.waitClaim(ctx, created, true); err != nil {
		return nil, c.rollback(ctx, o, err, func(cctx context.Context) error {
			return c.deleteClaimUID(cctx, created.Name, created.UID)
		})
	}
	return sb, nil
}

// CreateSandboxFromTemplate creates a Sandbox directly from the SandboxTemplate named
// template (its podTemplate, volumeClaimTemplates and service; the Pod gets
// automountServiceAccountToken: false unless the template sets it) and waits until it
// is Ready. No warm pool is involved: this is a cold start.
//
// Such a Sandbox is not selected by the template's managed NetworkPolicy: the policy
// selects Pods by the template-ref-hash label, which the controller puts only on the
// Pods of Sandboxes a warm pool or a claim controls. Use a claim (CreateSandbox from a
// warm pool of the template) when that policy matters.
func (c *Client) CreateSandboxFromTemplate(ctx context.Context, template string, opts ...CreateOption) (*Sandbox, error) {
	t, err := c.kube.templates(c.ns).Get(ctx, template, metav1.GetOptions{})
	if err != nil {
		err = kubeErr(err)
		if errors.Is(err, ErrNotFound) {
			err = fmt.Errorf("%w: %w", ErrTemplateNotFound, err)
		}
		return nil, fmt.Errorf("sandbox: template %s/%s: %w", c.ns, template, err)
	}
	spec := agentsv1beta1.SandboxSpec{
		PodTemplate:          *t.Spec.PodTemplate.DeepCopy(),
		VolumeClaimTemplates: agentsv1beta1.CopyVolumeClaimTemplates(t.Spec.VolumeClaimTemplates),
	}
	if t.Spec.Service != nil {
		v := *t.Spec.Service
		spec.Service = &v
	}
	spec.IdlePolicy = t.Spec.IdlePolicy.DeepCopy()
	if spec.PodTemplate.Spec.AutomountServiceAccountToken == nil {
		f := false
		spec.PodTemplate.Spec.AutomountServiceAccountToken = &f
	}
	return c.CreateSandboxFromSpec(ctx, spec, opts...)
}

// CreateSandboxFromSpec creates a Sandbox with the given spec (named "sandbox-" and 8
// random hex digits unless WithName, label agents.x-k8s.io/created-by=go-client) and
// waits until it is Ready. WithEnv sets the variables in the first container;
// WithPodMetadata merges into the pod template's metadata. On failure the Sandbox is
// deleted (see WithKeepOnFailure), also when the create's answer was lost (under a name
// the SDK chose).
func (c *Client) CreateSandboxFromSpec(ctx context.Context, spec agentsv1beta1.SandboxSpec, opts ...CreateOption) (*Sandbox, error) {
	var o createOptions
	for _, f := range opts {
		f(&o)
	}
	sb := &agentsv1beta1.Sandbox{ObjectMeta: o.meta(), Spec: *spec.DeepCopy()}
	pt := &sb.Spec.PodTemplate
	pt.ObjectMeta.Labels = mergeMap(pt.ObjectMeta.Labels, o.podLabels)
	pt.ObjectMeta.Annotations = mergeMap(pt.ObjectMeta.Annotations, o.podAnnotations)
	if len(o.env) > 0 {
		if len(pt.Spec.Containers) == 0 {
			return nil, fmt.Errorf("%w: WithEnv needs a container in the pod template", ErrInvalidArgument)
		}
		for _, e := range o.env {
			pt.Spec.Containers[0].Env = append(pt.Spec.Containers[0].Env, podEnv(e))
		}
	}
	if o.idle != nil {
		if o.idle.TimeoutSeconds < 1 {
			return nil, fmt.Errorf("%w: WithIdlePolicy: timeout must be 1 s .. 1 year", ErrInvalidArgument)
		}
		sb.Spec.IdlePolicy = o.idle.DeepCopy()
	}
	if o.shutdownAfter > 0 {
		t := metav1.NewTime(time.Now().Add(o.shutdownAfter).UTC().Truncate(time.Second))
		sb.Spec.ShutdownTime = &t
		sb.Spec.ShutdownPolicy = agentsv1beta1.ShutdownPolicyDelete
	}
	created, err := createNamed(ctx, c, c.kube.sandboxes(c.ns), sb, "sandbox-", c.deleteSandbox)
	if err != nil {
		return nil, fmt.Errorf("sandbox: create sandbox %s in %s: %w", sb.Name, c.ns, err)
	}
	h := &Sandbox{c: c, ns: c.ns, name: created.Name, obj: created}
	if o.noWait {
		return h, nil
	}
	if err := h.waitSandbox(ctx, created, true, 0); err != nil {
		return nil, c.rollback(ctx, o, err, func(cctx context.Context) error {
			return c.deleteSandboxUID(cctx, created.Name, created.UID)
		})
	}
	return h, nil
}

// podEnv converts a claim env entry to a container env entry.
func podEnv(e extv1beta1.EnvVar) corev1.EnvVar {
	out := corev1.EnvVar{Name: e.Name, Value: e.Value}
	if e.ValueFrom != nil {
		src := EnvSource{secret: e.ValueFrom.SecretKeyRef != nil}
		ref := e.ValueFrom.SecretKeyRef
		if ref == nil {
			ref = e.ValueFrom.ConfigMapKeyRef
		}
		if ref != nil {
			src.name, src.key = ref.Name, ref.Key
			out.ValueFrom = src.podSource()
		}
	}
	return out
}

// rollback deletes what a failed create left behind, unless asked to keep it.
func (c *Client) rollback(ctx context.Context, o createOptions, err error, del func(context.Context) error) error {
	if o.keepOnFailure {
		return err
	}
	cctx, cancel := c.cleanupCtx(ctx)
	defer cancel()
	if derr := del(cctx); derr != nil {
		return errors.Join(err, fmt.Errorf("sandbox: cleanup after failed create: %w", derr))
	}
	return err
}

// ---- find -----------------------------------------------------------------------------

// Attach returns a handle to the existing Sandbox name (for example one created by
// another process). It does not wait; see Sandbox.WaitReady. A name that is not a valid
// object name is ErrInvalidArgument.
func (c *Client) Attach(ctx context.Context, name string) (*Sandbox, error) {
	if err := validName("sandbox", name); err != nil {
		return nil, err
	}
	obj, err := c.kube.sandboxes(c.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("sandbox: get %s/%s: %w", c.ns, name, kubeErr(err))
	}
	claim, claimUID := controllingClaim(obj)
	return &Sandbox{c: c, ns: c.ns, name: name, claim: claim, claimUID: claimUID, obj: obj}, nil
}

// AttachClaim returns a handle to the sandbox bound to the existing claim, waiting (by
// watch) until the claim is bound and Ready. A claim bound to a suspended Sandbox
// (Ready=False, reason SandboxSuspended), whoever suspended it (Sandbox.Suspend, another
// client's patch of spec.operatingMode, or its idle policy), is returned at once, not
// resumed. The handle's first data-plane call then resumes it when the Sandbox has an
// idle policy that resumes on traffic (resumeOnTraffic true or unset; in router mode
// the router does), a manual suspend included; with resumeOnTraffic false it fails with
// a *SuspendedError (ErrSuspended; in router mode the router's 409); without an idle
// policy it fails with a *SuspendedError in direct and pod-proxy modes and with the
// router's 503 (ErrUnavailable) in router mode. Sandbox.Resume resumes it in every case.
// A name that is not a valid object name is ErrInvalidArgument (no request is made); a
// claim that does not exist is ErrNotFound (not ErrSandboxDeleted: no version of it was
// seen).
func (c *Client) AttachClaim(ctx context.Context, claim string) (*Sandbox, error) {
	if err := validName("claim", claim); err != nil {
		return nil, err
	}
	sb := &Sandbox{c: c, ns: c.ns, claim: claim}
	ctx, cancel := c.withReadyTimeout(ctx)
	defer cancel()
	if err := sb.waitClaimIn(ctx, nil, false, true); err != nil {
		return nil, err
	}
	return sb, nil
}

// validName checks an object name as the API server would (a DNS-1123 subdomain).
func validName(what, name string) error {
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Errorf("%w: %s name %q: %s", ErrInvalidArgument, what, name, strings.Join(msgs, "; "))
	}
	return nil
}

// controllingClaim is the name and UID of the claim that controls s ("" when none does).
func controllingClaim(s *agentsv1beta1.Sandbox) (string, types.UID) {
	for _, r := range s.OwnerReferences {
		if r.Controller != nil && *r.Controller && r.Kind == "SandboxClaim" {
			return r.Name, r.UID
		}
	}
	return "", ""
}

// ListOptions select sandboxes or claims.
type ListOptions struct {
	// LabelSelector, e.g. "team=a".
	LabelSelector string
	// OnlyMine keeps only objects labelled agents.x-k8s.io/created-by=go-client.
	OnlyMine bool
}

func (o ListOptions) selector() string {
	s := o.LabelSelector
	if o.OnlyMine {
		if s != "" {
			s += ","
		}
		s += agentsv1beta1.LabelCreatedBy + "=" + CreatedBy
	}
	return s
}

// ListSandboxes lists the Sandboxes of the namespace.
func (c *Client) ListSandboxes(ctx context.Context, opts ListOptions) ([]agentsv1beta1.Sandbox, error) {
	l, err := c.kube.sandboxes(c.ns).List(ctx, metav1.ListOptions{LabelSelector: opts.selector()})
	if err != nil {
		return nil, fmt.Errorf("sandbox: list sandboxes in %s: %w", c.ns, kubeErr(err))
	}
	return l.Items, nil
}

// ListClaims lists the SandboxClaims of the namespace.
func (c *Client) ListClaims(ctx context.Context, opts ListOptions) ([]extv1beta1.SandboxClaim, error) {
	l, err := c.kube.claims(c.ns).List(ctx, metav1.ListOptions{LabelSelector: opts.selector()})
	if err != nil {
		return nil, fmt.Errorf("sandbox: list claims in %s: %w", c.ns, kubeErr(err))
	}
	return l.Items, nil
}

// DeleteClaim deletes a claim (its Sandbox goes with it). A missing claim is not an
// error.
func (c *Client) DeleteClaim(ctx context.Context, name string) error { return c.deleteClaim(ctx, name) }

// DeleteSandbox deletes a Sandbox. A missing Sandbox is not an error.
func (c *Client) DeleteSandbox(ctx context.Context, name string) error {
	return c.deleteSandbox(ctx, name)
}

func (c *Client) deleteClaim(ctx context.Context, name string) error {
	return c.deleteClaimUID(ctx, name, "")
}

func (c *Client) deleteSandbox(ctx context.Context, name string) error {
	return c.deleteSandboxUID(ctx, name, "")
}

// deleteClaimUID deletes the claim name; with a uid only while the name still holds that
// claim (a precondition), so another client's claim made again under the name is left
// alone. A claim that is gone (404, or 409 for the precondition: the name holds another
// object now) is not an error.
func (c *Client) deleteClaimUID(ctx context.Context, name string, uid types.UID) error {
	err := c.kube.claims(c.ns).Delete(ctx, name, deleteOptions(uid))
	if err != nil && !goneAlready(err, uid) {
		return fmt.Errorf("sandbox: delete claim %s/%s: %w", c.ns, name, kubeErr(err))
	}
	return nil
}

// deleteSandboxUID is deleteClaimUID for a Sandbox.
func (c *Client) deleteSandboxUID(ctx context.Context, name string, uid types.UID) error {
	err := c.kube.sandboxes(c.ns).Delete(ctx, name, deleteOptions(uid))
	if err != nil && !goneAlready(err, uid) {
		return fmt.Errorf("sandbox: delete sandbox %s/%s: %w", c.ns, name, kubeErr(err))
	}
	return nil
}

// deleteOptions: background propagation; with a uid, the precondition that the object
// deleted is that one ("": by name only, when the UID is not known).
func deleteOptions(uid types.UID) metav1.DeleteOptions {
	bg := metav1.DeletePropagationBackground
	o := metav1.DeleteOptions{PropagationPolicy: &bg}
	if uid != "" {
		o.Preconditions = metav1.NewUIDPreconditions(string(uid))
	}
	return o
}

// goneAlready: a delete failed because the object is gone: 404, or (with a UID
// precondition) 409 Conflict, the precondition failed: the name holds another object.
func goneAlready(err error, uid types.UID) bool {
	return apierrors.IsNotFound(err) || (uid != "" && apierrors.IsConflict(err))
}

// kubeErr adds the sentinel meaning to an API error (errors.Is works for both).
func kubeErr(err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return &kubeError{err, ErrNotFound}
	case apierrors.IsForbidden(err):
		return &kubeError{err, ErrForbidden}
	case apierrors.IsUnauthorized(err):
		return &kubeError{err, ErrUnauthorized}
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return &kubeError{err, ErrConflict}
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return &kubeError{err, ErrInvalidArgument}
	case apierrors.IsServiceUnavailable(err), apierrors.IsTooManyRequests(err),
		apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return &kubeError{err, ErrUnavailable}
	case apierrors.IsRequestEntityTooLargeError(err):
		return &kubeError{err, ErrTooLarge}
	}
	return err
}

// kubeError is an API server error that also matches a sentinel.
type kubeError struct {
	err      error
	sentinel error
}

func (e *kubeError) Error() string        { return e.err.Error() }
func (e *kubeError) Unwrap() []error      { return []error{e.err, e.sentinel} }
func (e *kubeError) Is(target error) bool { return target == e.sentinel }
