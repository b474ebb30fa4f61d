{{- /* fail inside tpl inside a helper: still the call site in deploy.yaml */ -}}
{{- define "req.mode" -}}
{{ tpl "{{ if ne .Values.mode \"plain\" }}{{ fail (printf \"mode %q is not supported\" .Values.mode) }}{{ end }}" . }}
{{- end -}}
