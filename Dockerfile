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
