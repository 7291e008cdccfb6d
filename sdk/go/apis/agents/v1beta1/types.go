package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Well-known labels and annotations (see docs/api.md and docs/controller.md).
const (
	// LabelCreatedBy records which client created an object ("go-client" for this SDK).
	LabelCreatedBy = "agents.x-k8s.io/created-by"
	// LabelClaimUID is set on a Sandbox bound to a SandboxClaim: the claim's UID.
	LabelClaimUID = "agents.x-k8s.io/claim-uid"
	// LabelSandboxNameHash selects the Pod of a Sandbox.
	LabelSandboxNameHash = "agents.x-k8s.io/sandbox-name-hash"
	// LabelWarmPoolSandbox marks unclaimed warm-pool members.
	LabelWarmPoolSandbox = "agents.x-k8s.io/warm-pool-sandbox"
	// AnnotationPodName names the Pod of a Sandbox when it differs from the Sandbox name.
	AnnotationPodName = "agents.x-k8s.io/pod-name"
	// AnnotationClientFirstRequestedAt is the client-side request time of a claim
	// (RFC 3339 with nanoseconds, UTC).
	AnnotationClientFirstRequestedAt = "agents.x-k8s.io/client-first-requested-at"
	// AnnotationTraceContext carries W3C trace headers as a JSON object.
	AnnotationTraceContext = "opentelemetry.io/trace-context"
	// AnnotationLastActivity is the router's last-activity time (RFC 3339) of a Sandbox
	// with an idle policy (docs/idle.md).
	AnnotationLastActivity = "agents.x-k8s.io/last-activity"
	// AnnotationIdleSuspendedGeneration is the generation an idle suspend produced;
	// a resume clears it.
	AnnotationIdleSuspendedGeneration = "agents.x-k8s.io/idle-suspended-generation"
)

// Condition types of a Sandbox.
const (
	ConditionReady        = "Ready"
	ConditionSuspended    = "Suspended"
	ConditionFinished     = "Finished"
	ConditionPodScheduled = "PodScheduled"
)

// Reasons of the Sandbox conditions.
const (
	ReasonDependenciesReady    = "DependenciesReady"
	ReasonDependenciesNotReady = "DependenciesNotReady"
	ReasonReconcilerError      = "ReconcilerError"
	ReasonMultiplePods         = "MultiplePods"
	ReasonSandboxSuspended     = "SandboxSuspended"
	ReasonSandboxExpired       = "SandboxExpired"
	ReasonPodSucceeded         = "PodSucceeded"
	ReasonPodFailed            = "PodFailed"
	ReasonNotSuspended         = "NotSuspended"
	ReasonPodTerminated        = "PodTerminated"
	ReasonPodTerminating       = "PodTerminating"
	// ReasonIdleTimeout is the Suspended reason of a Sandbox suspended by its idle policy.
	ReasonIdleTimeout = "IdleTimeout"
)

// ShutdownPolicy says what happens to an expired Sandbox object.
type ShutdownPolicy string

const (
	// ShutdownPolicyDelete deletes the Sandbox on expiry.
	ShutdownPolicyDelete ShutdownPolicy = "Delete"
	// ShutdownPolicyRetain keeps it with Ready=False (SandboxExpired); the default.
	ShutdownPolicyRetain ShutdownPolicy = "Retain"
)

// OperatingMode is the desired state of a Sandbox.
type OperatingMode string

const (
	// OperatingModeRunning runs the Pod; the default.
	OperatingModeRunning OperatingMode = "Running"
	// OperatingModeSuspended deletes the Pod and keeps the volumes and the Service.
	OperatingModeSuspended OperatingMode = "Suspended"
)

// PodMetadata is the metadata copied to the Pod. Keys with the reserved prefixes
// agents.x-k8s.io/ and extensions.agents.x-k8s.io/ are not copied.
type PodMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodTemplate is the Pod the controller creates for a Sandbox.
type PodTemplate struct {
	ObjectMeta PodMetadata    `json:"metadata,omitzero"`
	Spec       corev1.PodSpec `json:"spec"`
}

// EmbeddedObjectMetadata is the metadata of a PersistentVolumeClaim template.
type EmbeddedObjectMetadata struct {
	// Name of the volume; the claim is named <name>-<sandbox name>.
	Name        string            `json:"name,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PersistentVolumeClaimTemplate describes one PersistentVolumeClaim of a Sandbox.
type PersistentVolumeClaimTemplate struct {
	EmbeddedObjectMetadata `json:"metadata,omitzero"`
	Spec                   corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// IdlePolicy suspends a Sandbox after TimeoutSeconds without activity (extension,
// docs/idle.md).
type IdlePolicy struct {
	// TimeoutSeconds of inactivity before the suspend (1..31536000).
	TimeoutSeconds int32 `json:"timeoutSeconds"`
	// ResumeOnTraffic: whether a request resumes the suspended Sandbox; nil means the
	// API default (true).
	ResumeOnTraffic *bool `json:"resumeOnTraffic,omitempty"`
}

// Resumes reports whether traffic may resume a suspended Sandbox under p (nil: no
// policy, false).
func (p *IdlePolicy) Resumes() bool {
	return p != nil && (p.ResumeOnTraffic == nil || *p.ResumeOnTraffic)
}

// SandboxSpec is the desired state of a Sandbox.
type SandboxSpec struct {
	PodTemplate          PodTemplate                     `json:"podTemplate"`
	VolumeClaimTemplates []PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
	// Service: nil keeps an existing Service, true creates one, false deletes it.
	Service        *bool          `json:"service,omitempty"`
	ShutdownTime   *metav1.Time   `json:"shutdownTime,omitempty"`
	ShutdownPolicy ShutdownPolicy `json:"shutdownPolicy,omitempty"`
	OperatingMode  OperatingMode  `json:"operatingMode,omitempty"`
	// IdlePolicy (extension): automatic suspension when idle.
	IdlePolicy *IdlePolicy `json:"idlePolicy,omitempty"`
}

// SandboxStatus is the observed state of a Sandbox, written by the controller.
type SandboxStatus struct {
	Conditions  []metav1.Condition `json:"conditions,omitempty"`
	Service     string             `json:"service,omitempty"`
	ServiceFQDN string             `json:"serviceFQDN,omitempty"`
	Selector    string             `json:"selector,omitempty"`
	PodIPs      []string           `json:"podIPs,omitempty"`
	NodeName    string             `json:"nodeName,omitempty"`
}

// +kubebuilder:object:root=true

// Sandbox is a single, stateful, long-running Pod with a stable identity.
type Sandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SandboxSpec   `json:"spec"`
	Status SandboxStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// SandboxList is a list of Sandboxes.
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sandbox `json:"items"`
}

// PodName is the name of the Sandbox's Pod: the pod-name annotation, else the Sandbox name.
func (s *Sandbox) PodName() string {
	if n := s.Annotations[AnnotationPodName]; n != "" {
		return n
	}
	return s.Name
}

// IsReady reports whether the Ready condition is True.
func (s *Sandbox) IsReady() bool {
	c := FindCondition(s.Status.Conditions, ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue
}

// FindCondition returns the condition of the given type, or nil.
func FindCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}
