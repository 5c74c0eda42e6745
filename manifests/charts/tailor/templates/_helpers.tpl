{{/* Name of the chart, overridable. */}}
{{- define "tailor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects: the release name, with the chart name unless the
release name already holds it. */}}
{{- define "tailor.fullname" -}}
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

{{/* Labels of every object. */}}
{{- define "tailor.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tailor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the pods. */}}
{{- define "tailor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tailor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Name of the ServiceAccount the pods run as. */}}
{{- define "tailor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tailor.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name must name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The scheduler's leader election Lease, in the release namespace. The provisioner holds
no Lease of its own: it leads while the scheduler of its pod holds this one. */}}
{{- define "tailor.schedulerLease" -}}tailor-scheduler{{- end }}

{{/* Directory of the provisioner's gRPC socket, an emptyDir both containers mount. */}}
{{- define "tailor.socketDir" -}}/var/run/tailor{{- end }}

{{/* image renders repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "tailor.image" -}}
{{- printf "%s:%s" .image.repository (default .chart.AppVersion .image.tag) }}
{{- end }}

{{/*
Karpenter's FEATURE_GATES from settings.featureGates: each camelCase key as its gate's name
(spotToSpotConsolidation is SpotToSpotConsolidation), sorted.
*/}}
{{- define "tailor.featureGates" -}}
{{- $gates := list -}}
{{- range $name, $on := . -}}
{{- $gates = append $gates (printf "%s%s=%t" (upper (substr 0 1 $name)) (substr 1 -1 $name) $on) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}
