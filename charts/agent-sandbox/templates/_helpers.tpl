{{/* SPDX-License-Identifier: Apache-2.0 */}}
{{/* Object names are fixed (not release-prefixed): the Lease id, the ClusterRoles and the
     router label the managed NetworkPolicies admit are cluster-wide facts, and only one
     install per cluster (or per watched namespace) makes sense. */}}

{{- define "as.labels" -}}
app.kubernetes.io/part-of: agent-sandbox
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "as.tag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{- define "as.controllerImage" -}}
{{- printf "%s/agent-sandbox-controller:%s" .Values.image.registry (include "as.tag" .) -}}
{{- end -}}

{{- define "as.routerImage" -}}
{{- printf "%s/sandbox-router:%s" .Values.image.registry (include "as.tag" .) -}}
{{- end -}}

{{- define "as.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- define "as.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}

{{/* as.scheduling: the optional pod-level placement keys of one component's values. */}}
{{- define "as.scheduling" -}}
{{- with .imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .c.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
