// Package typed is a small typed client for the four agent-sandbox kinds, built on
// client-go's REST client. It offers the usual verbs (Get, List, Watch, Create, Update,
// UpdateStatus, Patch, Delete) for Sandboxes, SandboxTemplates, SandboxClaims and
// SandboxWarmPools:
//
//	cs, err := typed.NewForConfig(restConfig)
//	sb, err := cs.Sandboxes("default").Get(ctx, "my-sandbox", metav1.GetOptions{})
//
// Programs that already use controller-runtime can instead register the types with
// Scheme (or AddToScheme) and use their own client.
package typed

import (
	"context"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
)

// Scheme holds the four kinds of both API groups.
var Scheme = runtime.NewScheme()

// Codecs serializes the kinds of Scheme.
var Codecs = serializer.NewCodecFactory(Scheme)

var schemeBuilder = runtime.NewSchemeBuilder(agentsv1beta1.AddToScheme, extv1beta1.AddToScheme)

// AddToScheme adds both API groups to a scheme (for controller-runtime clients).
var AddToScheme = schemeBuilder.AddToScheme

func init() {
	if err := AddToScheme(Scheme); err != nil {
		panic(err)
	}
}

// Clientset reaches both API groups through one HTTP client.
type Clientset struct {
	agents rest.Interface
	ext    rest.Interface
}

// NewForConfig builds a Clientset. The config is copied; its group, version, API path and
// serializer are set here. One http.Client (connection pool) serves both groups.
func NewForConfig(c *rest.Config) (*Clientset, error) {
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("typed: http client: %w", err)
	}
	return NewForConfigAndClient(c, hc)
}

// NewForConfigAndClient is NewForConfig with a caller-supplied http.Client.
func NewForConfigAndClient(c *rest.Config, hc *http.Client) (*Clientset, error) {
	agents, err := restClientFor(c, hc, agentsv1beta1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	ext, err := restClientFor(c, hc, extv1beta1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &Clientset{agents: agents, ext: ext}, nil
}

// New builds a Clientset from existing REST clients (tests, custom transports).
func New(agents, ext rest.Interface) *Clientset {
	return &Clientset{agents: agents, ext: ext}
}

func restClientFor(c *rest.Config, hc *http.Client, gv schema.GroupVersion) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(c)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = Codecs.WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = "agent-sandbox-go-sdk"
	}
	rc, err := rest.RESTClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("typed: rest client for %s: %w", gv, err)
	}
	return rc, nil
}

// Sandboxes returns the client of Sandboxes in namespace ns ("" for all namespaces in
// List and Watch).
func (c *Clientset) Sandboxes(ns string) *Resource[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList] {
	return newResource[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList](c.agents, ns,
		agentsv1beta1.ResourceSandboxes, func() *agentsv1beta1.Sandbox { return &agentsv1beta1.Sandbox{} },
		func() *agentsv1beta1.SandboxList { return &agentsv1beta1.SandboxList{} })
}

// SandboxClaims returns the client of SandboxClaims in namespace ns.
func (c *Clientset) SandboxClaims(ns string) *Resource[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList] {
	return newResource[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList](c.ext, ns,
		extv1beta1.ResourceSandboxClaims, func() *extv1beta1.SandboxClaim { return &extv1beta1.SandboxClaim{} },
		func() *extv1beta1.SandboxClaimList { return &extv1beta1.SandboxClaimList{} })
}

// SandboxTemplates returns the client of SandboxTemplates in namespace ns.
func (c *Clientset) SandboxTemplates(ns string) *Resource[*extv1beta1.SandboxTemplate, *extv1beta1.SandboxTemplateList] {
	return newResource[*extv1beta1.SandboxTemplate, *extv1beta1.SandboxTemplateList](c.ext, ns,
		extv1beta1.ResourceSandboxTemplates, func() *extv1beta1.SandboxTemplate { return &extv1beta1.SandboxTemplate{} },
		func() *extv1beta1.SandboxTemplateList { return &extv1beta1.SandboxTemplateList{} })
}

// SandboxWarmPools returns the client of SandboxWarmPools in namespace ns.
func (c *Clientset) SandboxWarmPools(ns string) *Resource[*extv1beta1.SandboxWarmPool, *extv1beta1.SandboxWarmPoolList] {
	return newResource[*extv1beta1.SandboxWarmPool, *extv1beta1.SandboxWarmPoolList](c.ext, ns,
		extv1beta1.ResourceSandboxWarmPools, func() *extv1beta1.SandboxWarmPool { return &extv1beta1.SandboxWarmPool{} },
		func() *extv1beta1.SandboxWarmPoolList { return &extv1beta1.SandboxWarmPoolList{} })
}

// Object is a namespaced API object of one of the four kinds.
type Object interface {
	runtime.Object
	GetName() string
}

// Resource is the typed client of one kind in one namespace.
type Resource[T Object, L runtime.Object] struct {
	client   rest.Interface
	ns       string
	resource string
	newObj   func() T
	newList  func() L
}

func newResource[T Object, L runtime.Object](c rest.Interface, ns, resource string, newObj func() T, newList func() L) *Resource[T, L] {
	return &Resource[T, L]{client: c, ns: ns, resource: resource, newObj: newObj, newList: newList}
}

// Get reads one object.
func (r *Resource[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.newObj()
	err := r.client.Get().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).Name(name).
		VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

// List lists objects.
func (r *Resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newList()
	req := r.client.Get().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).
		VersionedParams(&opts, metav1.ParameterCodec)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	err := req.Do(ctx).Into(out)
	return out, err
}

// Watch starts a watch. The caller must Stop the returned watch.
func (r *Resource[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	req := r.client.Get().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).
		VersionedParams(&opts, metav1.ParameterCodec)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	return req.Watch(ctx)
}

// Create creates obj and returns the stored object.
func (r *Resource[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.newObj()
	err := r.client.Post().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).
		VersionedParams(&opts, metav1.ParameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Update replaces obj (guarded by its resourceVersion when set).
func (r *Resource[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := r.newObj()
	err := r.client.Put().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).Name(obj.GetName()).
		VersionedParams(&opts, metav1.ParameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

// UpdateStatus replaces the status subresource of obj (Sandbox, SandboxClaim,
// SandboxWarmPool).
func (r *Resource[T, L]) UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := r.newObj()
	err := r.client.Put().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).Name(obj.GetName()).
		SubResource("status").VersionedParams(&opts, metav1.ParameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Patch applies a patch of type pt to the object or to one of its subresources.
func (r *Resource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte,
	opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := r.newObj()
	err := r.client.Patch(pt).NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).Name(name).
		SubResource(subresources...).VersionedParams(&opts, metav1.ParameterCodec).Body(data).
		Do(ctx).Into(out)
	return out, err
}

// Delete deletes one object.
func (r *Resource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.client.Delete().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).Name(name).
		Body(&opts).Do(ctx).Error()
}
