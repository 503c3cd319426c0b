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
# Least privilege: only the verbs src/operator uses. Objects are written with server-side apply
# (patch; create when apply makes one), created (Secrets, claim Jobs, Events) or pruned (delete);
# nothing is written with update (PUT) except the Lease. Reads come from informers (list, watch).
- apiGroups: [holt.io]
  resources: [holts, toolservers]
  verbs: [get, list, watch]
# Agents: patch only removes the registry finalizer older operators added (none is added now:
# a finalizer would hang the deletion of a namespace once this Role is gone with it).
- apiGroups: [holt.io]
  resources: [agents]
  verbs: [get, list, watch, patch]
# WorkerPools: an Agent's own pool is applied and pruned; the autoscaler applies spec.replicas on the
# resource itself (never through /scale, which is for HPA, KEDA and kubectl scale).
- apiGroups: [holt.io]
  resources: [workerpools]
  verbs: [get, list, watch, create, patch, delete]
# Status is written with server-side apply on the status subresource.
- apiGroups: [holt.io]
  resources: [holts/status, agents/status, workerpools/status, toolservers/status]
  verbs: [patch]
# Owner references with blockOwnerDeletion need update on the owner's finalizers
# (OwnerReferencesPermissionEnforcement).
- apiGroups: [holt.io]
  resources: [holts/finalizers, agents/finalizers, workerpools/finalizers, toolservers/finalizers]
  verbs: [update]
- apiGroups: [apps]
  resources: [deployments, statefulsets]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [services, serviceaccounts, persistentvolumeclaims]
  verbs: [get, list, watch, create, patch, delete]
# Secrets: never listed or watched (that would read every Secret of the namespace); each store Secret
# is read by name, created once, given the keys a newer version adds (patch), and deleted when a store
# turns external. RBAC cannot narrow `get` to the names the Holts and Agents hold (resourceNames are
# fixed, theirs are not): the operator's client itself refuses any other name (src/operator/secrets.ts).
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, patch, delete]
# Pods are listed and, before a scale-in, marked cheapest to delete when idle (pod-deletion-cost);
# the ReplicaSet controller deletes them, never the operator. Worker and claim Job pods are watched,
# and a dead pup's last log lines read, to report it to its Holt (WorkerFailure): the pod is read
# again then, to pick the dead run's log (the current or the previous container's).
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, patch]
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create]
# A Holt's PodMonitor (spec.monitoring.podMonitor), where the Prometheus Operator is installed. Read by
# name only: without an informer, a cluster without the CRD never blocks the caches.
- apiGroups: [monitoring.coreos.com]
  resources: [podmonitors]
  verbs: [get, create, patch, delete]
# A Holt's ingress for living agents (spec.ingress.expose): an Ingress, or a Gateway API HTTPRoute.
- apiGroups: [networking.k8s.io]
  resources: [ingresses]
  verbs: [get, create, patch, delete]
- apiGroups: [gateway.networking.k8s.io]
  resources: [httproutes]
  verbs: [get, create, patch, delete]
{{- end -}}


{{/* The namespaces the operator watches (comma-separated): watchNamespaces, or the release's own. */}}
{{- define "holt-operator.namespaces" -}}
{{- if .Values.watchNamespaces -}}
{{- join "," .Values.watchNamespaces -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}
