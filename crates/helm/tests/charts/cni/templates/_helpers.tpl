{{/* Naming */}}
{{- define "cni.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cni.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "cni.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Images: a dict with .image and .root, several levels of include */}}
{{- define "cni.image.tag" -}}
{{- .image.tag | default .root.Chart.AppVersion -}}
{{- end -}}
{{- define "cni.image.suffix" -}}
{{- if and .image.useDigest .image.digest -}}
{{- printf "@%s" .image.digest -}}
{{- end -}}
{{- end -}}
{{- define "cni.image" -}}
{{- $tag := include "cni.image.tag" . -}}
{{- $suffix := include "cni.image.suffix" . -}}
{{- printf "%s:%s%s" .image.repository $tag $suffix -}}
{{- end -}}

{{/* Capabilities */}}
{{- define "cni.capabilities.kubeVersion" -}}
{{- default .Capabilities.KubeVersion.Version .Values.kubeVersionOverride -}}
{{- end -}}
{{- define "cni.capabilities.policy.apiVersion" -}}
{{- if semverCompare "<1.21-0" (include "cni.capabilities.kubeVersion" .) -}}
policy/v1beta1
{{- else -}}
policy/v1
{{- end -}}
{{- end -}}
{{- define "cni.capabilities.cronjob.apiVersion" -}}
{{- if semverCompare ">=1.21-0" (include "cni.capabilities.kubeVersion" .) -}}
batch/v1
{{- else -}}
batch/v1beta1
{{- end -}}
{{- end -}}
{{- define "cni.supportsSidecars" -}}
{{- semverCompare ">=1.29-0" (include "cni.capabilities.kubeVersion" .) -}}
{{- end -}}

{{/* Labels */}}
{{- define "cni.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cni.name" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}
{{- define "cni.labels" -}}
{{ include "cni.selectorLabels" . }}
helm.sh/chart: {{ include "cni.chart" .root }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: {{ include "cni.name" .root }}
{{- end -}}

{{/* Config rendering helpers */}}
{{- define "cni.bool" -}}
{{- if . }}true{{ else }}false{{ end -}}
{{- end -}}
{{- define "cni.config.tunnel" -}}
{{- if eq .Values.routingMode "tunnel" -}}
{{- .Values.tunnelProtocol -}}
{{- else -}}
disabled
{{- end -}}
{{- end -}}
{{- define "cni.bpfMapSize" -}}
{{- $ratio := .Values.bpf.mapDynamicSizeRatio | float64 -}}
{{- printf "%.4f" $ratio -}}
{{- end -}}

{{/* TLS: generated once per render and shared by the includes through a dict */}}
{{- define "cni.hubble.tls.gen" -}}
{{- $ca := .ca | default (genCA "hubble-ca.example.org" (.Values.hubble.tls.auto.certValidityDuration | int)) -}}
{{- $_ := set . "ca" $ca -}}
{{- $cn := "*.default.hubble-grpc.example.org" -}}
{{- $server := genSignedCert $cn (list "127.0.0.1") (list $cn "localhost") (.Values.hubble.tls.auto.certValidityDuration | int) $ca -}}
ca.crt: {{ $ca.Cert | b64enc }}
tls.crt: {{ $server.Cert | b64enc }}
tls.key: {{ $server.Key | b64enc }}
{{- end -}}
