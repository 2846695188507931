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
{{- $owned := dict "listen" (printf "0.0.0.0:%d" (int .Values.service.port)) "workdir" "/var/lib/manent" "dbos" $dbos "auth" $auth -}}
{{- if .Values.tls.existingSecret -}}
{{- $_ := set $owned "tls" (dict "cert_file" "/etc/manent-tls/tls.crt" "key_file" "/etc/manent-tls/tls.key") -}}
{{- end -}}
{{- if not .Values.config.envconfig -}}
{{- $provider := dict "name" "chart" "type" "file" "file" (dict "path" "/etc/manent/envconfig/{tenant}/{application}/{artifact}/{environment}.yml") -}}
{{- $_ := set $owned "envconfig" (dict "required" true "providers" (list $provider)) -}}
{{- end -}}
{{- $config := merge $owned (omit .Values.config "auth" "dbos" "listen" "workdir" (ternary "tls" "" (not (empty .Values.tls.existingSecret)))) -}}
{{- toYaml $config -}}
{{- end -}}

{{/* The service account's name. */}}
{{- define "manent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "manent.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
An envconfig path under envconfig/: tenant/application/artifact/environment.yml, each a plain
name, so no value can place a file outside the directory the provider reads.
*/}}
{{- define "manent.envconfigPath" -}}
{{- if not (regexMatch "^[A-Za-z0-9_][A-Za-z0-9._-]*/[A-Za-z0-9_][A-Za-z0-9._-]*/[A-Za-z0-9_][A-Za-z0-9._-]*/[A-Za-z0-9_][A-Za-z0-9._-]*\\.ya?ml$" .) -}}
{{- fail (printf "envconfig: %q is not a path tenant/application/artifact/environment.yml of plain names ([A-Za-z0-9._-], not starting with a dot)" .) -}}
{{- end -}}
{{- . -}}
{{- end -}}

{{/* The ConfigMap key of an inline envconfig file (keys cannot hold "/"). */}}
{{- define "manent.envconfigKey" -}}
{{- printf "envconfig.%s" (replace "/" "__" .) -}}
{{- end -}}
