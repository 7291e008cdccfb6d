package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CopyVolumeClaimTemplates deep-copies a list of PersistentVolumeClaim templates (nil
// stays nil).
func CopyVolumeClaimTemplates(in []PersistentVolumeClaimTemplate) []PersistentVolumeClaimTemplate {
	if in == nil {
		return nil
	}
	out := make([]PersistentVolumeClaimTemplate, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// CopyConditions deep-copies a list of conditions (nil stays nil).
func CopyConditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	out := make([]metav1.Condition, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}
