{{/* The labels of every object (and the pods' selector), as `install --export` sets them. */}}
{{- define "clusterstack.labels" -}}
app.kubernetes.io/component: operator
app.kubernetes.io/name: clusterstack
{{- end }}

{{/* The operator's image. */}}
{{- define "clusterstack.image" -}}
{{- .Values.image | default (printf "ghcr.io/sovereigncloudstack/clusterstack:%s" .Chart.AppVersion) }}
{{- end }}

{{/* The cache claim of one instance; `.shard` is empty for the first. */}}
{{- define "clusterstack.cacheClaim" -}}
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {{ .claim }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "clusterstack.labels" .root | nindent 4 }}
spec:
  accessModes:
    - ReadWriteOnce
  resources:
    requests:
      storage: {{ .root.Values.cache.size | quote }}
  {{- with .root.Values.cache.storageClass }}
  storageClassName: {{ . | quote }}
  {{- end }}
{{- end }}

{{/* The Deployment of one instance; `.shard` is empty for the first. */}}
{{- define "clusterstack.deployment" -}}
{{- $root := .root -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ if .shard }}clusterstack-operator-{{ .shard }}{{ else }}clusterstack-operator{{ end }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "clusterstack.labels" $root | nindent 4 }}
spec:
  replicas: 1
  # The cache volume is ReadWriteOnce: the old pod must go before the new one mounts it.
  strategy:
    type: Recreate
  selector:
    matchLabels:
      {{- include "clusterstack.labels" $root | nindent 6 }}
      {{- if .shard }}
      clusterstack.x-k8s.io/shard: {{ .shard }}
      {{- end }}
    {{- if and (not .shard) (gt (int $root.Values.shards) 1) }}
    # The shards' pods carry the shard label: keep the selectors apart.
    matchExpressions:
      - key: clusterstack.x-k8s.io/shard
        operator: DoesNotExist
    {{- end }}
  template:
    metadata:
      labels:
        {{- include "clusterstack.labels" $root | nindent 8 }}
        {{- if .shard }}
        clusterstack.x-k8s.io/shard: {{ .shard }}
        {{- end }}
    spec:
      serviceAccountName: clusterstack-operator
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        fsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: operator
          image: {{ include "clusterstack.image" $root | quote }}
          imagePullPolicy: IfNotPresent
          args:
            - operator
            - --metrics-addr=0.0.0.0:8080
            - --health-addr=0.0.0.0:8081
            - --cache-dir=/var/cache/clusterstack
            - --hooks-addr=0.0.0.0:9443
            - --hooks-cert-dir=/etc/clusterstack/hooks-tls
            - --leader-elect
            {{- if .shard }}
            - --shard={{ .shard }}
            {{- end }}
          env:
            - name: CLUSTERSTACK_LOG_FORMAT
              value: json
            - name: CLUSTERSTACK_DEFAULT_SOURCE
              value: {{ $root.Values.defaultSource | quote }}
            - name: CLUSTERSTACK_MAX_OBJECTS_PER_RELEASE
              value: {{ $root.Values.maxObjectsPerRelease | quote }}
            # Two malloc arenas bound the RSS that freed memory keeps (see install.rs).
            - name: MALLOC_ARENA_MAX
              value: "2"
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            - name: CLUSTERSTACK_GITHUB_TOKEN
              valueFrom:
                secretKeyRef:
                  name: clusterstack-github
                  key: token
                  # Without a token the operator still works, at 60 requests/hour.
                  optional: true
          ports:
            - name: metrics
              containerPort: 8080
            - name: health
              containerPort: 8081
            - name: hooks
              containerPort: 9443
          livenessProbe:
            httpGet:
              path: /healthz
              port: health
            initialDelaySeconds: 10
            periodSeconds: 10
          readinessProbe:
            httpGet:
              path: /readyz
              port: health
            initialDelaySeconds: 5
            periodSeconds: 10
          resources:
            requests:
              cpu: 50m
              memory: 64Mi
            limits:
              memory: 512Mi
          securityContext:
            runAsNonRoot: true
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities:
              drop:
                - ALL
          volumeMounts:
            - name: cache
              mountPath: /var/cache/clusterstack
            - name: tmp
              mountPath: /tmp
            - name: hooks-tls
              mountPath: /etc/clusterstack/hooks-tls
              readOnly: true
      volumes:
        - name: cache
          persistentVolumeClaim:
            claimName: {{ .claim }}
        - name: tmp
          emptyDir: {}
        - name: hooks-tls
          secret:
            secretName: clusterstack-hooks-tls
{{- end }}
