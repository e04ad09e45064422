{{/* The name of every object: the release name, unless it already says llmserve. */}}
{{- define "llmserve.fullname" -}}
{{- if contains "llmserve" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-llmserve" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "llmserve.labels" -}}
app.kubernetes.io/name: llmserve
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Labels that select this release's pods of one component (head, worker, server). */}}
{{- define "llmserve.selector" -}}
app.kubernetes.io/name: llmserve
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "llmserve.image" -}}
{{- $tag := ternary .Values.gpu.tag .Values.image.tag .Values.gpu.enabled -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}

{{/* The head loads no model: the CPU image always. */}}
{{- define "llmserve.headImage" -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- end -}}

{{- define "llmserve.grace" -}}
{{- add .Values.drain.preStopSleepSeconds .Values.drain.shutdownTimeoutSeconds .Values.drain.marginSeconds -}}
{{- end -}}

{{/* Flags every process takes: listen on every interface, the fixed ports, the drain time. */}}
{{- define "llmserve.commonArgs" -}}
- --host=0.0.0.0
- --http-port=8080
- --grpc-port=8081
- --shutdown-timeout={{ .Values.drain.shutdownTimeoutSeconds }}s
- --log-format=json
{{- end -}}

{{/* Flags of a process that loads the model (serve, worker). */}}
{{- define "llmserve.modelArgs" -}}
- --model=/models/{{ .Values.model.file }}
- --model-name={{ .Values.model.name }}
{{ include "llmserve.engineArgs" . }}
{{- end -}}

{{- define "llmserve.engineArgs" -}}
- --max-model-len={{ .Values.serve.maxModelLen }}
- --max-num-seqs={{ .Values.serve.maxNumSeqs }}
- --kv-cache-memory={{ .Values.serve.kvCacheMemory }}
{{- if .Values.gpu.enabled }}
- --n-gpu-layers=-1
{{- end }}
{{- range .Values.serve.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{- define "llmserve.ports" -}}
- name: http
  containerPort: 8080
  protocol: TCP
- name: grpc
  containerPort: 8081
  protocol: TCP
{{- if .worker }}
- name: worker
  containerPort: 8090
  protocol: TCP
{{- end }}
{{- end -}}

{{/* Probes of a model server (serve, worker): started once /health answers
(model loaded; up to 10 minutes), ready on /v2/health/ready, alive on
/health (503 when its engine is down, so a dead engine restarts the pod). */}}
{{- define "llmserve.probes" -}}
{{ include "llmserve.probesAt" "/health" }}
{{- end -}}

{{/* Probes of the head: alive and started on /v2/health/live, since its
/health is its readiness (a healthy worker exists) and restarting a head
does not bring workers back. */}}
{{- define "llmserve.headProbes" -}}
{{ include "llmserve.probesAt" "/v2/health/live" }}
{{- end -}}

{{- define "llmserve.probesAt" -}}
startupProbe:
  httpGet:
    path: {{ . }}
    port: http
  periodSeconds: 5
  failureThreshold: 120
readinessProbe:
  httpGet:
    path: /v2/health/ready
    port: http
  periodSeconds: 5
  failureThreshold: 2
livenessProbe:
  httpGet:
    path: {{ . }}
    port: http
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
{{- end -}}

{{- define "llmserve.lifecycle" -}}
lifecycle:
  preStop:
    sleep:
      seconds: {{ .Values.drain.preStopSleepSeconds }}
{{- end -}}

{{- define "llmserve.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: ["ALL"]
{{- end -}}

{{- define "llmserve.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
{{- end -}}

{{/* resources of a model pod: the worker's, plus the GPUs. */}}
{{- define "llmserve.workerResources" -}}
{{- $r := deepCopy .Values.resources.worker -}}
{{- if .Values.gpu.enabled -}}
{{- $limits := default dict $r.limits -}}
{{- $_ := set $limits .Values.gpu.resource (.Values.gpu.count | toString) -}}
{{- $_ := set $r "limits" $limits -}}
{{- end -}}
resources:
{{ toYaml $r | indent 2 }}
{{- end -}}

{{- define "llmserve.gpuScheduling" -}}
{{- if .Values.gpu.enabled }}
{{- with .Values.gpu.nodeSelector }}
nodeSelector:
{{ toYaml . | indent 2 }}
{{- end }}
{{- with .Values.gpu.tolerations }}
tolerations:
{{ toYaml . | indent 2 }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "llmserve.mounts" -}}
volumeMounts:
{{- if .model }}
  - name: models
    mountPath: /models
    readOnly: true
{{- end }}
  - name: cache
    mountPath: /home/llmserve/.cache
  - name: tmp
    mountPath: /tmp
{{- end -}}

{{- define "llmserve.volumes" -}}
volumes:
{{- if .model }}
  - name: models
    persistentVolumeClaim:
      claimName: {{ .ctx.Values.model.pvc }}
      readOnly: true
{{- end }}
  - name: cache
    emptyDir: {}
  - name: tmp
    emptyDir: {}
{{- end -}}

{{/* The pod spec of a head: `llmserve head`, no model. .discovery: extra args. */}}
{{- define "llmserve.headPod" -}}
{{- $ := .ctx -}}
terminationGracePeriodSeconds: {{ include "llmserve.grace" $ }}
{{ include "llmserve.podSecurity" $ }}
containers:
  - name: head
    image: {{ include "llmserve.headImage" $ }}
    imagePullPolicy: {{ $.Values.image.pullPolicy }}
    args:
      - head
{{ include "llmserve.commonArgs" $ | indent 6 }}
      - --worker-port=8090
      - --model-name={{ $.Values.model.name }}
      - --max-migrations={{ $.Values.head.maxMigrations }}
{{- range .discovery }}
      - {{ . }}
{{- end }}
{{- range $.Values.head.extraArgs }}
      - {{ . | quote }}
{{- end }}
    ports:
{{ include "llmserve.ports" (dict "worker" false) | indent 6 }}
{{ include "llmserve.headProbes" $ | indent 4 }}
{{ include "llmserve.lifecycle" $ | indent 4 }}
    resources:
{{ toYaml $.Values.resources.head | indent 6 }}
{{ include "llmserve.containerSecurity" $ | indent 4 }}
{{ include "llmserve.mounts" (dict "model" false) | indent 4 }}
{{ include "llmserve.volumes" (dict "ctx" $ "model" false) }}
{{- end -}}

{{/* The pod spec of a worker: `llmserve worker --role .role`; with .byIndex,
the role is prefill for LWS_WORKER_INDEX <= .prefill, else decode. */}}
{{- define "llmserve.workerPod" -}}
{{- $ := .ctx -}}
terminationGracePeriodSeconds: {{ include "llmserve.grace" $ }}
{{ include "llmserve.podSecurity" $ }}
{{- include "llmserve.gpuScheduling" $ }}
containers:
  - name: worker
    image: {{ include "llmserve.image" $ }}
    imagePullPolicy: {{ $.Values.image.pullPolicy }}
{{- if .byIndex }}
    # The role from the worker's index in its group (1..size-1).
    command:
      - /bin/sh
      - -c
      - |
        role=decode
        if [ "$LWS_WORKER_INDEX" -le "$PREFILL_WORKERS" ]; then role=prefill; fi
        exec /opt/llmserve/bin/llmserve worker --role="$role" "$@"
      - llmserve-worker
    env:
      - name: PREFILL_WORKERS
        value: {{ .prefill | quote }}
    args:
{{- else }}
    args:
      - worker
      - --role={{ .role }}
{{- end }}
{{ include "llmserve.commonArgs" $ | indent 6 }}
      - --worker-port=8090
{{ include "llmserve.modelArgs" $ | indent 6 }}
    ports:
{{ include "llmserve.ports" (dict "worker" true) | indent 6 }}
{{ include "llmserve.probes" $ | indent 4 }}
{{ include "llmserve.lifecycle" $ | indent 4 }}
{{ include "llmserve.workerResources" $ | indent 4 }}
{{ include "llmserve.containerSecurity" $ | indent 4 }}
{{ include "llmserve.mounts" (dict "model" true) | indent 4 }}
{{ include "llmserve.volumes" (dict "ctx" $ "model" true) }}
{{- end -}}

{{/* A Service in front of the pods of one component (http and grpc). */}}
{{- define "llmserve.service" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ .name }}
  labels:
{{ include "llmserve.labels" .ctx | indent 4 }}
spec:
  selector:
{{ .selector | indent 4 }}
  ports:
    - name: http
      port: 8080
      targetPort: http
    - name: grpc
      port: 8081
      targetPort: grpc
      appProtocol: grpc
{{- end -}}
