//! `LeaderEpochFileCache`: which leader epoch wrote which offsets of one partition — the
//! first offset of every epoch — kept next to the log (Kafka's class of the same name).
//!
//! Replication needs it: after a leader change a follower asks the new leader where its
//! own last epoch ends (OffsetForLeaderEpoch) and truncates there, so logs that diverged
//! under an old leader converge without losing anything the new leader acknowledged.
//!
//! On disk: `leader-epoch-checkpoint` in the partition directory, Kafka's text format —
//! a version line (`0`), an entry-count line, then `epoch start_offset` per line — written
//! with write-temp, fsync, rename, fsync-dir. The file is brought up to date when a
//! segment rolls and at clean shutdown (off the append path, by the flusher); after a
//! crash, recovery truncates it to the log end and re-derives the entries of the data
//! after the last snapshot from the batches themselves (each batch carries the epoch that
//! wrote it), so a stale file is never wrong, only shorter.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The checkpoint's file name, as Kafka names it.
pub const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
const VERSION: &str = "0";

/// A leader epoch: bumped by the controller at every leadership change of a partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaderEpoch(pub i32);

impl std::fmt::Display for LeaderEpoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// One entry: `epoch` wrote offsets from `start_offset` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    /// The epoch.
    pub epoch: LeaderEpoch,
    /// Its first offset.
    pub start_offset: i64,
}

/// The epoch → start offset map of one log. Entries are sorted by epoch and by start
/// offset, both strictly increasing. Not locked: owned by the `Log`.
#[derive(Debug)]
pub struct LeaderEpochFileCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
    /// Changed since the file was last written.
    dirty: bool,
}

/// A copy of the entries to write outside the log's lock.
#[derive(Debug)]
pub(crate) struct EpochCheckpoint {
    path: PathBuf,
    text: String,
}

impl LeaderEpochFileCache {
    /// Loads the checkpoint in `dir`; a missing or unparsable file gives an empty cache
    /// (logged), which recovery then refills from the batches it scans.
    pub(crate) fn load(dir: &Path) -> io::Result<Self> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
        let entries = match fs::read_to_string(&path) {
            Ok(text) => parse(&text).unwrap_or_else(|reason| {
                tracing::warn!(path = %path.display(), %reason, "ignoring unreadable leader-epoch checkpoint");
                Vec::new()
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(Self {
            path,
            entries,
            dirty: false,
        })
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The epoch `offset` was written in (Kafka's `epochForOffset`): the newest epoch
    /// starting at or before it; `None` before the first entry.
    #[must_use]
    pub fn epoch_for_offset(&self, offset: i64) -> Option<LeaderEpoch> {
        self.entries
            .iter()
            .take_while(|e| e.start_offset <= offset)
            .last()
            .map(|e| e.epoch)
    }

    /// The newest epoch, if any.
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`, if it is newer than every epoch
    /// known (Kafka assigns on every append; older or equal epochs change nothing). An
    /// entry whose start offset is not below the new one is removed first (it wrote
    /// nothing that survived).
    pub fn assign(&mut self, epoch: LeaderEpoch, start_offset: i64) {
        if epoch.0 < 0 || self.latest_epoch().is_some_and(|latest| epoch <= latest) {
            return;
        }
        while self
            .entries
            .last()
            .is_some_and(|e| e.start_offset >= start_offset)
        {
            self.entries.pop();
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.dirty = true;
    }

    /// The epoch and end offset for a follower (or a consumer validating its position)
    /// that last had `epoch`, as Kafka's `endOffsetFor` answers: the largest known epoch
    /// not above it with the start offset of the first newer epoch, or `log_end` when
    /// `epoch` is the latest. An epoch older than any known (its data was deleted) gets
    /// itself with the first known epoch's start offset, so the follower truncates to
    /// where the log now starts. `None` (undefined) for -1, for an epoch newer than the
    /// latest, and for an empty cache.
    pub fn end_offset_for(&self, epoch: LeaderEpoch, log_end: i64) -> Option<(LeaderEpoch, i64)> {
        if epoch.0 < 0 {
            return None;
        }
        let latest = self.latest_epoch()?;
        if epoch == latest {
            return Some((latest, log_end));
        }
        let newer = self.entries.iter().position(|e| e.epoch > epoch)?;
        let next = self.entries.get(newer)?;
        match newer.checked_sub(1).and_then(|i| self.entries.get(i)) {
            Some(previous) => Some((previous.epoch, next.start_offset)),
            None => Some((epoch, next.start_offset)),
        }
    }

    /// The follower's side of the KIP-279 loop: the largest known epoch not above `epoch`
    /// and where it ends in this log (the start of the next known epoch, or `log_end`
    /// for the latest). The leader answered a divergence with `epoch`; if the answer's
    /// epoch differs, this replica never had `epoch`, truncates to the returned end and
    /// asks again with the returned epoch. Unlike [`Self::end_offset_for`] (the leader's
    /// answer), an epoch newer than the latest gets the latest and `log_end`. An epoch
    /// older than every known one gets itself with the first known start offset (as
    /// Kafka's `endOffsetFor`: that replica's data there was written in later epochs).
    /// `None` for -1 and for an empty cache.
    pub fn floor_end_offset(&self, epoch: LeaderEpoch, log_end: i64) -> Option<(LeaderEpoch, i64)> {
        if epoch.0 < 0 {
            return None;
        }
        let first = self.entries.first()?;
        let newer = self.entries.partition_point(|e| e.epoch <= epoch);
        let Some(floor) = newer.checked_sub(1).and_then(|i| self.entries.get(i)) else {
            return Some((epoch, first.start_offset));
        };
        let end = self.entries.get(newer).map_or(log_end, |e| e.start_offset);
        Some((floor.epoch, end))
    }

    /// Removes entries starting at or after `end_offset` (the log was truncated there).
    pub fn truncate_from_end(&mut self, end_offset: i64) {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        self.dirty |= self.entries.len() != before;
    }

    /// Moves the first entry up to `start_offset` and drops the entries wholly below it
    /// (the log start advanced).
    pub fn truncate_from_start(&mut self, start_offset: i64) {
        let keep_from = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset)
            .saturating_sub(1);
        if keep_from > 0 {
            self.entries.drain(..keep_from);
            self.dirty = true;
        }
        if let Some(first) = self.entries.first_mut() {
            if first.start_offset < start_offset {
                first.start_offset = start_offset;
                self.dirty = true;
            }
        }
    }

    /// Asks for the file to be written again (a write failed).
    pub(crate) fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// Forgets every entry (the log was emptied).
    pub fn clear(&mut self) {
        self.dirty |= !self.entries.is_empty();
        self.entries.clear();
    }

    /// The entries to write, if they changed since the last write; marks them written
    /// (a failed write fails the log, so it is never silently lost).
    pub(crate) fn take_checkpoint(&mut self) -> Option<EpochCheckpoint> {
        if !self.dirty {
            return None;
        }
        self.dirty = false;
        let mut text = format!("{VERSION}\n{}\n", self.entries.len());
        for e in &self.entries {
            text.push_str(&format!("{} {}\n", e.epoch.0, e.start_offset));
        }
        Some(EpochCheckpoint {
            path: self.path.clone(),
            text,
        })
    }
}

impl EpochCheckpoint {
    /// Writes the file durably. Blocking.
    pub(crate) fn write(&self) -> io::Result<()> {
        logbook_common::replace(&self.path, |out| out.write_all(self.text.as_bytes()))
    }
}

fn parse(text: &str) -> Result<Vec<EpochEntry>, String> {
    let mut lines = text.lines();
    if lines.next() != Some(VERSION) {
        return Err("unknown version".to_string());
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("bad entry count")?;
    let mut entries: Vec<EpochEntry> = Vec::with_capacity(count.min(1024));
    for line in lines.by_ref().take(count) {
        let mut words = line.split_ascii_whitespace();
        let epoch: i32 = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or("bad epoch")?;
        let start_offset: i64 = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or("bad offset")?;
        if entries
            .last()
            .is_some_and(|e| e.epoch.0 >= epoch || e.start_offset >= start_offset)
        {
            return Err("entries out of order".to_string());
        }
        entries.push(EpochEntry {
            epoch: LeaderEpoch(epoch),
            start_offset,
        });
    }
    if entries.len() != count {
        return Err("fewer entries than counted".to_string());
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    // An epoch older than the first known one (its data deleted) answers itself with the
    // first known epoch's start offset, as Kafka's `endOffsetFor` does.
    #[test]
    fn epoch_older_than_any_known_ends_where_the_known_ones_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cache = LeaderEpochFileCache::load(dir.path()).expect("load");
        assert_eq!(cache.end_offset_for(LeaderEpoch(0), 0), None, "empty cache");
        cache.assign(LeaderEpoch(3), 40);
        cache.assign(LeaderEpoch(5), 70);
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(1), 90),
            Some((LeaderEpoch(1), 40))
        );
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(4), 90),
            Some((LeaderEpoch(3), 70))
        );
    }

    // The follower's floor lookup: the largest epoch at or below the one asked for, ended
    // by the next known epoch's start or the log end; older than any known answers itself
    // with the first start (as Kafka's endOffsetFor), newer than any answers the latest.
    #[test]
    fn floor_end_offset_answers_the_largest_epoch_at_or_below() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cache = LeaderEpochFileCache::load(dir.path()).expect("load");
        assert_eq!(
            cache.floor_end_offset(LeaderEpoch(3), 9),
            None,
            "empty cache"
        );
        cache.assign(LeaderEpoch(1), 10);
        cache.assign(LeaderEpoch(3), 40);
        cache.assign(LeaderEpoch(6), 70);
        let floor = |e| cache.floor_end_offset(LeaderEpoch(e), 90);
        assert_eq!(floor(-1), None);
        assert_eq!(floor(0), Some((LeaderEpoch(0), 10)));
        assert_eq!(floor(1), Some((LeaderEpoch(1), 40)));
        assert_eq!(floor(2), Some((LeaderEpoch(1), 40)));
        assert_eq!(floor(3), Some((LeaderEpoch(3), 70)));
        assert_eq!(floor(5), Some((LeaderEpoch(3), 70)));
        assert_eq!(floor(6), Some((LeaderEpoch(6), 90)));
        assert_eq!(floor(9), Some((LeaderEpoch(6), 90)), "newer than any");
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(9), 90),
            None,
            "the leader's answer differs"
        );
    }

    // Assign keeps epochs increasing, truncation from either end, end offsets for a
    // follower, and the file round-trips in Kafka's text format.
    #[test]
    fn assign_truncate_and_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cache = LeaderEpochFileCache::load(dir.path()).expect("load");
        assert_eq!(cache.latest_epoch(), None);
        cache.assign(LeaderEpoch(0), 0);
        cache.assign(LeaderEpoch(0), 5); // same epoch: nothing
        cache.assign(LeaderEpoch(2), 10);
        cache.assign(LeaderEpoch(1), 12); // older: nothing
        cache.assign(LeaderEpoch(4), 20);
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(4), 30),
            Some((LeaderEpoch(4), 30))
        );
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(2), 30),
            Some((LeaderEpoch(2), 20))
        );
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(3), 30),
            Some((LeaderEpoch(2), 20))
        );
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(0), 30),
            Some((LeaderEpoch(0), 10))
        );
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(5), 30),
            None,
            "newer than any"
        );
        assert_eq!(cache.end_offset_for(LeaderEpoch(-1), 30), None, "undefined");
        cache
            .take_checkpoint()
            .expect("dirty")
            .write()
            .expect("write");
        assert!(cache.take_checkpoint().is_none(), "clean after a write");
        let text = fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE)).expect("read");
        assert_eq!(text, "0\n3\n0 0\n2 10\n4 20\n");

        let mut loaded = LeaderEpochFileCache::load(dir.path()).expect("load");
        assert_eq!(loaded.entries(), cache.entries());
        loaded.truncate_from_end(20);
        assert_eq!(loaded.latest_epoch(), Some(LeaderEpoch(2)));
        loaded.truncate_from_start(15);
        assert_eq!(
            loaded.entries(),
            &[EpochEntry {
                epoch: LeaderEpoch(2),
                start_offset: 15
            }]
        );
        // A new epoch at an offset not above the last entry replaces it.
        loaded.assign(LeaderEpoch(5), 15);
        assert_eq!(
            loaded.entries(),
            &[EpochEntry {
                epoch: LeaderEpoch(5),
                start_offset: 15
            }]
        );
        fs::write(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE), "0\n2\n1 5\n").expect("write");
        assert!(LeaderEpochFileCache::load(dir.path())
            .expect("load")
            .entries()
            .is_empty());
    }
}
