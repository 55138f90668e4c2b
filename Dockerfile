# Logbook broker image: built with the Rust toolchain, run FROM scratch with the binary and
# the few glibc libraries it links (about 20 MB in all), as a non-root user.
#
#   docker build -t logbook .
#   docker run -p 9092:9092 -e LOGBOOK_ADVERTISED_LISTENER=localhost:9092 -v logbook-data:/data logbook
#
# scripts/docker-smoke builds this file and checks the image end to end (it can make the
# build stage's base locally where no registry is reachable).
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# Symbols stripped, no debug info: the repo's release profile keeps line tables for
# profiling, which would make the binary seven times larger.
ENV CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_PROFILE_RELEASE_STRIP=symbols
RUN cargo build --release --locked -p logbook-broker --bin logbook
# The root filesystem of the final image: the binary, what `ldd` says it loads (glibc's
# loader, libc, libm, libgcc_s; host names resolve through libc's built-in files and DNS
# sources, which read the /etc/hosts and /etc/resolv.conf Docker provides), a user
# without a shell, and the data directory that user owns so a new volume inherits it.
RUN set -eu; \
    mkdir -p /rootfs/usr/local/bin /rootfs/etc /rootfs/data /rootfs/tmp; \
    cp target/release/logbook /rootfs/usr/local/bin/logbook; \
    for lib in $(ldd target/release/logbook | grep -o '/[^ ]*'); do cp -L --parents "$lib" /rootfs/; done; \
    echo 'logbook:x:65532:65532:logbook:/data:/nonexistent' > /rootfs/etc/passwd; \
    echo 'logbook:x:65532:' > /rootfs/etc/group; \
    chown 65532:65532 /rootfs/data; \
    chmod 1777 /rootfs/tmp

# The tools a Testcontainers Kafka module runs in the container (`sh -c` with a wait loop,
# a start script whose shebang is bash or `/usr/bin/env bash`, sleep, chmod), statically
# linked so they need nothing the broker does not: bash from bash-static (also as sh) and
# busybox for the rest. The local base scripts/docker-smoke makes carries both; a stock
# rust image gets them from Debian.
RUN set -eu; \
    if [ ! -x /bin/bash-static ] || [ ! -x /bin/busybox ]; then \
        apt-get update -qq && apt-get install -y -qq --no-install-recommends bash-static busybox-static; \
    fi; \
    mkdir -p /compat/bin /compat/usr/bin /compat/etc/kafka/docker /compat/opt/kafka /compat/var/lib/kafka/data; \
    cp /bin/bash-static /compat/bin/bash; \
    ln -s bash /compat/bin/sh; \
    cp /bin/busybox /compat/bin/busybox; \
    for tool in sleep chmod cat ls mkdir rm cp mv echo test grep sed ps kill; do ln -s busybox /compat/bin/$tool; done; \
    ln -s ../../bin/busybox /compat/usr/bin/env; \
    printf '%s\n' '#!/bin/sh' \
        '# apache/kafka starts its broker with this script from the KAFKA_* variables; so does' \
        '# this image (Logbook reads them itself). Logs go to stdout, as Kafka logs.' \
        'exec /usr/local/bin/logbook serve 2>&1' > /compat/etc/kafka/docker/run; \
    chmod 755 /compat/etc/kafka/docker/run; \
    mkdir -p /compat/etc; \
    cp /rootfs/etc/passwd /rootfs/etc/group /compat/etc/; \
    echo 'appuser:x:1000:1000:appuser:/opt/kafka:/bin/bash' >> /compat/etc/passwd; \
    echo 'appuser:x:1000:' >> /compat/etc/group; \
    chown 1000:1000 /compat/opt/kafka /compat/var/lib/kafka/data

# A drop-in for apache/kafka in Testcontainers' Kafka modules (`docker build --target
# kafka-compat`): the same binary, plus the shell and tools those modules run, Kafka's
# /etc/kafka/docker/run, its user (appuser, uid 1000) and writable /tmp and /opt/kafka.
# No ENTRYPOINT, so a module's command runs as given, as apache/kafka's does.
FROM scratch AS kafka-compat
COPY --from=build /rootfs/ /
COPY --from=build /compat/ /
USER 1000:1000
ENV LOGBOOK_LISTEN=0.0.0.0:9092 \
    LOGBOOK_DATA_DIR=/var/lib/kafka/data \
    PATH=/bin:/usr/bin:/usr/local/bin
EXPOSE 9092
STOPSIGNAL SIGTERM
CMD ["/etc/kafka/docker/run"]

# The default image: the broker alone, no shell.
FROM scratch
COPY --from=build /rootfs/ /
USER 65532:65532
ENV LOGBOOK_LISTEN=0.0.0.0:9092 \
    LOGBOOK_DATA_DIR=/data
VOLUME /data
EXPOSE 9092
# `logbook healthcheck` sends ApiVersions to LOGBOOK_LISTEN: the image has no shell or curl.
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/logbook", "healthcheck"]
# SIGTERM (docker stop) shuts down cleanly and checkpoints every log; 10 s is plenty.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/logbook"]
CMD ["serve"]
