{{- define "basics.greet" -}}
hello {{ . }}
{{- end -}}
{{- define "basics.ctx" -}}
{{ .Values.name }}/{{ .Release.Name }}
{{- end -}}
{{/* a comment */}}
{{- define "basics.redefined" }}first{{ end -}}
