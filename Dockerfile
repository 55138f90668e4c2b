# Logbook broker image: build with the Rust toolchain, run on a slim Debian base.
# docker build -t logbook . && docker run -p 9092:9092 -v logbook-data:/data logbook
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release -p logbook-broker --bin logbook

FROM debian:bookworm-slim
COPY --from=build /src/target/release/logbook /usr/local/bin/logbook
ENV LOGBOOK_LISTEN=0.0.0.0:9092 \
    LOGBOOK_DATA_DIR=/data
VOLUME /data
EXPOSE 9092
# SIGTERM (docker stop) shuts down cleanly and checkpoints every log.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/logbook"]
