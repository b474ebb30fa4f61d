{{- define "cluster-class.name" -}}
{{ .Release.Name }}-{{ .Chart.Version }}
{{- end -}}
{{- define "cluster-class.hash" -}}
{{- toJson .Values | sha256sum | trunc 8 -}}
{{- end -}}
