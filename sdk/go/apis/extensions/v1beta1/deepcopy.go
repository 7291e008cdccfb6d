package v1beta1

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	agentsv1beta1 "github.com/agent-sandbox-dev/agent-sandbox/sdk/go/apis/agents/v1beta1"
)

// DeepCopyInto copies the receiver into out.
func (in *NetworkPolicySpec) DeepCopyInto(out *NetworkPolicySpec) {
	out.Ingress, out.Egress = nil, nil
	if in.Ingress != nil {
		out.Ingress = make([]networkingv1.NetworkPolicyIngressRule, len(in.Ingress))
		for i := range in.Ingress {
			in.Ingress[i].DeepCopyInto(&out.Ingress[i])
		}
	}
	if in.Egress != nil {
		out.Egress = make([]networkingv1.NetworkPolicyEgressRule, len(in.Egress))
		for i := range in.Egress {
			in.Egress[i].DeepCopyInto(&out.Egress[i])
		}
	}
}

// DeepCopy returns a deep copy.
func (in *NetworkPolicySpec) DeepCopy() *NetworkPolicySpec {
	if in == nil {
		return nil
	}
	out := new(NetworkPolicySpec)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the receiver into out.
func (in *SandboxTemplateSpec) DeepCopyInto(out *SandboxTemplateSpec) {
	*out = *in
	in.PodTemplate.DeepCopyInto(&out.PodTemplate)
	out.VolumeClaimTemplates = agentsv1beta1.CopyVolumeClaimTemplates(in.VolumeClaimTemplates)
	if in.Service != nil {
		v := *in.Service
		out.Service = &v
	}
	out.NetworkPolicy = in.NetworkPolicy.DeepCopy()
	out.ClaimConfigDelivery = in.ClaimConfigDelivery.DeepCopy()
	out.IdlePolicy = in.IdlePolicy.DeepCopy()
}

// DeepCopyInto copies the receiver into out.
func (in *ClaimConfigDelivery) DeepCopyInto(out *ClaimConfigDelivery) {
	*out = *in
	if in.Port != nil {
		v := *in.Port
		out.Port = &v
	}
}

// DeepCopy returns a deep copy.
func (in *ClaimConfigDelivery) DeepCopy() *ClaimConfigDelivery {
	if in == nil {
		return nil
	}
	out := new(ClaimConfigDelivery)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the receiver into out.
func (in *EnvVarSource) DeepCopyInto(out *EnvVarSource) {
	out.SecretKeyRef, out.ConfigMapKeyRef = nil, nil
	if in.SecretKeyRef != nil {
		v := *in.SecretKeyRef
		out.SecretKeyRef = &v
	}
	if in.ConfigMapKeyRef != nil {
		v := *in.ConfigMapKeyRef
		out.ConfigMapKeyRef = &v
	}
}

// DeepCopy returns a deep copy.
func (in *EnvVarSource) DeepCopy() *EnvVarSource {
	if in == nil {
		return nil
	}
	out := new(EnvVarSource)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the receiver into out.
func (in *EnvVar) DeepCopyInto(out *EnvVar) {
	*out = *in
	out.ValueFrom = in.ValueFrom.DeepCopy()
}

// DeepCopy returns a deep copy.
func (in *SandboxTemplateSpec) DeepCopy() *SandboxTemplateSpec {
	if in == nil {
		return nil
	}
	out := new(SandboxTemplateSpec)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the receiver into out.
func (in *SandboxTemplate) DeepCopyInto(out *SandboxTemplate) {
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
}

// DeepCopy returns a deep copy.
func (in *SandboxTemplate) DeepCopy() *SandboxTemplate {
	if in == nil {
		return nil
	}
	out := new(SandboxTemplate)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *SandboxTemplate) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies the receiver into out.
func (in *SandboxTemplateList) DeepCopyInto(out *SandboxTemplateList) {
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = nil
	if in.Items != nil {
		out.Items = make([]SandboxTemplate, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy.
func (in *SandboxTemplateList) DeepCopy() *SandboxTemplateList {
	if in == nil {
		return nil
	}
	out := new(SandboxTemplateList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *SandboxTemplateList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies the receiver into out.
func (in *Lifecycle) DeepCopyInto(out *Lifecycle) {
	*out = *in
	if in.ShutdownTime != nil {
		out.ShutdownTime = in.ShutdownTime.DeepCopy()
	}
	if in.TTLSecondsAfterFinished != nil {
		v := *in.TTLSecondsAfterFinished
		out.TTLSecondsAfterFinished = &v
	}
}

// DeepCopy returns a deep copy.
func (in *Lifecycle) DeepCopy() *Lifecycle {
	if in == nil {
		return nil
	}
	out := new(Lifecycle)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the receiver into out.
func (in *SandboxClaimSpec) DeepCopyInto(out *SandboxClaimSpec) {
	*out = *in
	out.Lifecycle = in.Lifecycle.DeepCopy()
	out.AdditionalPodMetadata = in.AdditionalPodMetadata.DeepCopy()
	if in.Env != nil {
		out.Env = make([]EnvVar, len(in.Env))
		for i := range in.Env {
			in.Env[i].DeepCopyInto(&out.Env[i])
		}
	}
	out.VolumeClaimTemplates = agentsv1beta1.CopyVolumeClaimTemplates(in.VolumeClaimTemplates)
}

// DeepCopy returns a deep copy.
func (in *SandboxClaimSpec) DeepCopy() *SandboxClaimSpec {
	if in == nil {
		return nil
	}
	out := new(SandboxClaimSpec)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the receiver into out.
func (in *SandboxClaimStatus) DeepCopyInto(out *SandboxClaimStatus) {
	out.Conditions = agentsv1beta1.CopyConditions(in.Conditions)
	out.Sandbox.Name = in.Sandbox.Name
	out.Sandbox.PodIPs = nil
	if in.Sandbox.PodIPs != nil {
		out.Sandbox.PodIPs = append([]string(nil), in.Sandbox.PodIPs...)
	}
}

// DeepCopy returns a deep copy.
func (in *SandboxClaimStatus) DeepCopy() *SandboxClaimStatus {
	if in == nil {
		return nil
	}
	out := new(SandboxClaimStatus)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the receiver into out.
func (in *SandboxClaim) DeepCopyInto(out *SandboxClaim) {
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy.
func (in *SandboxClaim) DeepCopy() *SandboxClaim {
	if in == nil {
		return nil
	}
	out := new(SandboxClaim)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *SandboxClaim) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies the receiver into out.
func (in *SandboxClaimList) DeepCopyInto(out *SandboxClaimList) {
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = nil
	if in.Items != nil {
		out.Items = make([]SandboxClaim, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy.
func (in *SandboxClaimList) DeepCopy() *SandboxClaimList {
	if in == nil {
		return nil
	}
	out := new(SandboxClaimList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *SandboxClaimList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies the receiver into out.
func (in *SandboxWarmPoolSpec) DeepCopyInto(out *SandboxWarmPoolSpec) {
	*out = *in
	if in.Replicas != nil {
		v := *in.Replicas
		out.Replicas = &v
	}
	if in.UpdateStrategy != nil {
		v := *in.UpdateStrategy
		out.UpdateStrategy = &v
	}
}

// DeepCopy returns a deep copy.
func (in *SandboxWarmPoolSpec) DeepCopy() *SandboxWarmPoolSpec {
	if in == nil {
		return nil
	}
	out := new(SandboxWarmPoolSpec)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the receiver into out.
func (in *SandboxWarmPool) DeepCopyInto(out *SandboxWarmPool) {
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	out.Status = in.Status
}

// DeepCopy returns a deep copy.
func (in *SandboxWarmPool) DeepCopy() *SandboxWarmPool {
	if in == nil {
		return nil
	}
	out := new(SandboxWarmPool)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *SandboxWarmPool) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies the receiver into out.
func (in *SandboxWarmPoolList) DeepCopyInto(out *SandboxWarmPoolList) {
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = nil
	if in.Items != nil {
		out.Items = make([]SandboxWarmPool, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy.
func (in *SandboxWarmPoolList) DeepCopy() *SandboxWarmPoolList {
	if in == nil {
		return nil
	}
	out := new(SandboxWarmPoolList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *SandboxWarmPoolList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}
