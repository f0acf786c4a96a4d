#!/bin/sh
# Strimzi's Kafka Exporter, served by kafka-lso-exporter: the image puts this file where
# Strimzi's own image has its run script, /opt/kafka-exporter/kafka_exporter_run.sh, which
# the operator's Deployment names as the container's only argument (spec.kafkaExporter.image
# set to this image; docs/platforms/strimzi.md). It reads the environment the operator
# sets, as Strimzi's script does, and starts the exporter with kafka_exporter's flags:
#   KAFKA_EXPORTER_KAFKA_SERVER          --kafka.server (the cluster's bootstrap service on
#                                        its internal mutual-TLS port); the name before
#                                        -kafka-bootstrap becomes the kafka_cluster label
#   KAFKA_EXPORTER_GROUP_REGEX, _TOPIC_REGEX, _GROUP_EXCLUDE_REGEX, _TOPIC_EXCLUDE_REGEX
#                                        --group.filter, --topic.filter, --group.exclude,
#                                        --topic.exclude
#   KAFKA_EXPORTER_LOGGING               --verbosity (0 info, 1 debug, 2 trace; the names
#                                        info, debug and trace too, as operators before
#                                        Strimzi 0.26 set them)
#   KAFKA_EXPORTER_KAFKA_VERSION         not passed: request versions are negotiated with
#                                        the brokers
#   KAFKA_EXPORTER_ENABLE_SARAMA=true    --log.enable-sarama (the Kafka client's debug lines)
#   KAFKA_EXPORTER_OFFSET_SHOW_ALL=false --no-offset.show-all
# and mutual TLS with the certificates the operator mounts: the cluster CA (all of its
# certificates during a renewal) and the exporter's own certificate and key. Metrics on
# :9404, /healthz for the probes. Unlike Strimzi's script, values are passed as they are,
# with no second round of shell quoting.
set -eu

ca_dir=/etc/kafka-exporter/cluster-ca-certs
cert_dir=/etc/kafka-exporter/kafka-exporter-certs
# Strimzi 0.51 and later mount the trust bundle, whose cluster-ca.crt holds every
# certificate of the cluster CA; earlier versions the cluster CA's secret, one ca*.crt file
# per certificate during a renewal, which are joined into one file on /tmp (an emptyDir).
if [ -f "$ca_dir/cluster-ca.crt" ]; then
  ca=$ca_dir/cluster-ca.crt
else
  ca=/tmp/cluster-ca.crt
  : >"$ca"
  for cert in "$ca_dir"/*.crt; do
    [ -f "$cert" ] || continue
    cat "$cert" >>"$ca"
    echo >>"$ca"
  done
fi
[ -s "$ca" ] || { echo "kafka_exporter_run.sh: no cluster CA certificate in $ca_dir (cluster-ca.crt or ca*.crt)" >&2; exit 1; }

server=${KAFKA_EXPORTER_KAFKA_SERVER:?the operator sets KAFKA_EXPORTER_KAFKA_SERVER}
set -- --kafka.server="$server" --web.listen-address=:9404 \
  --tls.enabled --tls.ca-file="$ca" \
  --tls.cert-file="$cert_dir/kafka-exporter.crt" --tls.key-file="$cert_dir/kafka-exporter.key"
case "$server" in
  *-kafka-bootstrap*) set -- "$@" --cluster-name="${server%%-kafka-bootstrap*}" ;;
esac
[ -z "${KAFKA_EXPORTER_GROUP_REGEX:-}" ] || set -- "$@" --group.filter="$KAFKA_EXPORTER_GROUP_REGEX"
[ -z "${KAFKA_EXPORTER_TOPIC_REGEX:-}" ] || set -- "$@" --topic.filter="$KAFKA_EXPORTER_TOPIC_REGEX"
[ -z "${KAFKA_EXPORTER_GROUP_EXCLUDE_REGEX:-}" ] || set -- "$@" --group.exclude="$KAFKA_EXPORTER_GROUP_EXCLUDE_REGEX"
[ -z "${KAFKA_EXPORTER_TOPIC_EXCLUDE_REGEX:-}" ] || set -- "$@" --topic.exclude="$KAFKA_EXPORTER_TOPIC_EXCLUDE_REGEX"
[ "${KAFKA_EXPORTER_ENABLE_SARAMA:-}" != true ] || set -- "$@" --log.enable-sarama
[ "${KAFKA_EXPORTER_OFFSET_SHOW_ALL:-}" != false ] || set -- "$@" --no-offset.show-all
case "${KAFKA_EXPORTER_LOGGING:-}" in
  "") ;;
  info | INFO) set -- "$@" --verbosity=0 ;;
  debug | DEBUG) set -- "$@" --verbosity=1 ;;
  trace | TRACE) set -- "$@" --verbosity=2 ;;
  *) set -- "$@" --verbosity="$KAFKA_EXPORTER_LOGGING" ;;
esac
exec /usr/local/bin/kafka-lso-exporter "$@"
