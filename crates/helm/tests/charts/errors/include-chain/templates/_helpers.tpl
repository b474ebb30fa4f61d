{{- /* a failure two includes deep: helm prints one location, action and message per template */ -}}
{{- define "h.field" -}}
x: {{ .Values.image.repository.nested }}
{{- end -}}
{{- define "h.outer" -}}
{{ include "h.field" . }}
{{- end -}}
