package sandbox

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
	extv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/extensions/v1beta1"
	"github.com/agent-sandbox-dev/agent-sandbox/sdk/go/typed"
)

// kobject is an API object with metadata.
type kobject interface {
	runtime.Object
	metav1.Object
}

// kubeResource is the part of typed.Resource the SDK uses (a seam for tests).
type kubeResource[T kobject, L runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions,
		subresources ...string) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

type (
	sandboxAPI  = kubeResource[*agentsv1beta1.Sandbox, *agentsv1beta1.SandboxList]
	claimAPI    = kubeResource[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList]
	templateAPI = kubeResource[*extv1beta1.SandboxTemplate, *extv1beta1.SandboxTemplateList]
)

// kube hands out the per-namespace resource clients.
type kube interface {
	sandboxes(ns string) sandboxAPI
	claims(ns string) claimAPI
	templates(ns string) templateAPI
}

// typedKube adapts typed.Clientset.
type typedKube struct{ cs *typed.Clientset }

func (k typedKube) sandboxes(ns string) sandboxAPI  { return k.cs.Sandboxes(ns) }
func (k typedKube) claims(ns string) claimAPI       { return k.cs.SandboxClaims(ns) }
func (k typedKube) templates(ns string) templateAPI { return k.cs.SandboxTemplates(ns) }
