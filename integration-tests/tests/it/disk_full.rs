//! Running out of disk space: the producer gets KAFKA_STORAGE_ERROR naming the cause, the
//! broker stays up and keeps serving what it has, and once space is freed producing works
//! again without a restart — with no gap, duplicate or garbage in the log.
//!
//! The data directory is a small tmpfs the test mounts (root only, as on CI and the
//! development machines; elsewhere the test says so and passes without running).

use std::path::{Path, PathBuf};
use std::process::Command;

use bytes::Bytes;
use integration_tests::Broker;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{MetadataRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::common::{consume, create_topic};
use crate::wire::{connect, round_trip};

/// A tmpfs mounted on a temporary directory, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(bytes: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().expect("tempdir");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}")])
            .arg("tmpfs")
            .arg(dir.path())
            .status()
            .ok()?;
        status.success().then_some(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// One record of `value_bytes` bytes, value byte `i` = `(seed + i) % 251`.
fn batch(seed: u8, value_bytes: usize) -> Bytes {
    let value: Vec<u8> = (0..value_bytes)
        .map(|i| u8::try_from((usize::from(seed) + i) % 251).expect("below 251"))
        .collect();
    crate::wire::record_batch(
        &[(Some(Bytes::from(vec![seed])), Some(Bytes::from(value)))],
        1_000,
    )
}

/// Produce v9 acks=-1 of one batch to `topic`-0: (error code, base offset, message).
fn produce(
    stream: &mut std::net::TcpStream,
    topic: &str,
    records: Bytes,
    id: i32,
) -> (i16, i64, String) {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let response = round_trip(stream, 9, id, &request);
    let p = &response.responses[0].partition_responses[0];
    let message = p
        .error_message
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    (p.error_code, p.base_offset, message)
}

const VALUE_BYTES: usize = 200 * 1024;

#[test]
fn disk_full_is_an_error_and_producing_resumes_once_space_is_freed() {
    if !is_root() {
        eprintln!("disk_full: not root, cannot mount a tmpfs; not run");
        return;
    }
    // 12 MiB of tmpfs, 4 MiB of it taken by a ballast file freed later.
    let tmpfs = Tmpfs::mount(12 << 20).expect("mount a tmpfs as root");
    let ballast = tmpfs.path().join("ballast");
    std::fs::write(&ballast, vec![7u8; 4 << 20]).expect("write ballast");
    let data: PathBuf = tmpfs.path().join("data");
    let broker = Broker::start_in(&data, &[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "full", 1, &[]);

    let mut stream = connect(broker.addr());
    let mut written = 0_i64;
    let (code, message) = loop {
        let seed = u8::try_from(written % 200).expect("small");
        let id = i32::try_from(written).expect("small");
        let (code, offset, message) = produce(&mut stream, "full", batch(seed, VALUE_BYTES), id);
        if code != 0 {
            break (code, message);
        }
        assert_eq!(offset, written, "offsets stay contiguous while space lasts");
        written += 1;
        assert!(written < 200, "the 12 MiB tmpfs never filled up");
    };
    eprintln!("disk_full: {written} batches fitted; then error {code}: {message}");
    assert_eq!(
        code, 56,
        "KAFKA_STORAGE_ERROR when the disk is full ({message})"
    );
    assert!(
        message.to_lowercase().contains("no space"),
        "the error names the cause: {message}"
    );
    assert!(written >= 5, "some batches fitted before the disk filled");
    // Still full: still refused, and nothing was appended meanwhile.
    let (again, _, _) = produce(&mut stream, "full", batch(0, VALUE_BYTES), 1_000);
    assert_eq!(again, 56);

    // The broker is up: metadata answers, and everything acknowledged is readable.
    let metadata = round_trip(
        &mut stream,
        12,
        1_001,
        &MetadataRequest::default().with_topics(None),
    );
    assert_eq!(metadata.topics.len(), 1);
    let count = usize::try_from(written).expect("small");
    let consumed = consume(&bootstrap, "full", 0, 0, count, &[]);
    assert_eq!(consumed.len(), count);

    // Free space: producing works again at the next offset, without a restart.
    std::fs::remove_file(&ballast).expect("remove ballast");
    let (code, offset, message) = produce(&mut stream, "full", batch(99, VALUE_BYTES), 1_002);
    assert_eq!(
        (code, offset),
        (0, written),
        "after freeing space: {message}"
    );

    let consumed = consume(&bootstrap, "full", 0, 0, count + 1, &[]);
    for (i, record) in consumed.iter().enumerate() {
        let seed = if i == count {
            99
        } else {
            u8::try_from(i % 200).expect("small")
        };
        assert_eq!(record.offset, i64::try_from(i).expect("small"));
        assert_eq!(record.key.as_deref(), Some(&[seed][..]), "record {i} key");
        let expected: Vec<u8> = (0..VALUE_BYTES)
            .map(|j| u8::try_from((usize::from(seed) + j) % 251).expect("below 251"))
            .collect();
        assert_eq!(
            record.value.as_deref(),
            Some(&expected[..]),
            "record {i} value"
        );
    }
    drop(stream);
    drop(broker);
}
