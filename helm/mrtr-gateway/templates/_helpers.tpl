{{/*
Names, labels and the rendered gateway configuration shared by the templates.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "mrtr-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The fully qualified app name, at most 63 characters (DNS label). If the release name already
contains the chart name, it is used alone.
*/}}
{{- define "mrtr-gateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Chart name and version, for the helm.sh/chart label. */}}
{{- define "mrtr-gateway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels every resource carries. */}}
{{- define "mrtr-gateway.labels" -}}
helm.sh/chart: {{ include "mrtr-gateway.chart" . }}
{{ include "mrtr-gateway.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels that select the gateway pods; immutable once installed. */}}
{{- define "mrtr-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mrtr-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The ServiceAccount the pods run as. */}}
{{- define "mrtr-gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mrtr-gateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the requestState sealing keys: stateKeys.existingSecret or the chart's own. */}}
{{- define "mrtr-gateway.stateKeysSecretName" -}}
{{- default (printf "%s-state-keys" (include "mrtr-gateway.fullname" .)) .Values.stateKeys.existingSecret }}
{{- end }}

{{/* The container image reference; a digest wins over a tag. */}}
{{- define "mrtr-gateway.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The port the gateway listens on: config.listen.port, 8080 when unset. */}}
{{- define "mrtr-gateway.containerPort" -}}
{{- $port := int (dig "listen" "port" 8080 .Values.config) }}
{{- if eq $port 0 }}
{{- fail "config.listen.port must be a fixed port in Kubernetes (0 picks a random one)" }}
{{- end }}
{{- $port }}
{{- end }}

{{/*
The gateway's YAML configuration (the ConfigMap's gateway.yaml). Secrets and per-pod identity
never go into it: the sealing keys come from the Secret through MRTR_GATEWAY_STATE_KEYS, and
each pod's replica id from its name through MRTR_GATEWAY_REPLICA_ID.
*/}}
{{- define "mrtr-gateway.config" -}}
{{- $config := deepCopy .Values.config }}
{{- if dig "state" "keys" nil $config }}
{{- fail "config.state.keys must stay unset: put the keys in stateKeys.keys or stateKeys.existingSecret, so that they live in a Secret, not a ConfigMap" }}
{{- end }}
{{- if dig "replica_id" nil $config }}
{{- fail "config.replica_id must stay unset: each pod's replica id is its pod name (MRTR_GATEWAY_REPLICA_ID)" }}
{{- end }}
{{- if not (dig "routes" nil $config) }}
{{- fail "config.routes needs at least one route (see config/gateway.example.yaml)" }}
{{- end }}
{{- toYaml $config }}
{{- end }}
