{{/* Chart name, truncated to the 63 characters of a label value. */}}
{{- define "kafka-lso-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the release name, unless it already contains the chart name. */}}
{{- define "kafka-lso-exporter.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kafka-lso-exporter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kafka-lso-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kafka-lso-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The labels of every object: the chart's own, then commonLabels. Call with the root
context; an object with labels of its own uses kafka-lso-exporter.labelsWith.
*/}}
{{- define "kafka-lso-exporter.labels" -}}
{{- include "kafka-lso-exporter.labelsWith" (list . dict) }}
{{- end }}

{{/*
The chart's own labels, then commonLabels and the object's own labels merged (the
object's win over commonLabels, so that no key is written twice). commonLabels may not
name a label the chart sets: two of them select the pods. Call with (list $ $objectLabels).
*/}}
{{- define "kafka-lso-exporter.labelsWith" -}}
{{- $root := index . 0 }}
{{- $own := list "helm.sh/chart" "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" }}
{{- range $key, $_ := $root.Values.commonLabels | default dict }}
{{- if has $key $own }}
{{- fail (printf "commonLabels.%s: the chart sets this label itself (%s)" $key (join ", " $own)) }}
{{- end }}
{{- end -}}
helm.sh/chart: {{ include "kafka-lso-exporter.chart" $root }}
{{ include "kafka-lso-exporter.selectorLabels" $root }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
{{- with merge (deepCopy (index . 1 | default dict)) ($root.Values.commonLabels | default dict) }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The labels of the pods: the selector's, then commonLabels and podLabels merged (podLabels
win).
*/}}
{{- define "kafka-lso-exporter.podLabels" -}}
{{ include "kafka-lso-exporter.selectorLabels" . }}
{{- with merge (deepCopy (.Values.podLabels | default dict)) (.Values.commonLabels | default dict) }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The Service's labels as a YAML map, for the ServiceMonitor's jobLabel (the job is the value
of that label of the Service).
*/}}
{{- define "kafka-lso-exporter.serviceLabels" -}}
{{- include "kafka-lso-exporter.labelsWith" (list . (.Values.service.labels | default dict)) }}
{{- end }}

{{/*
imagePullSecrets of the pod: global.imagePullSecrets (shared by the charts of an umbrella
release), then imagePullSecrets; each entry a {name} or a bare name; each name once.
Renders a YAML list, or nothing.
*/}}
{{- define "kafka-lso-exporter.imagePullSecrets" -}}
{{- $names := list }}
{{- range concat (dig "imagePullSecrets" list (.Values.global | default dict)) (.Values.imagePullSecrets | default list) }}
{{- $name := kindIs "map" . | ternary (get (kindIs "map" . | ternary . dict) "name") . | toString }}
{{- if not (has $name $names) }}
{{- $names = append $names $name }}
{{- end }}
{{- end }}
{{- $secrets := list }}
{{- range $names }}
{{- $secrets = append $secrets (dict "name" .) }}
{{- end }}
{{- with $secrets }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
The settings of the ServiceMonitor (kind "serviceMonitor") or PodMonitor ("podMonitor"),
as YAML: prometheus.<kind>, and where it leaves a key empty (false, "", 0, [] or {}, each
key's default), the same key of the deprecated top-level <kind> of chart 0.1.0 (whose
`labels` is `additionalLabels` now). A key set in both places, differently, fails the
render. Call with (list $ kind).
*/}}
{{- define "kafka-lso-exporter.monitorValues" -}}
{{- $root := index . 0 }}
{{- $kind := index . 1 }}
{{- $current := deepCopy (get ($root.Values.prometheus | default dict) $kind | default dict) }}
{{- range $key, $value := get $root.Values $kind | default dict }}
{{- $newKey := eq $key "labels" | ternary "additionalLabels" $key }}
{{- $now := get $current $newKey }}
{{- if and (not (empty $now)) (not (empty $value)) (ne (toYaml $now) (toYaml $value)) }}
{{- fail (printf "%s.%s (deprecated) and prometheus.%s.%s are both set, differently: keep prometheus.%s.%s and remove %s.%s" $kind $key $kind $newKey $kind $newKey $kind $key) }}
{{- end }}
{{- if empty $now }}
{{- $_ := set $current $newKey $value }}
{{- end }}
{{- end }}
{{- toYaml $current }}
{{- end }}

{{/* The key that turned a monitor on, for messages: prometheus.<kind>.enabled or the deprecated one. */}}
{{- define "kafka-lso-exporter.monitorSwitch" -}}
{{- $root := index . 0 }}
{{- $kind := index . 1 }}
{{- if dig $kind "enabled" false ($root.Values.prometheus | default dict) }}
{{- printf "prometheus.%s.enabled" $kind }}
{{- else }}
{{- printf "%s.enabled" $kind }}
{{- end }}
{{- end }}

{{/*
The labels of the PrometheusRule: prometheusRule.additionalLabels, or the deprecated
prometheusRule.labels; both, differently, fail the render. Renders a YAML map.
*/}}
{{- define "kafka-lso-exporter.ruleLabels" -}}
{{- $new := .Values.prometheusRule.additionalLabels | default dict }}
{{- $old := .Values.prometheusRule.labels | default dict }}
{{- if and $new $old (ne (toYaml $new) (toYaml $old)) }}
{{- fail "prometheusRule.labels (deprecated) and prometheusRule.additionalLabels are both set, differently: keep prometheusRule.additionalLabels and remove prometheusRule.labels" }}
{{- end }}
{{- toYaml ($new | default $old) }}
{{- end }}

{{/*
The deprecated keys the values use, one "old -> new" per line; empty when none.
*/}}
{{- define "kafka-lso-exporter.deprecations" -}}
{{- $lines := list }}
{{- range $kind := list "serviceMonitor" "podMonitor" }}
{{- range $key, $_ := get $.Values $kind | default dict }}
{{- $lines = append $lines (printf "%s.%s -> prometheus.%s.%s" $kind $key $kind (eq $key "labels" | ternary "additionalLabels" $key)) }}
{{- end }}
{{- end }}
{{- if hasKey (.Values.prometheusRule | default dict) "labels" }}
{{- $lines = append $lines "prometheusRule.labels -> prometheusRule.additionalLabels" }}
{{- end }}
{{- join "\n" $lines }}
{{- end }}

{{/*
Fails the render when the cluster does not serve an object's API (its CRD is not
installed): the install would fail at apply with "no matches for kind", after the other
objects were created. Call with (list $ "group/version" "Kind" SWITCH OWNER): SWITCH the
value that turned the object on, OWNER what ships the CRD ("the Prometheus Operator").
*/}}
{{- define "kafka-lso-exporter.requireApi" -}}
{{- $root := index . 0 }}
{{- $api := printf "%s/%s" (index . 1) (index . 2) }}
{{- if not ($root.Capabilities.APIVersions.Has $api) }}
{{- fail (printf "%s=true, but the cluster has no %s CRD (%s): install %s's CRDs first, or set %s=false. (helm template, which sees no cluster: --api-versions %s)" (index . 3) (index . 2) $api (index . 4) (index . 3) $api) }}
{{- end }}
{{- end }}

{{/*
Scrape limits of a ServiceMonitor or PodMonitor spec, those set above 0. Call with the
monitor's settings.
*/}}
{{- define "kafka-lso-exporter.scrapeLimits" -}}
{{- range $key := list "sampleLimit" "targetLimit" "labelLimit" "labelNameLengthLimit" "labelValueLengthLimit" }}
{{- with get $ $key }}
{{- if gt (int .) 0 }}
{{ $key }}: {{ int . }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kafka-lso-exporter.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}
{{- end }}

{{/* The port of `listen` (":9745", "0.0.0.0:9745", "[::]:9745"). */}}
{{- define "kafka-lso-exporter.port" -}}
{{- $port := regexFind "[0-9]+$" (toString .Values.listen) }}
{{- if not $port }}
{{- fail (printf "listen %q: expected host:port" .Values.listen) }}
{{- end }}
{{- $port }}
{{- end }}

{{/* Where the TLS Secret of cluster <index> is mounted. Call with (list $cluster $index). */}}
{{- define "kafka-lso-exporter.tlsMountPath" -}}
{{- $c := index . 0 }}
{{- $i := index . 1 }}
{{- $c.tls.mountPath | default (printf "/etc/kafka-lso-exporter/tls/%d" (int $i)) | trimSuffix "/" }}
{{- end }}

{{/*
The ServiceAccount the pod runs as: serviceAccount.name, else serviceAccountName (the
chart's earlier key, still honoured), else the release's full name when
serviceAccount.create, else none (the namespace's default).
*/}}
{{- define "kafka-lso-exporter.serviceAccountName" -}}
{{- $sa := .Values.serviceAccount | default dict }}
{{- if $sa.name }}
{{- $sa.name }}
{{- else if .Values.serviceAccountName }}
{{- .Values.serviceAccountName }}
{{- else if $sa.create }}
{{- include "kafka-lso-exporter.fullname" . }}
{{- end }}
{{- end }}

{{/*
The files of cluster <index> that come from Secrets (secretFiles) and from a projected
service-account token (serviceAccountToken), as YAML:

  volumes:    [{name, mountPath, secret: {secretName, items}} | {name, mountPath, projected}]
  client:     {property: path}  properties whose value is a file's path
  clientFiles: {property: path} properties the exporter reads from a file (client_files)

A property whose value librdkafka or the exporter reads as a path (sasl.kerberos.keytab,
sasl.oauthbearer.token.file, any *.location) is set to the mounted file; any other one goes
to client_files, whose file the exporter reads at startup. A property set in two places
(client, secretClient, existingSecret, tls, secretFiles, serviceAccountToken) fails the
render. Call with (list $cluster $index).
*/}}
{{- define "kafka-lso-exporter.clusterFiles" -}}
{{- $c := index . 0 }}
{{- $i := int (index . 1) }}
{{- $where := printf "clusters[%d] (%s)" $i $c.name }}
{{- /* where each property is already set, to refuse a second source */}}
{{- $taken := dict }}
{{- range $key, $_ := $c.client | default dict }}
{{- $_ := set $taken $key "client" }}
{{- end }}
{{- range $key, $_ := $c.secretClient | default dict }}
{{- if hasKey $taken $key }}
{{- fail (printf "%s: secretClient: %s is already set by %s" $where $key (get $taken $key)) }}
{{- end }}
{{- $_ := set $taken $key "secretClient" }}
{{- end }}
{{- if and $c.existingSecret $c.existingSecret.name }}
{{- if hasKey $taken "sasl.password" }}
{{- fail (printf "%s: existingSecret: sasl.password is already set by %s (set it in one place; a password in client ends up in the ConfigMap)" $where (get $taken "sasl.password")) }}
{{- end }}
{{- $_ := set $taken "sasl.password" "existingSecret" }}
{{- end }}
{{- if and $c.tls $c.tls.secretName }}
{{- range $field, $property := dict "ca" "ssl.ca.location" "cert" "ssl.certificate.location" "key" "ssl.key.location" }}
{{- if and (get $c.tls $field) (not (hasKey $taken $property)) }}
{{- $_ := set $taken $property "tls" }}
{{- end }}
{{- end }}
{{- end }}
{{- $client := dict }}
{{- $clientFiles := dict }}
{{- $keysBySecret := dict }}
{{- range $j, $f := $c.secretFiles | default list }}
{{- if not (and $f.secretName $f.key $f.property) }}
{{- fail (printf "%s: secretFiles[%d] needs secretName, key and property" $where $j) }}
{{- end }}
{{- if hasKey $taken $f.property }}
{{- fail (printf "%s: secretFiles[%d]: %s is already set by %s" $where $j $f.property (get $taken $f.property)) }}
{{- end }}
{{- $_ := set $taken $f.property "secretFiles" }}
{{- $keys := get $keysBySecret $f.secretName | default list }}
{{- $_ := set $keysBySecret $f.secretName (append $keys $f.key | uniq) }}
{{- $path := printf "/etc/kafka-lso-exporter/secrets/%d/%s/%s" $i $f.secretName $f.key }}
{{- if or (has $f.property (list "sasl.kerberos.keytab" "sasl.oauthbearer.token.file")) (hasSuffix ".location" $f.property) }}
{{- $_ := set $client $f.property $path }}
{{- else }}
{{- $_ := set $clientFiles $f.property $path }}
{{- end }}
{{- end }}
{{- $volumes := list }}
{{- range $n, $secretName := keys $keysBySecret | sortAlpha }}
{{- $items := list }}
{{- range $key := get $keysBySecret $secretName }}
{{- $items = append $items (dict "key" $key "path" $key) }}
{{- end }}
{{- $volumes = append $volumes (dict "name" (printf "secret-%d-%d" $i $n) "mountPath" (printf "/etc/kafka-lso-exporter/secrets/%d/%s" $i $secretName) "secret" (dict "secretName" $secretName "items" $items)) }}
{{- end }}
{{- with $c.serviceAccountToken }}
{{- $property := "sasl.oauthbearer.token.file" }}
{{- if hasKey $taken $property }}
{{- fail (printf "%s: serviceAccountToken: %s is already set by %s" $where $property (get $taken $property)) }}
{{- end }}
{{- $mechanism := get ($c.client | default dict) "sasl.mechanism" | default (get ($c.client | default dict) "sasl.mechanisms") | default "" | toString | upper }}
{{- if ne $mechanism "OAUTHBEARER" }}
{{- fail (printf "%s: serviceAccountToken needs client sasl.mechanism OAUTHBEARER (the token is an OAUTHBEARER token file)" $where) }}
{{- end }}
{{- $token := dict "path" "token" "expirationSeconds" (int (.expirationSeconds | default 3600)) }}
{{- with .audience }}
{{- $_ := set $token "audience" . }}
{{- end }}
{{- $mountPath := printf "/var/run/secrets/kafka-lso-exporter/%d" $i }}
{{- $volumes = append $volumes (dict "name" (printf "token-%d" $i) "mountPath" $mountPath "projected" (dict "sources" (list (dict "serviceAccountToken" $token)))) }}
{{- $_ := set $client $property (printf "%s/token" $mountPath) }}
{{- end }}
{{- dict "volumes" $volumes "client" $client "clientFiles" $clientFiles | toYaml }}
{{- end }}

{{/*
A duration of the exporter's config ("15s", "500ms", "1m30s", "1h") in seconds, as a
number: an integer when whole. Call with the duration string.
*/}}
{{- define "kafka-lso-exporter.durationSeconds" -}}
{{- $d := toString . | trim }}
{{- $parts := regexFindAll "[0-9]+(\\.[0-9]+)?(ms|s|m|h)" $d -1 }}
{{- if or (not $parts) (ne (join "" $parts) $d) }}
{{- fail (printf "duration %q: write it as e.g. \"15s\", \"500ms\", \"1m\" or \"1m30s\"" $d) }}
{{- end }}
{{- $seconds := 0.0 }}
{{- range $parts }}
{{- $unit := regexFind "(ms|s|m|h)$" . }}
{{- $n := float64 (trimSuffix $unit .) }}
{{- $factor := get (dict "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0) $unit }}
{{- $seconds = addf $seconds (mulf $n $factor) }}
{{- end }}
{{- include "kafka-lso-exporter.number" $seconds }}
{{- end }}

{{/* A number as PromQL reads it: 5000, not 5e+03; 0.5 stays 0.5. */}}
{{- define "kafka-lso-exporter.number" -}}
{{- $f := float64 . }}
{{- if eq $f (floor $f) }}
{{- printf "%d" (int64 $f) }}
{{- else }}
{{- printf "%v" $f }}
{{- end }}
{{- end }}

{{/*
Words for a number of seconds, as the mixin's annotations say them (lib/text.libsonnet):
"15 minutes" for 900, "2 hours" for 7200, "90 seconds" for 90, "1 minute" for 60.
*/}}
{{- define "kafka-lso-exporter.secondsText" -}}
{{- $n := float64 . }}
{{- $count := $n }}
{{- $unit := "second" }}
{{- if eq $n (floor $n) }}
{{- $i := int64 $n }}
{{- if and (ge $i 3600) (eq (mod $i 3600) 0) }}
{{- $count = float64 (div $i 3600) }}
{{- $unit = "hour" }}
{{- else if and (ge $i 60) (eq (mod $i 60) 0) }}
{{- $count = float64 (div $i 60) }}
{{- $unit = "minute" }}
{{- end }}
{{- end }}
{{- printf "%s %s%s" (include "kafka-lso-exporter.number" $count) $unit (eq $count 1.0 | ternary "" "s") }}
{{- end }}

{{/*
Words for a Prometheus duration of one unit, as the mixin's annotations say them: "5
minutes" for 5m, "1 hour" for 1h; any other duration ("1h30m") as it is.
*/}}
{{- define "kafka-lso-exporter.durationText" -}}
{{- $d := toString . }}
{{- if regexMatch "^[0-9]+[smhd]$" $d }}
{{- $n := trimSuffix (regexFind "[smhd]$" $d) $d | int64 }}
{{- $unit := get (dict "s" "second" "m" "minute" "h" "hour" "d" "day") (regexFind "[smhd]$" $d) }}
{{- printf "%d %s%s" $n $unit (eq $n 1 | ternary "" "s") }}
{{- else }}
{{- $d }}
{{- end }}
{{- end }}

{{/*
The matchers of KafkaLsoExporterAbsent: prometheusRule.exporterSelector, else this
release's scrape job as the Prometheus Operator names it (a ServiceMonitor's job is the
Service's name, a PodMonitor's <namespace>/<name>; with jobLabel, the value of that label
of the Service or pod where it has one) with the pods' namespace, else none.
*/}}
{{- define "kafka-lso-exporter.exporterSelector" -}}
{{- $serviceMonitor := include "kafka-lso-exporter.monitorValues" (list . "serviceMonitor") | fromYaml }}
{{- $podMonitor := include "kafka-lso-exporter.monitorValues" (list . "podMonitor") | fromYaml }}
{{- if .Values.prometheusRule.exporterSelector }}
{{- .Values.prometheusRule.exporterSelector }}
{{- else if $serviceMonitor.enabled }}
{{- $labels := include "kafka-lso-exporter.serviceLabels" . | fromYaml }}
{{- $job := get $labels ($serviceMonitor.jobLabel | default "") | default (include "kafka-lso-exporter.fullname" .) }}
{{- printf "job=%q, namespace=%q" (toString $job) .Release.Namespace }}
{{- else if $podMonitor.enabled }}
{{- $labels := include "kafka-lso-exporter.podLabels" . | fromYaml }}
{{- $job := get $labels ($podMonitor.jobLabel | default "") | default (printf "%s/%s" ($podMonitor.namespace | default .Release.Namespace) (include "kafka-lso-exporter.fullname" .)) }}
{{- printf "job=%q, namespace=%q" (toString $job) .Release.Namespace }}
{{- end }}
{{- end }}

{{/*
The selector the mixin writes into every query of the rules and dashboards (its
kafkaLsoExporterSelector), which the chart replaces by kafka-lso-exporter.exporterSelector.
*/}}
{{- define "kafka-lso-exporter.mixinSelector" -}}
job=~".*kafka-lso-exporter.*"
{{- end }}

{{/*
A dashboard of files/dashboards (list $ PATH), its queries reading this release's scrape job
(kafka-lso-exporter.exporterSelector) where the chart knows it, else the mixin's default.
*/}}
{{- define "kafka-lso-exporter.dashboard" -}}
{{- $root := index . 0 }}
{{- $dashboard := $root.Files.Get (index . 1) }}
{{- with include "kafka-lso-exporter.exporterSelector" $root }}
{{- $dashboard = replace (include "kafka-lso-exporter.mixinSelector" $root | replace "\"" "\\\"") (. | replace "\"" "\\\"") $dashboard }}
{{- end }}
{{- $dashboard }}
{{- end }}

{{/*
The alert rules: files/kafka-lso-exporter.rules.yml (generated by mixin/build, the same as
alerts/kafka-lso-exporter.rules.yml) with .Values.prometheusRule applied. Renders
{groups: [...]} as YAML.

Overrides are keyed by alert name. For each rule, the fields of the alert's entry
(threshold, for, severity, labels, annotations, enabled) apply, and an entry's section
named after the rule's source severity (warning:, critical:) wins over them, so that an
alert with a rule per severity could tell them apart (the shipped rules have one severity
per alert name).

threshold replaces the number of the last comparison of expr ("... > 5000",
"... > 120)"); a rule whose expr does not end in a comparison fails the render instead of
ignoring the override. Unknown alert names and sections fail the render too.

The annotations that name a rule's own threshold or `for` come from files/alert-texts.yaml
(generated with the rules), their placeholders filled in from the rendered expr's last
comparison and the rendered `for`: the text says what the rule does, overridden or not.
An annotation set in the override wins. KafkaLsoExporterAbsent's selector is
kafka-lso-exporter.exporterSelector.
*/}}
{{- define "kafka-lso-exporter.alertRules" -}}
{{- $values := .Values.prometheusRule }}
{{- $raw := .Files.Get "files/kafka-lso-exporter.rules.yml" }}
{{- if not $raw }}
{{- fail "files/kafka-lso-exporter.rules.yml is missing from the chart: run mixin/build" }}
{{- end }}
{{- $source := fromYaml $raw }}
{{- if hasKey $source "Error" }}
{{- fail (printf "files/kafka-lso-exporter.rules.yml: %s" $source.Error) }}
{{- end }}
{{- $texts := fromYaml (.Files.Get "files/alert-texts.yaml") }}
{{- if or (not $texts) (hasKey $texts "Error") }}
{{- fail (printf "files/alert-texts.yaml is missing or unreadable (%v): run mixin/build" (get ($texts | default dict) "Error")) }}
{{- end }}
{{- $absentSelector := include "kafka-lso-exporter.exporterSelector" . }}
{{- $mixinSelector := include "kafka-lso-exporter.mixinSelector" . }}
{{- $sourceRunbooks := "https://github.com/kafka-lso-exporter/kafka-lso-exporter/blob/main/docs/runbooks/" }}
{{- $overrides := $values.rules | default dict }}
{{- $fields := list "threshold" "for" "severity" "labels" "annotations" "enabled" }}
{{- $comparison := "(>=|<=|==|!=|>|<)(\\s*)[-+]?(?:[0-9]*\\.)?[0-9]+(?:[eE][-+]?[0-9]+)?((?:\\s*\\))*\\s*)$" }}
{{- $seen := dict }}
{{- $groups := list }}
{{- range $group := $source.groups }}
{{- $rules := list }}
{{- range $sourceRule := $group.rules }}
{{- $rule := deepCopy $sourceRule }}
{{- /* the mixin's default selector (a job named *kafka-lso-exporter*) becomes this
release's job, which fullnameOverride or jobLabel may name otherwise */}}
{{- if $absentSelector }}
{{- $_ := set $rule "expr" (replace $mixinSelector $absentSelector $rule.expr) }}
{{- end }}
{{- if $rule.record }}
{{- /* a recording rule: as the mixin writes it */}}
{{- $rules = append $rules $rule }}
{{- else }}
{{- $name := $rule.alert }}
{{- $severity := dig "labels" "severity" "" $rule }}
{{- $entry := get $overrides $name | default dict }}
{{- $section := dict }}
{{- if and $severity (hasKey $entry $severity) }}
{{- $section = get $entry $severity | default dict }}
{{- end }}
{{- $_ := set $seen $name (append (get $seen $name | default list) $severity) }}
{{- $o := pick $entry "threshold" "for" "severity" "labels" "annotations" "enabled" }}
{{- range $key, $value := $section }}
{{- $_ := set $o $key $value }}
{{- end }}
{{- if not (eq (toString (get $o "enabled")) "false") }}
{{- /* threshold; KafkaLsoExporterStale defaults to 3 sampling intervals */}}
{{- $threshold := index $o "threshold" }}
{{- if and (kindIs "invalid" $threshold) (eq $name "KafkaLsoExporterStale") }}
{{- $threshold = mulf 3 (include "kafka-lso-exporter.durationSeconds" $.Values.interval | float64) }}
{{- end }}
{{- if not (kindIs "invalid" $threshold) }}
{{- if not (regexMatch $comparison $rule.expr) }}
{{- fail (printf "prometheusRule.rules.%s.threshold: the expr of %s (%s) does not end in a comparison with a number" $name $name $severity) }}
{{- end }}
{{- $number := include "kafka-lso-exporter.number" $threshold }}
{{- $_ := set $rule "expr" (regexReplaceAll $comparison $rule.expr (printf "${1}${2}%s${3}" $number)) }}
{{- end }}
{{- with get $o "for" }}
{{- $_ := set $rule "for" (toString .) }}
{{- end }}
{{- if eq $name "KafkaLsoExporterAbsent" }}
{{- $absent := "absent\\(kafka_lso_exporter_build_info(\\{[^}]*\\})?\\)" }}
{{- if not (regexMatch $absent $rule.expr) }}
{{- fail (printf "prometheusRule.exporterSelector: the expr of KafkaLsoExporterAbsent (%s) is not absent(kafka_lso_exporter_build_info...)" $rule.expr) }}
{{- end }}
{{- if $absentSelector }}
{{- $_ := set $rule "expr" (regexReplaceAll $absent $rule.expr (printf "absent(kafka_lso_exporter_build_info{%s})" $absentSelector)) }}
{{- end }}
{{- end }}
{{- /* the texts that name the rule's threshold and `for`, from what is rendered */}}
{{- $ruleTexts := dict }}
{{- with get $texts $name }}
{{- $ruleTexts = get . $severity | default dict }}
{{- end }}
{{- if $ruleTexts }}
{{- $current := regexReplaceAll "^(>=|<=|==|!=|>|<)\\s*" (regexFind $comparison $rule.expr) "" }}
{{- $current = regexFind "^[-+]?(?:[0-9]*\\.)?[0-9]+(?:[eE][-+]?[0-9]+)?" $current }}
{{- $words := dict "${for}" (include "kafka-lso-exporter.durationText" ($rule.for | default "0s")) }}
{{- if $current }}
{{- $_ := set $words "${threshold}" (include "kafka-lso-exporter.number" $current) }}
{{- $_ := set $words "${threshold_seconds}" (include "kafka-lso-exporter.secondsText" $current) }}
{{- $_ := set $words "${threshold_percent}" (include "kafka-lso-exporter.number" (round (mulf (float64 $current) 100) 10)) }}
{{- end }}
{{- $annotations := deepCopy ($rule.annotations | default dict) }}
{{- range $key, $template := $ruleTexts }}
{{- $filled := $template }}
{{- range $placeholder, $word := $words }}
{{- $filled = replace $placeholder $word $filled }}
{{- end }}
{{- if contains "${" $filled }}
{{- fail (printf "files/alert-texts.yaml: %s (%s) %s: a placeholder the chart cannot fill: %s" $name $severity $key $filled) }}
{{- end }}
{{- $_ := set $annotations $key $filled }}
{{- end }}
{{- $_ := set $rule "annotations" $annotations }}
{{- end }}
{{- /* labels: the override's win over the rule's, which win over ruleLabels */}}
{{- $labels := dict }}
{{- range $layer := list ($values.ruleLabels | default dict) ($rule.labels | default dict) (get $o "labels" | default dict) }}
{{- range $key, $value := $layer }}
{{- $_ := set $labels $key (toString $value) }}
{{- end }}
{{- end }}
{{- with get $o "severity" }}
{{- $_ := set $labels "severity" (toString .) }}
{{- end }}
{{- if $labels }}
{{- $_ := set $rule "labels" $labels }}
{{- end }}
{{- $annotations := dict }}
{{- range $layer := list ($rule.annotations | default dict) (get $o "annotations" | default dict) }}
{{- range $key, $value := $layer }}
{{- $_ := set $annotations $key (toString $value) }}
{{- end }}
{{- end }}
{{- if and $values.runbookBaseUrl (hasPrefix $sourceRunbooks (get $annotations "runbook_url" | default "")) }}
{{- $page := trimPrefix $sourceRunbooks (get $annotations "runbook_url") }}
{{- $_ := set $annotations "runbook_url" (printf "%s/%s" (trimSuffix "/" $values.runbookBaseUrl) $page) }}
{{- end }}
{{- if $annotations }}
{{- $_ := set $rule "annotations" $annotations }}
{{- end }}
{{- if $absentSelector }}
{{- range $key, $text := ($rule.annotations | default dict) }}
{{- $_ := set $rule.annotations $key (replace $mixinSelector $absentSelector (toString $text)) }}
{{- end }}
{{- end }}
{{- $rules = append $rules $rule }}
{{- end }}
{{- end }}
{{- end }}
{{- if $rules }}
{{- $groups = append $groups (merge (dict "rules" $rules) (omit $group "rules")) }}
{{- end }}
{{- end }}
{{- /* typos in prometheusRule.rules */}}
{{- range $name, $entry := $overrides }}
{{- if not (hasKey $seen $name) }}
{{- fail (printf "prometheusRule.rules.%s: no such alert in files/kafka-lso-exporter.rules.yml (alerts: %s)" $name (keys $seen | sortAlpha | join ", ")) }}
{{- end }}
{{- if and (gt (len (get $seen $name)) 1) (not (kindIs "invalid" (index ($entry | default dict) "threshold"))) }}
{{- fail (printf "prometheusRule.rules.%s.threshold: %s has one rule per severity; set the threshold per severity (%s)" $name $name (get $seen $name | join ", ")) }}
{{- end }}
{{- range $key, $_ := $entry | default dict }}
{{- if not (or (has $key $fields) (has $key (get $seen $name))) }}
{{- fail (printf "prometheusRule.rules.%s.%s: not one of %s, nor a severity of this alert (%s)" $name $key (join ", " $fields) (get $seen $name | join ", ")) }}
{{- end }}
{{- end }}
{{- end }}
{{- dict "groups" $groups | toYaml }}
{{- end }}

{{/*
A probe as configured, adapted to the web config. Call with (list $probe .Values.web).
web.basicAuth: an httpGet probe becomes a tcpSocket probe of the same port (probes cannot
send credentials); web.tls: an httpGet probe gets scheme HTTPS. Empty probe: nothing.
*/}}
{{- define "kafka-lso-exporter.probe" -}}
{{- $probe := deepCopy (index . 0 | default dict) }}
{{- $web := index . 1 }}
{{- if and $probe (hasKey $probe "httpGet") }}
{{- $httpGet := get $probe "httpGet" }}
{{- if $web.basicAuth }}
{{- $_ := unset $probe "httpGet" }}
{{- $_ := set $probe "tcpSocket" (dict "port" ($httpGet.port | default "metrics")) }}
{{- else if $web.tls }}
{{- $_ := set $httpGet "scheme" "HTTPS" }}
{{- end }}
{{- end }}
{{- with $probe }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
The replicas' coordination group: ha.group, or the release's full name once there is more
than one replica; empty for one replica.
*/}}
{{- define "kafka-lso-exporter.haGroup" -}}
{{- $ha := .Values.ha | default dict -}}
{{- if $ha.group -}}
{{- $ha.group -}}
{{- else if gt (int .Values.replicaCount) 1 -}}
{{- printf "kafka-lso-exporter-%s-%s" .Release.Namespace (include "kafka-lso-exporter.fullname" .) | trunc 249 -}}
{{- end -}}
{{- end }}

{{/*
Refuses at render time the `ha` values the exporter would refuse at start (a pod that
crash-loops): the brokers' session timeout range, a heartbeat within a third of it, a
coordinating cluster that is configured.
*/}}
{{- define "kafka-lso-exporter.checkHa" -}}
{{- $ha := .Values.ha | default dict -}}
{{- $session := include "kafka-lso-exporter.durationSeconds" (dig "sessionTimeout" "10s" $ha) | float64 -}}
{{- $heartbeat := include "kafka-lso-exporter.durationSeconds" (dig "heartbeatInterval" "2s" $ha) | float64 -}}
{{- if or (lt $session 6.0) (gt $session 1800.0) -}}
{{- fail (printf "ha.sessionTimeout: %v is outside 6s..30m (the brokers' group.min.session.timeout.ms and group.max.session.timeout.ms)" (dig "sessionTimeout" "10s" $ha)) -}}
{{- end -}}
{{- if or (le $heartbeat 0.0) (gt (mulf $heartbeat 3.0) $session) -}}
{{- fail (printf "ha.heartbeatInterval: %v must be above 0 and at most a third of ha.sessionTimeout (%v)" (dig "heartbeatInterval" "2s" $ha) (dig "sessionTimeout" "10s" $ha)) -}}
{{- end -}}
{{- with dig "cluster" "" $ha -}}
{{- $names := list -}}
{{- range $.Values.clusters }}{{ $names = append $names (toString .name) }}{{ end -}}
{{- if not (has (toString .) $names) -}}
{{- fail (printf "ha.cluster: %q is not one of clusters[].name (%s)" (toString .) (join ", " $names)) -}}
{{- end -}}
{{- end -}}
{{- end }}
