{{/* The class and its templates are named after the release and the chart version. */}}
{{- define "cluster-class.name" -}}
{{ .Release.Name }}-{{ .Chart.Version }}
{{- end }}

{{- define "cluster-class.template" -}}
{{ include "cluster-class.name" .root }}-{{ .role }}
{{- end }}

{{/* The in-memory backend of a DevMachine: how long each fake part takes to start. */}}
{{- define "cluster-class.backend" -}}
backend:
  inMemory:
    vm:
      provisioning:
        startupDuration: {{ .Values.vmStartup | quote }}
        startupJitter: "0.2"
    node:
      provisioning:
        startupDuration: {{ .Values.nodeStartup | quote }}
        startupJitter: "0.2"
    apiServer:
      provisioning:
        startupDuration: {{ .Values.nodeStartup | quote }}
        startupJitter: "0.2"
    etcd:
      provisioning:
        startupDuration: {{ .Values.nodeStartup | quote }}
        startupJitter: "0.2"
{{- end }}
