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

{{/* Labels of the `helm test` pod: the release's, but not the gateway pods' selector (no Service, PDB or
policy may take it for a gateway pod). */}}
{{- define "mrtr-gateway.testLabels" -}}
helm.sh/chart: {{ include "mrtr-gateway.chart" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: test
app.kubernetes.io/managed-by: {{ .Release.Service }}
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
{{- if not (or .Values.stateKeys.existingSecret .Values.stateKeys.keys) }}
{{- fail (printf "stateKeys: no requestState keys. The chart never generates them (replicas and upgrades must share them). Create a Secret and name it:\n  kubectl -n %s create secret generic %s-state-keys --from-literal=keys=\"$(docker run --rm %s gen-key)\"\n  helm install ... --set stateKeys.existingSecret=%s-state-keys\nor set stateKeys.keys (each at least 32 bytes)." .Release.Namespace (include "mrtr-gateway.fullname" .) (include "mrtr-gateway.image" .) (include "mrtr-gateway.fullname" .)) }}
{{- end }}
{{- default (printf "%s-state-keys" (include "mrtr-gateway.fullname" .)) .Values.stateKeys.existingSecret }}
{{- end }}

{{/* Where the key Secret is mounted; the rendered config's state.keys_file points at its one file. */}}
{{- define "mrtr-gateway.stateKeysDir" -}}
/var/run/secrets/mrtr-gateway/state-keys
{{- end }}

{{/*
The apiVersion of a built-in kind whose stable version is newer than the oldest Kubernetes the chart
supports (Chart.yaml kubeVersion, 1.20): the stable one wherever the cluster serves it, else the beta
one Kubernetes 1.20 serves.
  PodDisruptionBudget       policy/v1 (Kubernetes 1.21+)        else policy/v1beta1 (removed in 1.25)
  HorizontalPodAutoscaler   autoscaling/v2 (Kubernetes 1.23+)   else autoscaling/v2beta2 (removed in 1.26)
The chart uses only the fields both versions share. .Capabilities.APIVersions decides when it names
the kind (a cluster's discovery on install, upgrade or --dry-run=server; or `helm template
--api-versions policy/v1/PodDisruptionBudget`). Without a cluster Helm's own list names group/versions
only, policy/v1 and autoscaling/v2 whatever --kube-version says, so the Kubernetes version decides.
Call as: include "mrtr-gateway.apiVersion" (dict "kind" "PodDisruptionBudget" "context" $)
*/}}
{{- define "mrtr-gateway.apiVersion" -}}
{{- $versions := dict }}
{{- $_ := set $versions "PodDisruptionBudget" (list "policy/v1" "1.21.0-0" "policy/v1beta1") }}
{{- $_ = set $versions "HorizontalPodAutoscaler" (list "autoscaling/v2" "1.23.0-0" "autoscaling/v2beta2") }}
{{- if not (hasKey $versions .kind) }}
{{- fail (printf "mrtr-gateway.apiVersion: no API versions known for kind %s" .kind) }}
{{- end }}
{{- $stable := index (get $versions .kind) 0 }}
{{- $since := index (get $versions .kind) 1 }}
{{- $beta := index (get $versions .kind) 2 }}
{{- $caps := .context.Capabilities }}
{{- if $caps.APIVersions.Has (printf "%s/%s" $stable .kind) }}
{{- $stable }}
{{- else if $caps.APIVersions.Has (printf "%s/%s" $beta .kind) }}
{{- $beta }}
{{- else if semverCompare (printf ">=%s" $since) $caps.KubeVersion.Version }}
{{- $stable }}
{{- else }}
{{- $beta }}
{{- end }}
{{- end }}

{{/*
"true" when the cluster serves a kind that comes from a CRD, given as group/version/Kind; "" when it
does not. The ServiceMonitor and PrometheusRule (monitoring.coreos.com/v1, the Prometheus Operator's
CRDs) and the HTTPRoute (gateway.networking.k8s.io/v1, the Gateway API's) are created only where the
cluster serves them, so that installing with them enabled on a cluster without those CRDs succeeds
(NOTES.txt says what was left out) instead of failing with "no matches for kind". Install, upgrade
and --dry-run=server see the cluster's discovery, which names every kind it serves; `helm template`
and `helm lint` know Kubernetes' built-in API versions only, so name the kinds there: `helm template
--api-versions monitoring.coreos.com/v1/ServiceMonitor --api-versions ...`. The group/version alone
(monitoring.coreos.com/v1) does not do: each CRD is installed on its own.
Call as: include "mrtr-gateway.served" (dict "api" "monitoring.coreos.com/v1/ServiceMonitor" "context" $)
*/}}
{{- define "mrtr-gateway.served" -}}
{{- if ne (len (splitList "/" .api)) 3 }}
{{- fail (printf "mrtr-gateway.served: %q is not group/version/Kind" .api) }}
{{- end }}
{{- if .context.Capabilities.APIVersions.Has .api }}true{{ end }}
{{- end }}

{{/* How many gateway pods run at least: the HPA's floor when autoscaling, else replicaCount. */}}
{{- define "mrtr-gateway.minReplicas" -}}
{{- if .Values.autoscaling.enabled }}{{ .Values.autoscaling.minReplicas }}{{ else }}{{ .Values.replicaCount }}{{ end }}
{{- end }}

{{/* PromQL label matchers selecting this release's series (prometheusRule.selector or job + namespace). */}}
{{- define "mrtr-gateway.promSelector" -}}
{{- default (printf "job=%q,namespace=%q" (include "mrtr-gateway.fullname" .) .Release.Namespace) .Values.prometheusRule.selector }}
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

{{/* The port /metrics has to itself (config.listen.metrics_port); empty when it shares the client port. */}}
{{- define "mrtr-gateway.metricsPort" -}}
{{- with (dig "listen" "metrics_port" nil .Values.config) }}{{ int . }}{{ end }}
{{- end }}

{{/* The named container port /metrics is scraped on. */}}
{{- define "mrtr-gateway.metricsPortName" -}}
{{- if include "mrtr-gateway.metricsPort" . }}metrics{{ else }}http{{ end }}
{{- end }}

{{/*
The paths clients outside the cluster need, as a JSON list (for the Ingress and the HTTPRoute):
every config.routes[].path, and the OAuth protected-resource metadata paths the gateway serves for
routes with auth.resource_metadata (the path-suffixed form, and the bare one when exactly one route
publishes). /healthz, /readyz and /metrics are not among them.
*/}}
{{- define "mrtr-gateway.publicPaths" -}}
{{- $wellKnown := "/.well-known/oauth-protected-resource" }}
{{- $paths := list }}
{{- $metadata := list }}
{{- range .Values.config.routes }}
{{- $paths = append $paths .path }}
{{- if (.auth | default dict).resource_metadata }}
{{- $metadata = append $metadata (printf "%s%s" $wellKnown (trimSuffix "/" .path)) }}
{{- end }}
{{- end }}
{{- if eq (len $metadata) 1 }}
{{- $metadata = append $metadata $wellKnown }}
{{- end }}
{{- concat $paths $metadata | uniq | toJson }}
{{- end }}

{{/*
Seconds Kubernetes lets a pod stop: the preStop sleep, then the gateway's drain after SIGTERM
(config.listen.drain_timeout, default 20 s), then its shutdown (at most 10 s). Computed when
terminationGracePeriodSeconds is null; a set value shorter than that fails the install, since the
kubelet would kill the pod while it still finishes held calls.
*/}}
{{- define "mrtr-gateway.terminationGracePeriodSeconds" -}}
{{- $drain := dig "listen" "drain_timeout" 20 .Values.config | float64 | ceil | int }}
{{- $floor := add (int .Values.preStopSleepSeconds) $drain 10 }}
{{- $set := .Values.terminationGracePeriodSeconds }}
{{- if kindIs "invalid" $set }}
{{- $floor }}
{{- else if lt (int $set) (int $floor) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be at least preStopSleepSeconds (%d) + config.listen.drain_timeout (%d) + 10 s of shutdown = %d, or pods are killed while they still finish held calls; leave it null to have it computed" (int $set) (int .Values.preStopSleepSeconds) $drain (int $floor)) }}
{{- else }}
{{- int $set }}
{{- end }}
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
{{- if dig "state" "keys_file" nil $config }}
{{- fail "config.state.keys_file must stay unset: the chart mounts the stateKeys Secret and points keys_file at it" }}
{{- end }}
{{- $state := merge (dict "keys_file" (printf "%s/keys" (include "mrtr-gateway.stateKeysDir" .))) (default (dict) $config.state) }}
{{- $_ := set $config "state" $state }}
{{- if dig "replica_id" nil $config }}
{{- fail "config.replica_id must stay unset: each pod's replica id is its pod name (MRTR_GATEWAY_REPLICA_ID)" }}
{{- end }}
{{- if not (dig "routes" nil $config) }}
{{- fail "config.routes needs at least one route (see config/gateway.example.yaml)" }}
{{- end }}
{{- toYaml $config }}
{{- end }}
