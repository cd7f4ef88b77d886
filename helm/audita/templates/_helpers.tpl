{{- define "audita.args" -}}
- --bootstrap
- {{ .Values.kafka.bootstrap | quote }}
- --prefix
- {{ .Values.kafka.topicPrefix | quote }}
- --cells
- {{ .Values.fleet.cells | quote }}
- --seed
- {{ .Values.fleet.seed | quote }}
- --metrics
- "0.0.0.0:{{ .Values.metrics.port }}"
{{- end -}}
{{- define "audita.podAnnotations" -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metrics.port | quote }}
prometheus.io/path: /metrics
{{- end -}}
