//! Both transports put the same bytes on the wire for a response whose records are file
//! chunks: the bytes `kafka-protocol` would produce with the records in memory.

use std::io::Write;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{ApiKey, FetchResponse, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use logbook_protocol::{
    encode_response, encode_response_with_records, Chunk, FileRecords, FileRegion, ResponseBuf,
};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

use super::{CopyingTransport, PlaintextTransport, Transport, COPY_CHUNK_BYTES_MAX};

const VERSION: i16 = 12;

/// A Fetch response with two partitions whose records are `records[0]` and `records[1]`.
fn fetch_response(records: [Bytes; 2]) -> ResponseKind {
    let partitions = records
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            PartitionData::default()
                .with_partition_index(i32::try_from(i).expect("index"))
                .with_high_watermark(7)
                .with_records(Some(r))
        })
        .collect();
    ResponseKind::Fetch(FetchResponse::default().with_responses(
        vec![FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(partitions)],
    ))
}

/// The response encoded with its records as file chunks, plus a memory response after it.
fn encoded(file: &Arc<std::fs::File>, ranges: [(u64, usize); 2]) -> Vec<Chunk> {
    let mut records = FileRecords::default();
    let stand_ins = ranges.map(|(position, len)| {
        records
            .records(vec![FileRegion {
                file: Arc::clone(file),
                position,
                len,
            }])
            .expect("stand-in")
    });
    let mut buf = ResponseBuf::new();
    encode_response_with_records(
        &mut buf,
        ApiKey::Fetch,
        VERSION,
        42,
        &fetch_response(stand_ins),
        records,
    )
    .expect("encode");
    let chunks = buf.take_chunks();
    assert!(
        chunks
            .iter()
            .filter(|c| matches!(c, Chunk::File(_)))
            .count()
            == 2,
        "the records became file chunks"
    );
    chunks
}

/// Sends `chunks` through the transport built on the client end of a loopback connection
/// and returns what the other end read.
async fn through<T: Transport>(chunks: Vec<Chunk>, make: impl FnOnce(TcpStream) -> T) -> Vec<u8> {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let (client, accepted) = tokio::join!(TcpStream::connect(address), listener.accept());
    let mut transport = make(client.expect("connect"));
    let (mut server, _) = accepted.expect("accept");
    let reader = tokio::spawn(async move {
        let mut out = Vec::new();
        server.read_to_end(&mut out).await.expect("read");
        out
    });
    transport.send(chunks).await.expect("send");
    transport.shutdown().await.expect("shutdown");
    drop(transport);
    reader.await.expect("reader")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_and_copying_send_identical_bytes() {
    // File contents: a prefix, then two record sets, one larger than a copy piece.
    let first_len = 1000;
    let second_len = COPY_CHUNK_BYTES_MAX * 2 + 123;
    let prefix = 77;
    let contents: Vec<u8> = (0..prefix + first_len + second_len)
        .map(|i| u8::try_from(i % 251).expect("byte"))
        .collect();
    let mut file = tempfile::tempfile().expect("tempfile");
    file.write_all(&contents).expect("write");
    let file = Arc::new(file);
    let first = (u64::try_from(prefix).expect("pos"), first_len);
    let second = (u64::try_from(prefix + first_len).expect("pos"), second_len);

    let mut expected = BytesMut::new();
    let in_memory = [
        Bytes::copy_from_slice(&contents[prefix..prefix + first_len]),
        Bytes::copy_from_slice(&contents[prefix + first_len..]),
    ];
    encode_response(
        &mut expected,
        ApiKey::Fetch,
        VERSION,
        42,
        &fetch_response(in_memory),
    )
    .expect("encode in memory");

    let plain = through(encoded(&file, [first, second]), |s| {
        PlaintextTransport::new(s.into_split().1)
    })
    .await;
    let copied = through(encoded(&file, [first, second]), |s| {
        CopyingTransport::new(s.into_split().1)
    })
    .await;
    assert_eq!(plain.len(), expected.len());
    assert!(
        plain == expected[..],
        "sendfile output differs from the in-memory encoding"
    );
    assert!(
        copied == expected[..],
        "copied output differs from the in-memory encoding"
    );
}

// A file cut short under a response is an error, not zeros on the wire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copying_refuses_a_short_file() {
    let mut file = tempfile::tempfile().expect("tempfile");
    file.write_all(&[1; 10]).expect("write");
    let chunks = vec![Chunk::File(FileRegion {
        file: Arc::new(file),
        position: 5,
        len: 10,
    })];
    let mut transport = CopyingTransport::new(Vec::new());
    let error = transport.send(chunks).await.expect_err("short file");
    assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof);
}
