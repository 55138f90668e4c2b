//! The high-watermark checkpoint of a data directory: Kafka's
//! `replication-offset-checkpoint`, one file per data directory (one fsync for every
//! partition, rather than one per partition every few seconds).
//!
//! Why: a restarted replica must not show consumers its whole log. Its tail may not have been
//! committed; if a new leader then truncates it, offsets consumers saw would change. So a
//! partition opens with `high watermark = min(checkpoint, log end)`, and only becoming
//! leader of an ISR of one (a single node) moves it straight to the durable end.
//!
//! Format (Kafka's text format): a version line `0`, an entry-count line, then one
//! `topic partition offset` line per partition. Written with write-temp, fsync, rename,
//! fsync-dir by the replica manager every 5 seconds (when something changed) and at
//! shutdown. A file that does not parse is ignored (logged): every partition then opens at
//! its log start, which is safe, and the leader moves it up again.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use logbook_storage::Offset;

use crate::TopicPartition;

/// The checkpoint's file name, as Kafka names it.
pub const HW_CHECKPOINT_FILE: &str = "replication-offset-checkpoint";
const VERSION: &str = "0";

/// High watermarks by partition.
pub type HighWatermarks = HashMap<TopicPartition, Offset>;

/// The checkpoint file of one data directory.
#[derive(Debug)]
pub struct HighWatermarkCheckpoint {
    dir: PathBuf,
}

impl HighWatermarkCheckpoint {
    /// The checkpoint of data directory `dir`.
    #[must_use]
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    /// Reads the checkpoint; missing or unparsable gives an empty map.
    ///
    /// # Errors
    /// I/O errors other than the file being absent.
    pub fn read(&self) -> io::Result<HighWatermarks> {
        let path = self.dir.join(HW_CHECKPOINT_FILE);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(HashMap::new()),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                tracing::warn!(path = %path.display(), "high-watermark checkpoint is not text; ignoring it");
                return Ok(HashMap::new());
            }
            Err(e) => return Err(e),
        };
        Ok(parse(&text).unwrap_or_else(|reason| {
            tracing::warn!(path = %path.display(), %reason, "ignoring unreadable high-watermark checkpoint");
            HashMap::new()
        }))
    }

    /// Durably replaces the checkpoint with `high_watermarks`.
    ///
    /// # Errors
    /// I/O errors; the previous file is then intact.
    pub fn write(&self, high_watermarks: &HighWatermarks) -> io::Result<()> {
        let mut entries: Vec<_> = high_watermarks.iter().collect();
        entries.sort();
        let mut text = format!("{VERSION}\n{}\n", entries.len());
        for (tp, offset) in entries {
            text.push_str(&format!("{} {} {}\n", tp.topic, tp.partition, offset.get()));
        }
        logbook_common::replace(&self.dir.join(HW_CHECKPOINT_FILE), |out| {
            out.write_all(text.as_bytes())
        })
    }
}

fn parse(text: &str) -> Result<HighWatermarks, String> {
    let mut lines = text.lines();
    if lines.next() != Some(VERSION) {
        return Err("unknown version".to_string());
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("no entry count")?;
    let mut map = HashMap::with_capacity(count.min(1 << 16));
    for line in lines.by_ref().take(count) {
        let mut words = line.split_ascii_whitespace();
        let (Some(topic), Some(partition), Some(offset), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err(format!("malformed line {line:?}"));
        };
        let partition = partition.parse::<i32>().map_err(|e| e.to_string())?;
        let offset = offset.parse::<i64>().map_err(|e| e.to_string())?;
        map.insert(
            TopicPartition {
                topic: topic.to_string(),
                partition,
            },
            Offset(offset),
        );
    }
    if map.len() != count {
        return Err(format!("{} entries, {count} announced", map.len()));
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Written high watermarks read back; a torn or foreign file reads as empty.
    #[test]
    fn round_trip_and_damage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let checkpoint = HighWatermarkCheckpoint::new(dir.path());
        assert!(checkpoint.read().expect("read").is_empty());
        let mut hws = HighWatermarks::new();
        hws.insert(
            TopicPartition {
                topic: "a".into(),
                partition: 3,
            },
            Offset(42),
        );
        hws.insert(
            TopicPartition {
                topic: "b".into(),
                partition: 0,
            },
            Offset(0),
        );
        checkpoint.write(&hws).expect("write");
        assert_eq!(checkpoint.read().expect("read"), hws);
        let text = fs::read_to_string(dir.path().join(HW_CHECKPOINT_FILE)).expect("text");
        assert_eq!(text, "0\n2\na 3 42\nb 0 0\n");
        fs::write(dir.path().join(HW_CHECKPOINT_FILE), "0\n2\na 3 42\n").expect("torn");
        assert!(checkpoint.read().expect("read").is_empty());
    }
}
