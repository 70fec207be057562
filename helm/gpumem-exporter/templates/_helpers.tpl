{{/*
Chart name, overridable with nameOverride.
*/}}
{{- define "gpumem-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of the release's resources (63 characters at most: DNS label).
*/}}
{{- define "gpumem-exporter.fullname" -}}
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

{{- define "gpumem-exporter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every resource.
*/}}
{{- define "gpumem-exporter.labels" -}}
helm.sh/chart: {{ include "gpumem-exporter.chart" . }}
{{ include "gpumem-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: exporter
{{- end }}

{{/*
Labels that select the pods (immutable once a DaemonSet exists: keep them few).
*/}}
{{- define "gpumem-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpumem-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpumem-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpumem-exporter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
repository:tag, or repository@digest when a digest is given.
*/}}
{{- define "gpumem-exporter.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Where the ingest socket lives inside the exporter container and in training pods.
*/}}
{{- define "gpumem-exporter.socketDir" -}}/run/gpumem{{- end }}
{{- define "gpumem-exporter.socketPath" -}}{{ include "gpumem-exporter.socketDir" . }}/ingest.sock{{- end }}
{{- define "gpumem-exporter.configDir" -}}/etc/gpumem-exporter{{- end }}
