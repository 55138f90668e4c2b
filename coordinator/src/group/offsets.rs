//! Committed offsets: what OffsetCommit stores and OffsetFetch returns, and the limits Kafka
//! applies to them.

/// Kafka's `offset.metadata.max.bytes` default: longer commit metadata strings are refused
/// with OFFSET_METADATA_TOO_LARGE.
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;

/// One committed offset of a group for one partition (Kafka's `OffsetAndMetadata`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    /// The next offset the group will consume.
    pub offset: i64,
    /// The leader epoch of the last consumed record, or -1.
    pub leader_epoch: i32,
    /// The client's metadata string ("" when it sent none).
    pub metadata: String,
    /// When the commit was made, in ms since the epoch.
    pub commit_timestamp_ms: i64,
}

/// A committed offset's key: topic and partition.
pub type OffsetKey = (String, i32);

/// A group's committed offsets in two views, as Kafka's group coordinator keeps them in a
/// timeline and reads it at the last committed offset of `__consumer_offsets`.
///
/// The *latest* view has every change applied in log order, the moment its batch is
/// appended: commits validate against it, and expiry and OffsetDelete act on it. The
/// *committed* view, which OffsetFetch answers from, holds only the changes whose batch the
/// partition's high watermark has passed: an offset is never returned before it is durable
/// (a consumer that fetched it could otherwise skip records after a failover that loses the
/// commit), and a commit answered with a timeout becomes visible only if its batch does
/// become committed — as on Kafka. Each change above the high watermark keeps the value it
/// replaced, so the committed view is the latest one with those changes undone.
#[derive(Debug, Default)]
pub struct GroupOffsets {
    latest: std::collections::BTreeMap<OffsetKey, OffsetAndMetadata>,
    /// Changes not yet known to be under the high watermark, in the order they were applied:
    /// the offset their batch ends before, the key, and the value before the change.
    undo: Vec<(i64, OffsetKey, Option<OffsetAndMetadata>)>,
}

impl GroupOffsets {
    /// Applies a change (`None` removes the offset). `batch_end` is the offset the change's
    /// batch ends before; `None` for changes replayed from the log, which are committed.
    pub fn apply(
        &mut self,
        key: OffsetKey,
        value: Option<OffsetAndMetadata>,
        batch_end: Option<i64>,
    ) {
        let before = match value {
            Some(v) => self.latest.insert(key.clone(), v),
            None => self.latest.remove(&key),
        };
        if let Some(end) = batch_end {
            self.undo.push((end, key, before));
        }
    }

    /// The latest value of `key`, committed or not.
    #[must_use]
    pub fn latest(&self) -> &std::collections::BTreeMap<OffsetKey, OffsetAndMetadata> {
        &self.latest
    }

    /// How many changes are kept above the last pruned high watermark.
    #[cfg(test)]
    pub fn uncommitted_changes(&self) -> usize {
        self.undo.len()
    }

    /// Forgets the undo entries of changes under `high_watermark`: they are committed.
    pub fn prune(&mut self, high_watermark: i64) {
        self.undo.retain(|(end, _, _)| *end > high_watermark);
    }

    /// The value of `key` once every change above `high_watermark` is undone.
    #[must_use]
    pub fn committed(&self, key: &OffsetKey, high_watermark: i64) -> Option<OffsetAndMetadata> {
        // The oldest change above the high watermark holds the committed value.
        match self
            .undo
            .iter()
            .find(|(end, k, _)| *end > high_watermark && k == key)
        {
            Some((_, _, before)) => before.clone(),
            None => self.latest.get(key).cloned(),
        }
    }

    /// Every committed offset at `high_watermark`, in key order.
    #[must_use]
    pub fn all_committed(&self, high_watermark: i64) -> Vec<(OffsetKey, OffsetAndMetadata)> {
        let mut keys: std::collections::BTreeSet<&OffsetKey> = self.latest.keys().collect();
        keys.extend(
            self.undo
                .iter()
                .filter(|(end, _, _)| *end > high_watermark)
                .map(|(_, k, _)| k),
        );
        keys.into_iter()
            .filter_map(|k| Some((k.clone(), self.committed(k, high_watermark)?)))
            .collect()
    }
}
