{{- define "holt-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "holt-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "holt-operator.labels" -}}
{{ include "holt-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: holt
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "holt-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "holt-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Rules on the objects of watched namespaces: holt.io kinds and everything the operator renders. */}}
{{- define "holt-operator.rules" -}}
- apiGroups: [holt.io]
  resources: [holts, agents]
  verbs: [get, list, watch, patch, update]
- apiGroups: [holt.io]
  resources: [workerpools]
  verbs: [get, list, watch, create, patch, update, delete]
- apiGroups: [holt.io]
  resources: [holts/status, agents/status, workerpools/status]
  verbs: [get, patch, update]
- apiGroups: [holt.io]
  resources: [workerpools/scale]
  verbs: [get, patch, update]
- apiGroups: [holt.io]
  resources: [holts/finalizers, agents/finalizers, workerpools/finalizers]
  verbs: [update]
- apiGroups: [apps]
  resources: [deployments, statefulsets]
  verbs: [get, list, watch, create, patch, update, delete]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, patch, update, delete]
- apiGroups: [""]
  resources: [services, secrets, configmaps, serviceaccounts, persistentvolumeclaims]
  verbs: [get, list, watch, create, patch, update, delete]
# Pods are only read, marked cheapest-to-delete when idle (pod-deletion-cost) and deleted on scale-in.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, patch, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, patch, update, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch, create, patch, update, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}
