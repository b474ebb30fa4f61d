{{- define "basics.redefined" }}second{{ end -}}
