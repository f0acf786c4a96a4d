# syntax=docker/dockerfile:1
#
# kafka-lso-exporter container image.
#
#   docker build -t kafka-lso-exporter \
#     --build-arg VERSION=0.1.0 --build-arg GIT_REVISION="$(git rev-parse --short=12 HEAD)" .
#   docker run --rm -p 9745:9745 --read-only kafka-lso-exporter --bootstrap-servers kafka:9092
#
# The runtime image runs as the numeric non-root user 65532 and writes no files, so it runs
# with a read-only root filesystem (docker run --read-only, Kubernetes
# readOnlyRootFilesystem: true) and needs no writable volume. Configuration comes from
# --config FILE (mount it read-only), KAFKA_LSO_EXPORTER_* environment variables or flags.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

# ---------------------------------------------------------------------------------------
FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS build

# librdkafka is built from source by rdkafka-sys: a C toolchain, zlib and OpenSSL headers.
# Kerberos (cargo feature gssapi): Cyrus SASL headers for librdkafka, MIT's GSS-API headers
# and libclang (bindgen) for the exporter's own client.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential pkg-config libssl-dev zlib1g-dev libsasl2-dev libkrb5-dev libclang-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src

# Dependencies first, against placeholder sources: this layer (librdkafka included) is
# rebuilt only when Cargo.toml, Cargo.lock or build.rs change. The benchmark declared in
# Cargo.toml is not built; its placeholder only satisfies the manifest.
COPY Cargo.toml Cargo.lock build.rs ./
# The patched kafka-protocol (see vendor/kafka-protocol/PATCHED.md).
COPY vendor vendor
RUN mkdir -p src bench \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs \
 && echo 'fn main() {}' > bench/cycle.rs \
 && cargo build --release --locked --features gssapi \
 && rm -rf src

# The exporter itself. The revision is declared only here so that a new commit does not
# invalidate the dependency layer above; build.rs reads GIT_REVISION (there is no .git).
COPY src ./src
ARG GIT_REVISION=unknown
RUN touch src/main.rs src/lib.rs \
 && GIT_REVISION="${GIT_REVISION}" cargo build --release --locked --features gssapi \
 && install -D -m 0755 target/release/kafka-lso-exporter /out/kafka-lso-exporter

# ---------------------------------------------------------------------------------------
FROM debian:${DEBIAN_RELEASE}-slim

# librdkafka is compiled into the binary, which links OpenSSL and zlib dynamically; the CA
# bundle verifies brokers' TLS certificates when ssl.ca.location is not set. Kerberos:
# MIT's GSS-API library (the own client), Cyrus SASL with its GSSAPI module and kinit
# (librdkafka runs `kinit` with sasl.kerberos.keytab into the default credential cache,
# /tmp/krb5cc_65532 unless KRB5CCNAME says otherwise: with a read-only root filesystem,
# mount a writable volume there). The realm comes from /etc/krb5.conf or KRB5_CONFIG.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates libssl3 zlib1g libgssapi-krb5-2 libsasl2-2 libsasl2-modules-gssapi-mit \
      krb5-user \
 && rm -rf /var/lib/apt/lists/*

ARG VERSION=0.1.0
ARG GIT_REVISION=unknown
LABEL org.opencontainers.image.title="kafka-lso-exporter" \
      org.opencontainers.image.description="Prometheus exporter for Kafka transactional visibility: high watermark, last stable offset, and consumer lag against both" \
      org.opencontainers.image.source="https://github.com/kafka-lso-exporter/kafka-lso-exporter" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${GIT_REVISION}"

COPY --from=build /out/kafka-lso-exporter /usr/local/bin/kafka-lso-exporter

# Numeric, so that Kubernetes runAsNonRoot can verify it without an /etc/passwd entry.
USER 65532:65532
EXPOSE 9745
ENTRYPOINT ["/usr/local/bin/kafka-lso-exporter"]
