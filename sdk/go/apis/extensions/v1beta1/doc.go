// Package v1beta1 holds the Go types of the extensions.agents.x-k8s.io/v1beta1 API
// group: SandboxTemplate, SandboxClaim and SandboxWarmPool. The JSON shape matches the
// CustomResourceDefinitions in api/crds/, so these types work with client-go,
// controller-runtime and the typed client in github.com/agent-sandbox-dev/agent-sandbox/sdk/go/typed.
package v1beta1
