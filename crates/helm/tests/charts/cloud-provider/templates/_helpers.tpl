{{- define "occm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "occm.common.matchLabels" -}}
app: {{ template "occm.name" . }}
release: {{ .Release.Name }}
{{- end -}}
{{- define "occm.common.metaLabels" -}}
chart: {{ .Chart.Name }}-{{ .Chart.Version }}
heritage: {{ .Release.Service }}
{{- end -}}
{{- define "occm.controllermanager.labels" -}}
{{ include "occm.controllermanager.matchLabels" . }}
{{ include "occm.common.metaLabels" . }}
{{- end -}}
{{- define "occm.controllermanager.matchLabels" -}}
component: controllermanager
{{ include "occm.common.matchLabels" . }}
{{- end -}}
{{- define "cloudConfig" -}}
[Global]
{{- range $key, $value := .Values.cloudConfig.global }}
{{ $key }} = {{ $value | quote }}
{{- end }}
{{- with .Values.cloudConfig.loadBalancer }}

[LoadBalancer]
{{- range $key, $value := . }}
{{ $key }} = {{ $value | quote }}
{{- end }}
{{- end }}
{{- with .Values.cloudConfig.blockStorage }}

[BlockStorage]
{{- range $key, $value := . }}
{{ $key }} = {{ $value | quote }}
{{- end }}
{{- end }}
{{- with .Values.cloudConfig.metadata }}

[Metadata]
{{- range $key, $value := . }}
{{ $key }} = {{ $value | quote }}
{{- end }}
{{- end }}
{{- end -}}
{{- define "csi.storageclass" -}}
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: csi-cinder-sc-{{ .name }}
  {{- if .spec.isDefault }}
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
  {{- end }}
provisioner: cinder.csi.openstack.org
reclaimPolicy: {{ .name | title }}
allowVolumeExpansion: {{ .spec.allowVolumeExpansion }}
{{- end -}}
