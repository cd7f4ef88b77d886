{{/*
Helpers of the Audita chart. Every stage pod is built by "audita.podSpec": an init
container renders /etc/audita (in-memory volume) from the ConfigMap, the registries and
the Secrets, then the stage runs as `audita stage NAME --config /etc/audita/audita.toml`.
Only the sealer's pod mounts the log key Secret, and only into its init container.
*/}}

{{- define "audita.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "audita.fullname" -}}
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

{{- define "audita.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; call with (dict "root" $ "component" "sealer"). */}}
{{- define "audita.labels" -}}
helm.sh/chart: {{ include "audita.chart" .root }}
{{ include "audita.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: audita
{{- end -}}

{{- define "audita.selectorLabels" -}}
app.kubernetes.io/name: {{ include "audita.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{- define "audita.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "audita.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "audita.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "audita.renderImage" -}}
{{- if .Values.renderImage.repository -}}
{{- printf "%s:%s" .Values.renderImage.repository (.Values.renderImage.tag | default .Chart.AppVersion) -}}
{{- else -}}
{{- include "audita.image" . -}}
{{- end -}}
{{- end -}}

{{/* Name of the Secret holding the log key. */}}
{{- define "audita.logKeySecret" -}}
{{- if .Values.log.key.existingSecret -}}
{{- .Values.log.key.existingSecret -}}
{{- else if .Values.log.key.insecureValue -}}
{{- printf "%s-log-key" (include "audita.fullname" .) -}}
{{- else -}}
{{- fail "log.key.existingSecret is required: create a Secret holding the log key (audita init's keys/log.key), e.g. kubectl create secret generic audita-log-key --from-file=log.key=DIR/keys/log.key" -}}
{{- end -}}
{{- end -}}

{{/* Name of the Secret holding the Kafka SASL password ("" when none). */}}
{{- define "audita.saslSecret" -}}
{{- if .Values.kafka.sasl.existingSecret -}}
{{- .Values.kafka.sasl.existingSecret -}}
{{- else if .Values.kafka.sasl.insecurePassword -}}
{{- printf "%s-kafka-sasl" (include "audita.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "audita.registryConfigMap" -}}
{{- if .Values.registry.existingConfigMap -}}
{{- .Values.registry.existingConfigMap -}}
{{- else -}}
{{- printf "%s-registry" (include "audita.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* Checks on values that no template would otherwise catch. */}}
{{- define "audita.validate" -}}
{{- $protocols := list "PLAINTEXT" "SSL" "SASL_PLAINTEXT" "SASL_SSL" -}}
{{- if not (has .Values.kafka.securityProtocol $protocols) -}}
{{- fail (printf "kafka.securityProtocol %q: want one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL" .Values.kafka.securityProtocol) -}}
{{- end -}}
{{- $sasl := hasPrefix "SASL_" .Values.kafka.securityProtocol -}}
{{- if and $sasl (not .Values.kafka.sasl.mechanism) -}}
{{- fail (printf "kafka.sasl.mechanism is required with kafka.securityProtocol %s" .Values.kafka.securityProtocol) -}}
{{- end -}}
{{- if and $sasl (not (include "audita.saslSecret" .)) (ne .Values.kafka.sasl.mechanism "OAUTHBEARER") (ne .Values.kafka.sasl.mechanism "GSSAPI") -}}
{{- fail "kafka.sasl.existingSecret is required for a SASL password (a Secret holding it under kafka.sasl.secretKey)" -}}
{{- end -}}
{{- if and (not $sasl) (or .Values.kafka.sasl.mechanism .Values.kafka.sasl.username (include "audita.saslSecret" .)) -}}
{{- fail (printf "kafka.sasl.* is set but kafka.securityProtocol %s does not use SASL" .Values.kafka.securityProtocol) -}}
{{- end -}}
{{- if and .Values.kafka.tls.existingSecret (not (hasSuffix "SSL" .Values.kafka.securityProtocol)) -}}
{{- fail (printf "kafka.tls.existingSecret is set but kafka.securityProtocol %s does not use TLS" .Values.kafka.securityProtocol) -}}
{{- end -}}
{{- if ne (empty .Values.kafka.tls.certKey) (empty .Values.kafka.tls.keyKey) -}}
{{- fail "kafka.tls.certKey and kafka.tls.keyKey go together (a client certificate and its key)" -}}
{{- end -}}
{{- if and .Values.kafka.tls.certKey (not .Values.kafka.tls.existingSecret) -}}
{{- fail "kafka.tls.certKey needs kafka.tls.existingSecret" -}}
{{- end -}}
{{- $managed := list "bootstrap.servers" "security.protocol" "sasl.mechanisms" "sasl.mechanism" "sasl.username" "ssl.ca.location" "ssl.certificate.location" "ssl.key.location" -}}
{{- $fixed := list "enable.idempotence" "acks" "request.required.acks" "enable.auto.commit" "enable.auto.offset.store" "auto.offset.reset" "group.id" "isolation.level" -}}
{{- $secret := list "sasl.password" "ssl.key.password" "ssl.keystore.password" "sasl.oauthbearer.client.secret" "ssl.key.pem" "ssl_key" -}}
{{- range $k, $v := .Values.kafka.settings -}}
{{- if has $k $secret -}}
{{- fail (printf "kafka.settings.%s: a secret does not belong in values (the ConfigMap is readable): use kafka.sasl.existingSecret / kafka.tls.existingSecret" $k) -}}
{{- end -}}
{{- if has $k $fixed -}}
{{- fail (printf "kafka.settings.%s: fixed by Audita (its durability and exactly-once guarantees rest on it)" $k) -}}
{{- end -}}
{{- if has $k $managed -}}
{{- fail (printf "kafka.settings.%s: set by the chart from kafka.* values; set those instead" $k) -}}
{{- end -}}
{{- if or (kindIs "map" $v) (kindIs "slice" $v) -}}
{{- fail (printf "kafka.settings.%s: want a string, number or boolean" $k) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.monitor.enabled (not .Values.registry.existingConfigMap) (not .Values.registry.predicates) -}}
{{- fail "monitor.enabled needs registry.predicates (the predicate file's text) or a registry.existingConfigMap holding predicates.json" -}}
{{- end -}}
{{- if and .Values.notifier.enabled .Values.notifier.basicAuth.username (not .Values.notifier.basicAuth.existingSecret) -}}
{{- fail "notifier.basicAuth.existingSecret is required with notifier.basicAuth.username (a Secret holding the password under notifier.basicAuth.secretKey)" -}}
{{- end -}}
{{- if and .Values.log.key.existingSecret .Values.log.key.insecureValue -}}
{{- fail "log.key: set existingSecret or insecureValue (tests only), not both" -}}
{{- end -}}
{{- if and .Values.kafka.sasl.existingSecret .Values.kafka.sasl.insecurePassword -}}
{{- fail "kafka.sasl: set existingSecret or insecurePassword (tests only), not both" -}}
{{- end -}}
{{- if and (not .Values.registry.existingConfigMap) (or (not .Values.registry.principals) (not .Values.registry.duties)) -}}
{{- fail "registry: set registry.existingConfigMap, or both registry.principals and registry.duties (e.g. --set-file registry.principals=DIR/principals.json --set-file registry.duties=DIR/duties.json)" -}}
{{- end -}}
{{- end -}}

{{/* A TOML basic string (JSON string escapes are valid TOML escapes). */}}
{{- define "audita.toml.str" -}}
{{- . | toString | toJson -}}
{{- end -}}

{{/* A librdkafka setting as a TOML string: whole numbers without an exponent. */}}
{{- define "audita.toml.setting" -}}
{{- if and (kindIs "float64" .) (eq (float64 (int64 .)) .) -}}
{{- int64 . | toString | toJson -}}
{{- else -}}
{{- . | toString | toJson -}}
{{- end -}}
{{- end -}}

{{/*
The pod template of one stage. Call with (dict "root" $ "component" NAME "args" LIST
"sealer" BOOL "data" BOOL): `sealer` mounts the log key Secret into the init container;
`data` mounts the PVC `data` at /data; `notifier` mounts Alertmanager's CA and
basic-auth Secrets into the stage (the notifier only).
*/}}
{{- define "audita.podTemplate" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $sasl := include "audita.saslSecret" $root -}}
metadata:
  labels:
    {{- include "audita.labels" (dict "root" $root "component" .component) | nindent 4 }}
    {{- with $v.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
    {{- if $v.metrics.podAnnotations }}
    prometheus.io/scrape: "true"
    prometheus.io/port: {{ $v.metrics.port | quote }}
    prometheus.io/path: /metrics
    {{- end }}
    {{- with $v.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "audita.serviceAccountName" $root }}
  automountServiceAccountToken: false
  enableServiceLinks: false
  terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds }}
  securityContext:
    {{- toYaml $v.podSecurityContext | nindent 4 }}
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  initContainers:
    - name: render-config
      image: {{ include "audita.renderImage" $root | quote }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      command: ["/bin/sh", "/etc/audita-src/render.sh"]
      env:
        - name: AUDITA_CONFIG_SRC
          value: /etc/audita-src
        - name: AUDITA_REGISTRY_SRC
          value: /etc/audita-registry
        - name: AUDITA_CONFIG_OUT
          value: /etc/audita
        {{- if $sasl }}
        - name: AUDITA_KAFKA_SASL_PASSWORD_FILE
          value: /var/run/secrets/audita/kafka-sasl/password
        {{- end }}
        {{- if .sealer }}
        - name: AUDITA_LOG_KEY_FILE
          value: /var/run/secrets/audita/log-key/log.key
        {{- end }}
      securityContext:
        {{- toYaml $v.containerSecurityContext | nindent 8 }}
      resources:
        {{- toYaml $v.renderResources | nindent 8 }}
      volumeMounts:
        - {name: config-src, mountPath: /etc/audita-src, readOnly: true}
        - {name: registry, mountPath: /etc/audita-registry, readOnly: true}
        - {name: config, mountPath: /etc/audita}
        {{- if $sasl }}
        - {name: kafka-sasl, mountPath: /var/run/secrets/audita/kafka-sasl, readOnly: true}
        {{- end }}
        {{- if .sealer }}
        - {name: log-key, mountPath: /var/run/secrets/audita/log-key, readOnly: true}
        {{- end }}
  containers:
    - name: {{ .component }}
      image: {{ include "audita.image" $root | quote }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      args:
        - stage
        - {{ .component }}
        - --config
        - /etc/audita/audita.toml
        - --metrics
        - {{ include "audita.metricsAddr" $root | quote }}
        {{- range .args }}
        - {{ . | quote }}
        {{- end }}
      ports:
        - {name: metrics, containerPort: {{ $v.metrics.port }}, protocol: TCP}
        {{- if .clusterPort }}
        - {name: cluster, containerPort: {{ .clusterPort }}, protocol: TCP}
        {{- end }}
      startupProbe:
        httpGet: {path: {{ $v.probes.liveness.path }}, port: metrics}
        periodSeconds: {{ $v.probes.startup.periodSeconds }}
        timeoutSeconds: {{ $v.probes.startup.timeoutSeconds }}
        failureThreshold: {{ $v.probes.startup.failureThreshold }}
      livenessProbe:
        httpGet: {path: {{ $v.probes.liveness.path }}, port: metrics}
        initialDelaySeconds: {{ $v.probes.liveness.initialDelaySeconds }}
        periodSeconds: {{ $v.probes.liveness.periodSeconds }}
        timeoutSeconds: {{ $v.probes.liveness.timeoutSeconds }}
        failureThreshold: {{ $v.probes.liveness.failureThreshold }}
      readinessProbe:
        httpGet: {path: {{ $v.probes.readiness.path }}, port: metrics}
        initialDelaySeconds: {{ $v.probes.readiness.initialDelaySeconds }}
        periodSeconds: {{ $v.probes.readiness.periodSeconds }}
        timeoutSeconds: {{ $v.probes.readiness.timeoutSeconds }}
        failureThreshold: {{ $v.probes.readiness.failureThreshold }}
      securityContext:
        {{- toYaml $v.containerSecurityContext | nindent 8 }}
      resources:
        {{- toYaml .resources | nindent 8 }}
      volumeMounts:
        - {name: config, mountPath: /etc/audita, readOnly: true}
        - {name: tmp, mountPath: /tmp}
        {{- if .data }}
        - {name: data, mountPath: /data}
        {{- end }}
        {{- if $v.kafka.tls.existingSecret }}
        - {name: kafka-tls, mountPath: /var/run/secrets/audita/kafka-tls, readOnly: true}
        {{- end }}
        {{- if and .notifier $v.notifier.tls.existingSecret }}
        - {name: alertmanager-tls, mountPath: /var/run/secrets/audita/alertmanager-tls, readOnly: true}
        {{- end }}
        {{- if and .notifier $v.notifier.basicAuth.username }}
        - {name: alertmanager-auth, mountPath: /var/run/secrets/audita/alertmanager-auth, readOnly: true}
        {{- end }}
  volumes:
    - name: config-src
      configMap:
        name: {{ include "audita.fullname" $root }}-config
    - name: registry
      configMap:
        name: {{ include "audita.registryConfigMap" $root }}
        items:
          - {key: principals.json, path: principals.json}
          - {key: duties.json, path: duties.json}
          {{- if $v.monitor.enabled }}
          - {key: predicates.json, path: predicates.json}
          {{- end }}
    - name: config
      emptyDir:
        medium: Memory
        sizeLimit: {{ $v.configVolumeSizeLimit }}
    - name: tmp
      emptyDir:
        sizeLimit: {{ .tmpSize | default "64Mi" }}
    {{- if $sasl }}
    - name: kafka-sasl
      secret:
        secretName: {{ $sasl }}
        defaultMode: 288  # 0440: group-readable, so the non-root user (fsGroup) can read it
        items:
          - {key: {{ $v.kafka.sasl.secretKey }}, path: password}
    {{- end }}
    {{- if .sealer }}
    - name: log-key
      secret:
        secretName: {{ include "audita.logKeySecret" $root }}
        defaultMode: 288  # 0440: group-readable, so the non-root user (fsGroup) can read it
        items:
          - {key: {{ $v.log.key.secretKey }}, path: log.key}
    {{- end }}
    {{- if $v.kafka.tls.existingSecret }}
    - name: kafka-tls
      secret:
        secretName: {{ $v.kafka.tls.existingSecret }}
        defaultMode: 288  # 0440: group-readable, so the non-root user (fsGroup) can read it
    {{- end }}
    {{- if and .notifier $v.notifier.tls.existingSecret }}
    - name: alertmanager-tls
      secret:
        secretName: {{ $v.notifier.tls.existingSecret }}
        defaultMode: 288  # 0440: group-readable, so the non-root user (fsGroup) can read it
        items:
          - {key: {{ $v.notifier.tls.caKey }}, path: {{ $v.notifier.tls.caKey }}}
    {{- end }}
    {{- if and .notifier $v.notifier.basicAuth.username }}
    - name: alertmanager-auth
      secret:
        secretName: {{ $v.notifier.basicAuth.existingSecret }}
        defaultMode: 288  # 0440: group-readable, so the non-root user (fsGroup) can read it
        items:
          - {key: {{ $v.notifier.basicAuth.secretKey }}, path: password}
    {{- end }}
  {{- with $v.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{- define "audita.metricsAddr" -}}
{{- if contains ":" .Values.metrics.bindAddress -}}
{{- printf "[%s]:%v" .Values.metrics.bindAddress .Values.metrics.port -}}
{{- else -}}
{{- printf "%s:%v" .Values.metrics.bindAddress .Values.metrics.port -}}
{{- end -}}
{{- end -}}
