package v1beta1

import (
	"encoding/json"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
)

// Condition types of a SandboxClaim.
const (
	ConditionReady    = "Ready"
	ConditionFinished = "Finished"
)

// Reasons of the SandboxClaim Ready condition. The Sandbox reasons are copied through
// when a Sandbox is bound.
const (
	ReasonTemplateNotFound          = "TemplateNotFound"
	ReasonWarmPoolNotFound          = "WarmPoolNotFound"
	ReasonInvalidMetadata           = "InvalidMetadata"
	ReasonEnvVarsInjectionRejected  = "EnvVarsInjectionRejected"
	ReasonVolumeClaimTemplatesError = "VolumeClaimTemplatesError"
	ReasonClaimExpired              = "ClaimExpired"
	ReasonSandboxExpired            = "SandboxExpired"
	ReasonSandboxMissing            = "SandboxMissing"
	ReasonSandboxNotReady           = "SandboxNotReady"
	ReasonAdoptionConflict          = "AdoptionConflict"
	ReasonSandboxCreatePending      = "SandboxCreatePending"
	ReasonReconcilerError           = "ReconcilerError"
)

// NetworkPolicyManagement says whether the controller manages a template's NetworkPolicy.
type NetworkPolicyManagement string

const (
	NetworkPolicyManaged   NetworkPolicyManagement = "Managed"
	NetworkPolicyUnmanaged NetworkPolicyManagement = "Unmanaged"
)

// InjectionPolicy says what claims may set (env vars, volume claim templates).
type InjectionPolicy string

const (
	InjectionAllowed    InjectionPolicy = "Allowed"
	InjectionOverrides  InjectionPolicy = "Overrides"
	InjectionDisallowed InjectionPolicy = "Disallowed"
)

// PageMerging (extension) says whether the node's kernel same-page merging (KSM) may
// share identical memory pages between a template's Sandboxes (docs/security.md).
type PageMerging string

const (
	// PageMergingEnabled: the controller sets SANDBOXD_MEMORY_MERGE=1 on every container
	// and sandboxd marks itself and the processes it starts mergeable.
	PageMergingEnabled PageMerging = "Enabled"
	// PageMergingMaximal: as Enabled, and processes start without address space layout
	// randomization (more sharing, weaker exploit mitigation).
	PageMergingMaximal PageMerging = "Maximal"
	// PageMergingDisabled is the default.
	PageMergingDisabled PageMerging = "Disabled"
)

// ClaimShutdownPolicy says what happens on claim expiry.
type ClaimShutdownPolicy string

const (
	ClaimShutdownDelete           ClaimShutdownPolicy = "Delete"
	ClaimShutdownDeleteForeground ClaimShutdownPolicy = "DeleteForeground"
	ClaimShutdownRetain           ClaimShutdownPolicy = "Retain"
)

// UpdateStrategyType says how stale pool members are replaced.
type UpdateStrategyType string

const (
	UpdateRecreate    UpdateStrategyType = "Recreate"
	UpdateOnReplenish UpdateStrategyType = "OnReplenish"
)

// ClaimConfigDeliveryMode says how a claim's env reaches its Sandbox.
type ClaimConfigDeliveryMode string

const (
	// ClaimConfigLateBound delivers the env into an adopted warm Sandbox's sandboxd.
	ClaimConfigLateBound ClaimConfigDeliveryMode = "LateBound"
	// ClaimConfigColdStart cold-starts every claim that sets env (the default).
	ClaimConfigColdStart ClaimConfigDeliveryMode = "ColdStart"
)

// ClaimConfigFailurePolicy says what happens when a late-bound delivery fails.
type ClaimConfigFailurePolicy string

const (
	// ClaimConfigFailureColdStart replaces the adopted Sandbox by a cold one (default).
	ClaimConfigFailureColdStart ClaimConfigFailurePolicy = "ColdStart"
	// ClaimConfigFailureFail leaves the claim Ready=False (ConfigDeliveryFailed).
	ClaimConfigFailureFail ClaimConfigFailurePolicy = "Fail"
)

// ClaimConfigDelivery (extension) is how a claim's env reaches the Sandbox
// (docs/late-binding.md). Empty fields take the API defaults.
type ClaimConfigDelivery struct {
	Mode      ClaimConfigDeliveryMode  `json:"mode,omitempty"`
	OnFailure ClaimConfigFailurePolicy `json:"onFailure,omitempty"`
	// Port is sandboxd's REST port in the pod; nil means the default (8080).
	Port *int32 `json:"port,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	Name string `json:"name"`
}

// NetworkPolicySpec holds custom rules of a template's shared NetworkPolicy. A nil list
// keeps the default; an empty, non-nil list denies all traffic in that direction.
type NetworkPolicySpec struct {
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitzero"`
	Egress  []networkingv1.NetworkPolicyEgressRule  `json:"egress,omitzero"`
}

// SandboxTemplateSpec is a reusable Sandbox blueprint plus policies.
type SandboxTemplateSpec struct {
	PodTemplate                agentsv1beta1.PodTemplate                     `json:"podTemplate"`
	VolumeClaimTemplates       []agentsv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
	Service                    *bool                                         `json:"service,omitempty"`
	NetworkPolicy              *NetworkPolicySpec                            `json:"networkPolicy,omitempty"`
	NetworkPolicyManagement    NetworkPolicyManagement                       `json:"networkPolicyManagement,omitempty"`
	EnvVarsInjectionPolicy     InjectionPolicy                               `json:"envVarsInjectionPolicy,omitempty"`
	VolumeClaimTemplatesPolicy InjectionPolicy                               `json:"volumeClaimTemplatesPolicy,omitempty"`
	// ClaimConfigDelivery (extension): late-bound claim env.
	ClaimConfigDelivery *ClaimConfigDelivery `json:"claimConfigDelivery,omitempty"`
	// IdlePolicy (extension): copied to the Sandboxes built from the template.
	IdlePolicy *agentsv1beta1.IdlePolicy `json:"idlePolicy,omitempty"`
	// PageMerging (extension): kernel same-page merging between the template's
	// Sandboxes; empty means the API default (Disabled).
	PageMerging PageMerging `json:"pageMerging,omitempty"`
}

// +kubebuilder:object:root=true

// SandboxTemplate is a reusable Sandbox blueprint.
type SandboxTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SandboxTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// SandboxTemplateList is a list of SandboxTemplates.
type SandboxTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxTemplate `json:"items"`
}

// Lifecycle is the expiry of a claim.
type Lifecycle struct {
	ShutdownTime            *metav1.Time        `json:"shutdownTime,omitempty"`
	TTLSecondsAfterFinished *int32              `json:"ttlSecondsAfterFinished,omitempty"`
	ShutdownPolicy          ClaimShutdownPolicy `json:"shutdownPolicy,omitempty"`
}

// KeySelector names one key of a Secret or ConfigMap in the claim's namespace.
type KeySelector struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// EnvVarSource (extension) reads a claim env value from exactly one of a Secret key
// and a ConfigMap key.
type EnvVarSource struct {
	SecretKeyRef    *KeySelector `json:"secretKeyRef,omitempty"`
	ConfigMapKeyRef *KeySelector `json:"configMapKeyRef,omitempty"`
}

// EnvVar is an environment variable of a claim: a Value, or (extension) a ValueFrom
// reference. On the wire "value" is always sent when ValueFrom is nil (so an empty
// value stays a value, as upstream sends it) and left out when ValueFrom is set and
// Value is empty.
type EnvVar struct {
	Name          string        `json:"name"`
	Value         string        `json:"value"`
	ValueFrom     *EnvVarSource `json:"valueFrom,omitempty"`
	ContainerName string        `json:"containerName,omitempty"`
}

// MarshalJSON leaves out an empty value next to valueFrom.
func (e EnvVar) MarshalJSON() ([]byte, error) {
	type plain EnvVar
	if e.ValueFrom != nil && e.Value == "" {
		return json.Marshal(struct {
			Name          string        `json:"name"`
			ValueFrom     *EnvVarSource `json:"valueFrom"`
			ContainerName string        `json:"containerName,omitempty"`
		}{e.Name, e.ValueFrom, e.ContainerName})
	}
	return json.Marshal(plain(e))
}

// SandboxClaimSpec is what a claim asks for.
type SandboxClaimSpec struct {
	WarmPoolRef           LocalObjectReference                          `json:"warmPoolRef"`
	Lifecycle             *Lifecycle                                    `json:"lifecycle,omitempty"`
	AdditionalPodMetadata *agentsv1beta1.PodMetadata                    `json:"additionalPodMetadata,omitempty"`
	Env                   []EnvVar                                      `json:"env,omitempty"`
	VolumeClaimTemplates  []agentsv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
}

// SandboxReference is the Sandbox bound to a claim.
type SandboxReference struct {
	Name   string   `json:"name,omitempty"`
	PodIPs []string `json:"podIPs,omitempty"`
}

// SandboxClaimStatus is the observed state of a claim.
type SandboxClaimStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Sandbox    SandboxReference   `json:"sandbox,omitzero"`
}

// +kubebuilder:object:root=true

// SandboxClaim requests a Sandbox from a warm pool.
type SandboxClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SandboxClaimSpec   `json:"spec"`
	Status SandboxClaimStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// SandboxClaimList is a list of SandboxClaims.
type SandboxClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxClaim `json:"items"`
}

// IsReady reports whether the claim's Ready condition is True.
func (c *SandboxClaim) IsReady() bool {
	cond := agentsv1beta1.FindCondition(c.Status.Conditions, ConditionReady)
	return cond != nil && cond.Status == metav1.ConditionTrue
}

// UpdateStrategy says how pool members built from an older template are replaced.
type UpdateStrategy struct {
	Type UpdateStrategyType `json:"type,omitempty"`
}

// SandboxWarmPoolSpec is the desired pool.
type SandboxWarmPoolSpec struct {
	// Replicas is the number of pool Sandboxes to keep; nil means the API default (1).
	Replicas           *int32               `json:"replicas,omitempty"`
	SandboxTemplateRef LocalObjectReference `json:"sandboxTemplateRef"`
	UpdateStrategy     *UpdateStrategy      `json:"updateStrategy,omitempty"`
}

// SandboxWarmPoolStatus is the observed pool.
type SandboxWarmPoolStatus struct {
	Replicas           int32  `json:"replicas,omitempty"`
	ReadyReplicas      int32  `json:"readyReplicas,omitempty"`
	Selector           string `json:"selector,omitempty"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true

// SandboxWarmPool is a pool of pre-created Sandboxes.
type SandboxWarmPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SandboxWarmPoolSpec   `json:"spec"`
	Status SandboxWarmPoolStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// SandboxWarmPoolList is a list of SandboxWarmPools.
type SandboxWarmPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxWarmPool `json:"items"`
}
