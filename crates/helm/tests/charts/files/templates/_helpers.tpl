{{- define "files.helper" -}}
helper sees {{ .Values.name }}
{{- end -}}
