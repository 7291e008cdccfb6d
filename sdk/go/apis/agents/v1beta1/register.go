package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the Sandbox kind.
const GroupName = "agents.x-k8s.io"

// Version is the only served version.
const Version = "v1beta1"

// SchemeGroupVersion is the group and version of every type in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// Resource names, as used in REST paths and RBAC rules.
const (
	ResourceSandboxes = "sandboxes"
)

// SandboxesResource is the GroupVersionResource of Sandboxes (for dynamic clients).
var SandboxesResource = SchemeGroupVersion.WithResource(ResourceSandboxes)

var (
	// SchemeBuilder registers the types of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource qualifies a resource name with the group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &Sandbox{}, &SandboxList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
