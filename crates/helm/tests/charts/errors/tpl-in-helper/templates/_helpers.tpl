{{- /* a failure inside tpl: helm keeps Go's one-line chain */ -}}
{{- define "h.tpl" -}}
{{ tpl "{{ .Values.image.a.b }}" . }}
{{- end -}}
