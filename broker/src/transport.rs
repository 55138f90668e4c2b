//! Kafka's `TransportLayer`: where a connection's encoded responses go. The connection
//! writer hands a transport the chunks of its responses (memory, and record sets still in
//! segment files) and never knows whether they leave by `sendfile` over plain TCP or are
//! copied through user space into a stream that must see every byte (TLS).
//!
//! - [`PlaintextTransport`]: memory chunks with `write`, file chunks with `sendfile` (page
//!   cache to socket, no copy), the socket corked meanwhile.
//! - [`CopyingTransport`]: reads file chunks (`pread`, off the async workers) and writes
//!   them like memory; what a TLS stream will use, since it must encrypt every byte.

use std::future::Future;
use std::io;
use std::os::unix::fs::FileExt;

use logbook_protocol::{Chunk, FileRegion};
use tokio::io::{AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;

/// Largest piece of a file chunk [`CopyingTransport`] reads into memory at once.
pub const COPY_CHUNK_BYTES_MAX: usize = 256 * 1024;

/// Sends encoded responses to the client, in the order given.
pub trait Transport: Send + 'static {
    /// Writes every chunk, in order, before returning.
    fn send(&mut self, chunks: Vec<Chunk>) -> impl Future<Output = io::Result<()>> + Send;

    /// Ends the sending side (the client reads end-of-stream once everything sent arrived).
    fn shutdown(&mut self) -> impl Future<Output = io::Result<()>> + Send;
}

/// Plain TCP: `write` and `sendfile`.
pub struct PlaintextTransport {
    out: OwnedWriteHalf,
}

impl PlaintextTransport {
    /// The transport writing to `out`.
    #[must_use]
    pub fn new(out: OwnedWriteHalf) -> Self {
        Self { out }
    }
}

impl Transport for PlaintextTransport {
    /// Memory chunks with `write`, file chunks with `sendfile` (page cache to socket, no
    /// copy through our memory). The socket is corked meanwhile when there are several
    /// chunks, so the small memory chunks between record sets leave in full segments rather
    /// than one packet each.
    async fn send(&mut self, chunks: Vec<Chunk>) -> io::Result<()> {
        let corked = chunks.len() > 1;
        if corked {
            set_cork(&self.out, true);
        }
        let result = async {
            for chunk in chunks {
                match chunk {
                    Chunk::Mem(mem) => self.out.write_all(&mem).await?,
                    Chunk::File(region) => send_file(&self.out, &region).await?,
                }
            }
            Ok(())
        }
        .await;
        if corked {
            set_cork(&self.out, false);
        }
        result
    }

    async fn shutdown(&mut self) -> io::Result<()> {
        self.out.shutdown().await
    }
}

fn set_cork(out: &OwnedWriteHalf, on: bool) {
    let stream: &TcpStream = out.as_ref();
    if let Err(e) = rustix::net::sockopt::set_tcp_cork(stream, on) {
        tracing::debug!(error = %e, on, "TCP_CORK failed");
    }
}

/// Sends `region` with `sendfile`, waiting for the socket to drain when it is full.
/// A file shorter than the region (truncated under us) is an error: the response promised
/// those bytes, so the connection cannot continue.
async fn send_file(out: &OwnedWriteHalf, region: &FileRegion) -> io::Result<()> {
    let stream: &TcpStream = out.as_ref();
    let mut position = region.position;
    let end = region.position + region.len as u64;
    while position < end {
        stream.writable().await?;
        let remaining = usize::try_from(end - position).unwrap_or(usize::MAX);
        let sent = stream.try_io(Interest::WRITABLE, || {
            rustix::fs::sendfile(stream, &*region.file, Some(&mut position), remaining)
                .map_err(io::Error::from)
        });
        match sent {
            Ok(0) => return Err(short_file(position, end)),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn short_file(position: u64, end: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("file ended at {position}, {} bytes short", end - position),
    )
}

/// Any byte stream: file chunks are read into memory (at most [`COPY_CHUNK_BYTES_MAX`] at
/// a time) and written like memory chunks.
pub struct CopyingTransport<W> {
    out: W,
    /// Reused between file chunks.
    scratch: Vec<u8>,
}

impl<W> CopyingTransport<W> {
    /// The transport writing to `out`.
    #[must_use]
    pub fn new(out: W) -> Self {
        Self {
            out,
            scratch: Vec::new(),
        }
    }
}

impl<W: AsyncWrite + Unpin + Send + 'static> Transport for CopyingTransport<W> {
    async fn send(&mut self, chunks: Vec<Chunk>) -> io::Result<()> {
        for chunk in chunks {
            match chunk {
                Chunk::Mem(mem) => self.out.write_all(&mem).await?,
                Chunk::File(region) => {
                    let mut position = region.position;
                    let end = region.position + region.len as u64;
                    while position < end {
                        let piece = usize::try_from(end - position)
                            .unwrap_or(usize::MAX)
                            .min(COPY_CHUNK_BYTES_MAX);
                        self.scratch.resize(piece, 0);
                        let scratch = &mut self.scratch;
                        // pread may wait for the disk: not on an async worker's time.
                        tokio::task::block_in_place(|| {
                            region.file.read_exact_at(scratch, position)
                        })
                        .map_err(|e| match e.kind() {
                            io::ErrorKind::UnexpectedEof => short_file(position, end),
                            _ => e,
                        })?;
                        self.out.write_all(&self.scratch).await?;
                        position += piece as u64;
                    }
                }
            }
        }
        self.out.flush().await
    }

    async fn shutdown(&mut self) -> io::Result<()> {
        self.out.shutdown().await
    }
}

#[cfg(test)]
mod tests;
