{{- /* the template action: the error is the helper's, as in Go */ -}}
{{- define "h.field" -}}
x: {{ .Values.image.repository.nested }}
{{- end -}}
