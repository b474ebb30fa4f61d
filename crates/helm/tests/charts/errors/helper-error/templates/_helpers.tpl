{{- define "helper.broken" -}}
{{- /* line 2 */ -}}
{{ index .Values.list 5 }}
{{- end -}}
