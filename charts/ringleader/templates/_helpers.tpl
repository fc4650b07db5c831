{{/*
Names. Kubernetes limits most object names, and every label value, to 63 characters (DNS labels),
so every name below is truncated to 63; a component suffix ("-mlflow") is kept whole by truncating
the base name first, so two components never collapse into one name.
*/}}
{{- define "ringleader.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ringleader.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "<fullname>-<component>" within 63 characters; call with (dict "root" $ "component" "mlflow"). */}}
{{- define "ringleader.componentName" -}}
{{- $suffix := printf "-%s" .component -}}
{{- $base := include "ringleader.fullname" .root | trunc (int (sub 63 (len $suffix))) | trimSuffix "-" -}}
{{- printf "%s%s" $base $suffix -}}
{{- end -}}

{{- define "ringleader.operatorName" -}}
{{- include "ringleader.fullname" . -}}
{{- end -}}

{{- define "ringleader.mlflowName" -}}
{{- include "ringleader.componentName" (dict "root" . "component" "mlflow") -}}
{{- end -}}

{{- define "ringleader.guardRailsName" -}}
{{- include "ringleader.componentName" (dict "root" . "component" "guard-rails") -}}
{{- end -}}

{{- define "ringleader.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ringleader.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Labels: the recommended app.kubernetes.io set; selectors use the stable subset. */}}
{{- define "ringleader.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "ringleader.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: ringleader
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "ringleader.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ringleader.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Images: one ringleader image (operator, runtime, MLflow), a digest winning over a tag. */}}
{{- define "ringleader.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "ringleader.workersImage" -}}
{{- default (include "ringleader.image" .) .Values.workers.image -}}
{{- end -}}

{{- define "ringleader.mlflowImage" -}}
{{- if .Values.mlflow.image.repository -}}
{{- printf "%s:%s" .Values.mlflow.image.repository (default .Chart.AppVersion .Values.mlflow.image.tag) -}}
{{- else -}}
{{- include "ringleader.image" . -}}
{{- end -}}
{{- end -}}

{{/* The MLflow Service's in-cluster URL, resolvable from any namespace. */}}
{{- define "ringleader.mlflowUrl" -}}
{{- printf "http://%s.%s.svc.%s:%d" (include "ringleader.mlflowName" .) .Release.Namespace .Values.clusterDomain (int .Values.mlflow.port) -}}
{{- end -}}

{{- define "ringleader.trackingUri" -}}
{{- if .Values.tracking.uri -}}
{{- .Values.tracking.uri -}}
{{- else if .Values.mlflow.enabled -}}
{{- include "ringleader.mlflowUrl" . -}}
{{- end -}}
{{- end -}}

{{/*
Whether the MLflow server keeps anything on its data volume (SQLite, or artifacts): a claim is made and
mounted only then. "true" or empty.
*/}}
{{- define "ringleader.mlflowKeepsLocalData" -}}
{{- if not (and .Values.mlflow.backendStore.existingSecret .Values.mlflow.artifacts.destination) -}}
true
{{- end -}}
{{- end -}}

{{/* The namespaces of Namespace mode (default: the release's), as a list. */}}
{{- define "ringleader.namespaces" -}}
{{- if .Values.scope.namespaces -}}
{{- toJson .Values.scope.namespaces -}}
{{- else -}}
{{- toJson (list .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{/*
The operator's rules on namespaced resources: exactly the verbs it uses (see
operator/ringleader/controller/kube.py, one function per verb), no wildcard.
*/}}
{{- define "ringleader.namespacedRules" -}}
# Experiments: kopf lists and watches them (its watch-event handlers write nothing back); a reconcile
# reads one (get); runPolicy.ttlSecondsAfterFinished deletes it (delete).
- apiGroups: ["ringleader.dev"]
  resources: ["distributedtrainingexperiments"]
  verbs: ["get", "list", "watch", "delete"]
# The status is written with merge patches, nothing else.
- apiGroups: ["ringleader.dev"]
  resources: ["distributedtrainingexperiments/status"]
  verbs: ["patch"]
# Children carry owner references with blockOwnerDeletion, which needs update on the owner's
# finalizers where the OwnerReferencesPermissionEnforcement admission plugin is enabled.
- apiGroups: ["ringleader.dev"]
  resources: ["distributedtrainingexperiments/finalizers"]
  verbs: ["update"]
# Trial pods: watched (list, watch), created, deleted on restart, suspension and clean-up.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "create", "delete"]
# Progress: the tail of each worker's log (`progress: iteration K/N` lines).
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
# Each trial's headless Service (rendezvous) and ConfigMap (the trial as JSON): created, then
# garbage-collected with the experiment.
- apiGroups: [""]
  resources: ["services", "configmaps"]
  verbs: ["create"]
# Events on experiments, posted by kopf for every transition.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- if .Values.podGroups.enabled }}
# PodGroups of gang-scheduled trials (Volcano, scheduler-plugins), only when enabled.
- apiGroups: ["scheduling.volcano.sh", "scheduling.x-k8s.io"]
  resources: ["podgroups"]
  verbs: ["create"]
{{- end }}
{{- if .Values.kueue.enabled }}
# Kueue Workloads, one per trial of an experiment with scheduling.queueName, only when enabled:
# created to queue the trial, watched for admission, deleted when an eviction requeues the trial.
- apiGroups: ["kueue.x-k8s.io"]
  resources: ["workloads"]
  verbs: ["list", "watch", "create", "delete"]
# A Workload is marked Finished (one condition, server-side apply) when its trial ends: the quota is released.
- apiGroups: ["kueue.x-k8s.io"]
  resources: ["workloads/status"]
  verbs: ["patch"]
{{- end }}
{{- end -}}

{{/* Restricted security context shared by the chart's containers (Pod Security "restricted"). */}}
{{- define "ringleader.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 1000
runAsGroup: 1000
fsGroup: 1000
# Volumes are chowned to fsGroup only when their root is not already its: a big MLflow volume is not walked
# on every start.
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "ringleader.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
