{{- /* required two includes deep: helm names the call site in deploy.yaml, not this file */ -}}
{{- define "req.tag" -}}
{{ required "image.tag is required" .Values.image.tag }}
{{- end -}}
{{- define "req.image" -}}
repo:{{ include "req.tag" . }}
{{- end -}}
