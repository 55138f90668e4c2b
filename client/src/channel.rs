//! The task that owns the connection to one broker: takes calls from its bounded queue,
//! writes them pipelined (at most `inflight_max` unanswered), matches answers in order by
//! correlation id, and fails everything in flight when the connection breaks or a request
//! passes its deadline. Reconnects on the next call, after a doubling backoff while
//! connecting keeps failing.

use std::collections::VecDeque;

use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

use crate::security::SecuredStream;

use super::{
    correlation_id_of, set_correlation_id, with_size_prefix, BrokerEndpoint, Call,
    InterBrokerConfig, InterBrokerError,
};

/// A call written to the connection, waiting for its answer.
struct InFlight {
    correlation_id: i32,
    call: Call,
}

/// Runs until the client drops the queue or shuts down.
pub(super) async fn run(
    broker: BrokerEndpoint,
    config: InterBrokerConfig,
    mut queue: mpsc::Receiver<Call>,
    shutdown: CancellationToken,
) {
    let mut backoff = config.reconnect_backoff_min;
    let mut next_connect = tokio::time::Instant::now();
    let mut correlation_id: i32 = 0;
    loop {
        // Idle without a connection until a call arrives.
        let first = tokio::select! {
            () = shutdown.cancelled() => return,
            call = queue.recv() => match call {
                Some(call) => call,
                None => return,
            },
        };
        if first.answer.is_closed() {
            continue;
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep_until(next_connect.min(first.deadline)) => {}
        }
        let address = format!("{}:{}", broker.host, broker.port);
        let connected = tokio::time::timeout_at(first.deadline, TcpStream::connect(&address)).await;
        let stream = match connected {
            Ok(Ok(stream)) => stream,
            failed => {
                let reason = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "connect timed out".to_string(),
                };
                tracing::debug!(broker = broker.id, %address, %reason, "cannot connect to broker");
                let _ = first.answer.send(Err(InterBrokerError::Disconnected {
                    broker_id: broker.id,
                    reason,
                }));
                next_connect = tokio::time::Instant::now() + backoff;
                backoff = (backoff * 2).min(config.reconnect_backoff_max);
                continue;
            }
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(broker = broker.id, error = %e, "TCP_NODELAY not set");
        }
        let secured = tokio::time::timeout_at(
            first.deadline,
            config
                .security
                .secure(stream, &broker.host, &config.client_id),
        )
        .await
        .unwrap_or_else(|_| Err("TLS or SASL did not finish in time".to_string()));
        let end = match secured {
            Ok(SecuredStream::Plain(stream)) => {
                let (read, write) = stream.into_split();
                let connection = (read, write);
                serve(
                    &broker,
                    &config,
                    connection,
                    first,
                    &mut queue,
                    &shutdown,
                    &mut correlation_id,
                )
                .await
            }
            Ok(SecuredStream::Tls(stream)) => {
                let connection = tokio::io::split(*stream);
                serve(
                    &broker,
                    &config,
                    connection,
                    first,
                    &mut queue,
                    &shutdown,
                    &mut correlation_id,
                )
                .await
            }
            Err(reason) => {
                tracing::info!(broker = broker.id, %address, %reason, "cannot open a secured connection");
                let _ = first.answer.send(Err(InterBrokerError::Disconnected {
                    broker_id: broker.id,
                    reason,
                }));
                next_connect = tokio::time::Instant::now() + backoff;
                backoff = (backoff * 2).min(config.reconnect_backoff_max);
                continue;
            }
        };
        backoff = config.reconnect_backoff_min;
        match end {
            End::Closed => return,
            End::Broken => {
                next_connect = tokio::time::Instant::now() + config.reconnect_backoff_min
            }
        }
    }
}

enum End {
    /// The queue closed or the client shut down.
    Closed,
    /// The connection failed; reconnect on the next call.
    Broken,
}

/// Serves calls on one connection until it breaks.
async fn serve<R, W>(
    broker: &BrokerEndpoint,
    config: &InterBrokerConfig,
    (read, mut write): (R, W),
    first: Call,
    queue: &mut mpsc::Receiver<Call>,
    shutdown: &CancellationToken,
    correlation_id: &mut i32,
) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut answers = FramedRead::new(read, logbook_protocol::frame_codec(config.frame_bytes_max));
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    let inflight_max = config.inflight_max.max(1);
    let broken = |reason: String| InterBrokerError::Disconnected {
        broker_id: broker.id,
        reason,
    };
    if let Err(e) = write_call(&mut write, first, correlation_id, &mut in_flight).await {
        fail_all(&mut in_flight, &broken(e));
        return End::Broken;
    }
    loop {
        // The earliest deadline among the unanswered calls (they were queued in order, but
        // deadlines are per call).
        let deadline = in_flight.iter().map(|f| f.call.deadline).min();
        tokio::select! {
            () = shutdown.cancelled() => {
                fail_all(&mut in_flight, &InterBrokerError::Shutdown);
                return End::Closed;
            }
            call = queue.recv(), if in_flight.len() < inflight_max => {
                let Some(call) = call else {
                    fail_all(&mut in_flight, &InterBrokerError::Shutdown);
                    return End::Closed;
                };
                if call.answer.is_closed() {
                    continue;
                }
                if let Err(e) = write_call(&mut write, call, correlation_id, &mut in_flight).await {
                    fail_all(&mut in_flight, &broken(e));
                    return End::Broken;
                }
            }
            answer = answers.next() => {
                if let Err(end) = deliver_answer(broker, answer, &mut in_flight) {
                    return end;
                }
            }
            () = sleep_until(deadline) => {
                fail_all(&mut in_flight, &InterBrokerError::Timeout { broker_id: broker.id });
                return End::Broken;
            }
        }
    }
}

/// Fails every call in flight with `error`: once the connection is given up, none of
/// them can be answered on it any more.
fn fail_all(in_flight: &mut VecDeque<InFlight>, error: &InterBrokerError) {
    for f in in_flight.drain(..) {
        let _ = f.call.answer.send(Err(error.clone()));
    }
}

/// Hands one answer frame to the oldest call in flight: a broker answers a connection's
/// requests in order, so an answer for any other correlation id means the stream can no
/// longer be trusted. A bad frame, the connection closing, or an answer that matches no
/// call breaks the connection (`Err`), failing the calls in flight.
fn deliver_answer(
    broker: &BrokerEndpoint,
    answer: Option<Result<bytes::BytesMut, std::io::Error>>,
    in_flight: &mut VecDeque<InFlight>,
) -> Result<(), End> {
    let broken = |reason: String| InterBrokerError::Disconnected {
        broker_id: broker.id,
        reason,
    };
    let frame = match answer {
        Some(Ok(frame)) => frame.freeze(),
        Some(Err(e)) => {
            tracing::warn!(broker = broker.id, error = %e, "bad answer frame from broker");
            fail_all(in_flight, &broken(e.to_string()));
            return Err(End::Broken);
        }
        None => {
            fail_all(in_flight, &broken("connection closed".to_string()));
            return Err(End::Broken);
        }
    };
    let Some(expected) = in_flight.pop_front() else {
        tracing::warn!(broker = broker.id, "answer to no request from broker");
        return Err(End::Broken);
    };
    if correlation_id_of(&frame) != Some(expected.correlation_id) {
        let error = InterBrokerError::Protocol {
            broker_id: broker.id,
            reason: format!(
                "answer with correlation id {:?} for request {}",
                correlation_id_of(&frame),
                expected.correlation_id
            ),
        };
        let _ = expected.call.answer.send(Err(error.clone()));
        fail_all(in_flight, &error);
        return Err(End::Broken);
    }
    let _ = expected.call.answer.send(Ok(frame));
    Ok(())
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Writes `call` with the next correlation id and records it as in flight.
async fn write_call<W: AsyncWrite + Unpin>(
    write: &mut W,
    mut call: Call,
    correlation_id: &mut i32,
    in_flight: &mut VecDeque<InFlight>,
) -> Result<(), String> {
    *correlation_id = correlation_id.wrapping_add(1);
    let id = *correlation_id;
    let frame =
        set_correlation_id(&mut call.frame, id).and_then(|()| with_size_prefix(&call.frame));
    let frame = match frame {
        Ok(frame) => frame,
        Err(reason) => {
            // This call alone is malformed; the connection is fine.
            let _ = call.answer.send(Err(InterBrokerError::Protocol {
                broker_id: -1,
                reason,
            }));
            return Ok(());
        }
    };
    let deadline = call.deadline;
    in_flight.push_back(InFlight {
        correlation_id: id,
        call,
    });
    match tokio::time::timeout_at(deadline, write.write_all(&frame)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("write timed out".to_string()),
    }
}
