# kafka-lso-exporter container image, from the binaries of a release, as Prometheus' own
# exporters are built: `scripts/release` compiles them and writes this file beside them
# into the image build context dist/kafka-lso-exporter-VERSION.image/.
#
#   scripts/release
#   podman build -t kafka-lso-exporter:0.1.0 dist/kafka-lso-exporter-0.1.0.image
#   podman build -t kafka-lso-exporter:0.1.0-kerberos --build-arg FLAVOUR=kerberos \
#     dist/kafka-lso-exporter-0.1.0.image
#   (docker build takes the same arguments)
#
# FLAVOUR default: the binary without Kerberos and no Kerberos userland. FLAVOUR kerberos:
# the binary built with SASL/GSSAPI, MIT's GSS-API library, Cyrus SASL with its GSSAPI
# module and kinit (librdkafka runs `kinit` with sasl.kerberos.keytab into the default
# credential cache, /tmp/krb5cc_65532 unless KRB5CCNAME says otherwise: with a read-only
# root filesystem, mount a writable volume there; the realm comes from /etc/krb5.conf or
# KRB5_CONFIG).
#
# The image runs as the numeric non-root user 65532. The default flavour writes no files, so
# it runs with a read-only root filesystem (Kubernetes readOnlyRootFilesystem: true) and
# needs no writable volume; the kerberos flavour needs one for kinit's credential cache (an
# emptyDir at /tmp, or KRB5CCNAME naming a file on one). Configuration comes from --config FILE (mount it read-only),
# KAFKA_LSO_EXPORTER_* environment variables or flags. The licences of the exporter and
# of everything its binary contains are in /usr/share/doc/kafka-lso-exporter/.

ARG BASE=docker.io/library/debian:trixie-slim
FROM ${BASE}

ARG FLAVOUR=default
# The binary links OpenSSL and zlib dynamically (librdkafka is compiled into it); the CA
# bundle verifies brokers' TLS certificates when ssl.ca.location is not set.
RUN set -eu; \
    packages="ca-certificates libssl3t64 zlib1g"; \
    case "$FLAVOUR" in \
      default) ;; \
      kerberos) packages="$packages libgssapi-krb5-2 libsasl2-2 libsasl2-modules-gssapi-mit krb5-user" ;; \
      *) echo "FLAVOUR is default or kerberos, not $FLAVOUR" >&2; exit 2 ;; \
    esac; \
    apt-get update; \
    # Every fix the archive has, whatever the age of the base.
    DEBIAN_FRONTEND=noninteractive apt-get upgrade -y; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $packages; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log

COPY ${FLAVOUR}/kafka-lso-exporter /usr/local/bin/kafka-lso-exporter
COPY LICENSE THIRD-PARTY-NOTICES.txt /usr/share/doc/kafka-lso-exporter/
# Where Strimzi's operator looks for its Kafka Exporter's run script (spec.kafkaExporter.image
# set to this image): it starts the exporter with the operator's settings (mode 0755 in
# the context, kept by COPY).
COPY kafka_exporter_run.sh /opt/kafka-exporter/kafka_exporter_run.sh

ARG VERSION=0.1.0
ARG GIT_REVISION=unknown
LABEL org.opencontainers.image.title="kafka-lso-exporter" \
      org.opencontainers.image.description="Prometheus exporter for Kafka transactional visibility: high watermark, last stable offset, and consumer lag against both" \
      org.opencontainers.image.source="https://github.com/kafka-lso-exporter/kafka-lso-exporter" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${GIT_REVISION}"

# Numeric, so that Kubernetes runAsNonRoot can verify it without an /etc/passwd entry.
USER 65532:65532
EXPOSE 9745
ENTRYPOINT ["/usr/local/bin/kafka-lso-exporter"]
