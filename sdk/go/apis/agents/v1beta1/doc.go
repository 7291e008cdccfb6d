// Package v1beta1 holds the Go types of the agents.x-k8s.io/v1beta1 API group: the
// Sandbox kind. The JSON shape matches the CustomResourceDefinition in
// api/crds/agents.x-k8s.io_sandboxes.yaml, so these types work with client-go,
// controller-runtime and the typed client in github.com/agent-sandbox-dev/agent-sandbox/sdk/go/typed.
//
// Register the kind in a scheme with AddToScheme:
//
//	scheme := runtime.NewScheme()
//	_ = v1beta1.AddToScheme(scheme)
package v1beta1
