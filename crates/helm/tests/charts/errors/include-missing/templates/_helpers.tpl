{{- /* no helper of that name */ -}}
{{- define "h.other" -}}x{{- end -}}
