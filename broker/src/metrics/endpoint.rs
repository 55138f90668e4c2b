//! The metrics endpoint on `--metrics-listen`: `GET /metrics` (Prometheus text format),
//! `GET /healthz` (the process is up: 200) and `GET /readyz` (200 once the broker serves
//! clients, 503 before that and from the start of its shutdown) for orchestrators.
//!
//! HTTP/1.1 through hyper, one task per connection; a scrape renders on a blocking thread
//! because reading every partition's offsets and the groups' lag takes locks and may read
//! a batch header from disk.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::broker::Broker;

/// What the endpoint serves from.
pub struct MetricsEndpoint {
    handle: PrometheusHandle,
    /// The broker, once it is assembled (absent on a controller-only node, and during
    /// startup).
    broker: OnceLock<Arc<Broker>>,
    ready: AtomicBool,
    lag_partitions_max: usize,
}

impl MetricsEndpoint {
    /// An endpoint rendering `handle`'s metrics.
    #[must_use]
    pub fn new(handle: PrometheusHandle, lag_partitions_max: usize) -> Arc<Self> {
        Arc::new(Self {
            handle,
            broker: OnceLock::new(),
            ready: AtomicBool::new(false),
            lag_partitions_max,
        })
    }

    /// Gives the scrape the broker's state to read.
    pub fn set_broker(&self, broker: &Arc<Broker>) {
        let _ = self.broker.set(Arc::clone(broker));
    }

    /// Whether `/readyz` answers 200.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// The Prometheus text of every metric, the scrape-time ones refreshed first.
    #[must_use]
    pub fn render(&self) -> String {
        super::collector::collect(self.broker.get(), self.lag_partitions_max);
        let mut text = self.handle.render();
        text.push_str(&super::collector::process_text());
        text
    }

    /// Binds `addr`; the returned future serves until `shutdown`.
    ///
    /// # Errors
    /// The address cannot be bound.
    pub async fn bind(
        self: &Arc<Self>,
        addr: SocketAddr,
        shutdown: CancellationToken,
    ) -> std::io::Result<impl std::future::Future<Output = ()> + Send + 'static> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        tracing::info!(listen = %local, "metrics endpoint: /metrics /healthz /readyz");
        let endpoint = Arc::clone(self);
        Ok(async move {
            loop {
                let stream = tokio::select! {
                    () = shutdown.cancelled() => break,
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => stream,
                        Err(e) => {
                            tracing::warn!(error = %e, "metrics endpoint: accept failed");
                            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                            continue;
                        }
                    },
                };
                let endpoint = Arc::clone(&endpoint);
                let shutdown = shutdown.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let endpoint = Arc::clone(&endpoint);
                        async move { Ok::<_, Infallible>(endpoint.answer(request).await) }
                    });
                    let connection = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service);
                    tokio::select! {
                        () = shutdown.cancelled() => {}
                        result = connection => {
                            if let Err(e) = result {
                                tracing::debug!(error = %e, "metrics endpoint: connection ended");
                            }
                        }
                    }
                });
            }
        })
    }

    async fn answer(self: Arc<Self>, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let path = request.uri().path().to_string();
        if path == "/faults" || path.starts_with("/faults/") {
            return self.answer_faults(request, &path).await;
        }
        if request.method() != Method::GET && request.method() != Method::HEAD {
            return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
        }
        match request.uri().path() {
            "/metrics" => {
                let endpoint = Arc::clone(&self);
                match tokio::task::spawn_blocking(move || endpoint.render()).await {
                    Ok(body) => {
                        let mut response = Response::new(Full::new(Bytes::from(body)));
                        response.headers_mut().insert(
                            hyper::header::CONTENT_TYPE,
                            hyper::header::HeaderValue::from_static(
                                "text/plain; version=0.0.4; charset=utf-8",
                            ),
                        );
                        response
                    }
                    Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e}\n")),
                }
            }
            "/healthz" => text(StatusCode::OK, "ok\n"),
            "/readyz" => {
                if self.ready.load(Ordering::Acquire) {
                    text(StatusCode::OK, "ready\n")
                } else {
                    text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
                }
            }
            _ => text(
                StatusCode::NOT_FOUND,
                "not found: try /metrics, /healthz, /readyz or /faults\n",
            ),
        }
    }
}

impl MetricsEndpoint {
    /// The fault injector's admin API ([`crate::fault_injector::admin`]).
    async fn answer_faults(&self, request: Request<Incoming>, path: &str) -> Response<Full<Bytes>> {
        use http_body_util::{BodyExt, Limited};
        let method = request.method().clone();
        let limit = crate::fault_injector::admin::BODY_BYTES_MAX;
        let body = match Limited::new(request.into_body(), limit).collect().await {
            Ok(body) => body.to_bytes(),
            Err(e) => {
                return text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!("request body: {e} (at most {limit} bytes)\n"),
                )
            }
        };
        let (status, json) =
            crate::fault_injector::admin::answer(self.broker.get(), &method, path, &body).await;
        let mut response = text(status, &json);
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        response
    }
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_owned())));
    *response.status_mut() = status;
    response
}
