{{- define "manent.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "manent.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "manent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "manent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "manent.labels" -}}
{{ include "manent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* manent.yml: the values' config, with what the chart owns set over it. */}}
{{- define "manent.config" -}}
{{- $tokens := list -}}
{{- range $i, $t := .Values.tokens -}}
{{- $entry := dict "name" $t.name "tenant" ($t.tenant | default "*") "token" (printf "env:MANENT_TOKEN_%d" $i) -}}
{{- range $k := list "role" "application" "environment" -}}
{{- if hasKey $t $k }}{{ $_ := set $entry $k (get $t $k) }}{{ end -}}
{{- end -}}
{{- $tokens = append $tokens $entry -}}
{{- end -}}
{{- $auth := merge (dict "tokens" $tokens) (.Values.config.auth | default dict) -}}
{{- $dbos := merge (dict "database_url" "env:MANENT_DATABASE_URL") (.Values.config.dbos | default dict) -}}
{{- $config := merge (dict "listen" (printf "0.0.0.0:%d" (int .Values.service.port)) "workdir" "/var/lib/manent" "dbos" $dbos "auth" $auth) (omit .Values.config "auth" "dbos" "listen" "workdir") -}}
{{- toYaml $config -}}
{{- end -}}
