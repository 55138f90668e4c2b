//! `OffsetMap`: the cleaner's fixed-size key → latest-offset table (Kafka's
//! `SkimpyOffsetMap`). A pass records, for every key of the dirty section, the offset of
//! its newest record; the rewrite then keeps a record only if no newer one of its key is
//! in the map. The table never grows: its size is `log.cleaner.dedupe.buffer.size`, and a
//! pass that would overfill it cleans only up to where it fits.
//!
//! Keys are not stored, only a 128-bit hash of each, so a 1 KiB key costs the same 24
//! bytes as an 8-byte one. Why two SipHash-1-3 halves rather than MD5 as Kafka uses: the
//! only property needed is that distinct keys practically never collide (a collision
//! would drop the older key's latest record); 128 bits of a pseudo-random function give
//! a collision probability of about n²/2¹²⁹ (below 10⁻²⁴ for 10⁸ keys), SipHash is in
//! std (no new dependency) and is several times faster than MD5 on short keys.

use std::hash::{DefaultHasher, Hasher};

/// Bytes one slot takes: two u64 hash halves and an i64 offset.
pub(crate) const SLOT_BYTES: usize = 24;
const _: () = assert!(std::mem::size_of::<Slot>() == SLOT_BYTES);

/// Fraction of the slots a pass may fill (Kafka's `log.cleaner.io.buffer.load.factor`
/// default): linear probing stays short below it.
const LOAD_FACTOR: f64 = 0.9;

/// Offset of an empty slot (a record offset is never negative).
const EMPTY: i64 = -1;

#[derive(Clone, Copy, Debug)]
struct Slot {
    hash: [u64; 2],
    offset: i64,
}

/// Open-addressing hash table of `capacity` slots with linear probing.
///
/// Invariants: `entries <= max_entries < slots.len()`, so a probe always ends at an empty
/// slot; an occupied slot holds the largest offset put for its hash.
pub struct OffsetMap {
    slots: Vec<Slot>,
    entries: usize,
    max_entries: usize,
    /// Largest offset put since the last clear, -1 if none.
    latest_offset: i64,
}

/// The 128-bit hash of a key.
fn hash_key(key: &[u8]) -> [u64; 2] {
    let mut first = DefaultHasher::new();
    first.write(key);
    let mut second = DefaultHasher::new();
    // A different prefix makes the second half an independent function of the key.
    second.write_u8(0xa5);
    second.write(key);
    [first.finish(), second.finish()]
}

impl OffsetMap {
    /// A map using about `buffer_bytes` of memory (at least 16 slots).
    #[must_use]
    pub fn new(buffer_bytes: usize) -> Self {
        let capacity = (buffer_bytes / SLOT_BYTES).max(16);
        let empty = Slot {
            hash: [0, 0],
            offset: EMPTY,
        };
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "a fraction of a slot count, well inside f64's exact range"
        )]
        let max_entries = ((capacity as f64 * LOAD_FACTOR) as usize).min(capacity - 1);
        Self {
            slots: vec![empty; capacity],
            entries: 0,
            max_entries,
            latest_offset: -1,
        }
    }

    /// Memory a map needs to hold `keys` keys below its load factor.
    #[must_use]
    pub fn bytes_for(keys: usize) -> usize {
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "a slot count estimate; saturates on overflow"
        )]
        let slots = (keys as f64 / LOAD_FACTOR) as usize;
        slots.saturating_add(2).saturating_mul(SLOT_BYTES)
    }

    /// Keys the map can hold in one pass.
    #[must_use]
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// Keys held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries
    }

    /// True when no key is held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Room for `n` more distinct keys.
    #[must_use]
    pub fn has_room_for(&self, n: usize) -> bool {
        self.entries + n <= self.max_entries
    }

    /// Largest offset put since the last clear (-1 if none).
    #[must_use]
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    /// Empties the map for the next pass.
    pub fn clear(&mut self) {
        for slot in &mut self.slots {
            slot.offset = EMPTY;
        }
        self.entries = 0;
        self.latest_offset = -1;
    }

    fn probe(&self, hash: [u64; 2]) -> usize {
        let len = self.slots.len();
        #[expect(
            clippy::cast_possible_truncation,
            reason = "only the low bits pick a slot"
        )]
        let mut i = (hash[0] as usize) % len;
        loop {
            let slot = self.slots.get(i).expect("i < len");
            if slot.offset == EMPTY || slot.hash == hash {
                return i;
            }
            i = (i + 1) % len;
        }
    }

    /// Records `offset` as the latest of `key` (offsets are put in increasing order).
    ///
    /// # Panics
    /// If the map is full: the caller checks [`OffsetMap::has_room_for`] first.
    pub fn put(&mut self, key: &[u8], offset: i64) {
        let hash = hash_key(key);
        let i = self.probe(hash);
        let slot = self.slots.get_mut(i).expect("probe returns an index < len");
        if slot.offset == EMPTY {
            assert!(
                self.entries < self.max_entries,
                "offset map full: {} entries",
                self.entries
            );
            self.entries += 1;
            slot.hash = hash;
        }
        slot.offset = slot.offset.max(offset);
        self.latest_offset = self.latest_offset.max(offset);
    }

    /// The latest offset recorded for `key`, if any.
    #[must_use]
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        let slot = self.slots.get(self.probe(hash_key(key)))?;
        (slot.offset != EMPTY).then_some(slot.offset)
    }
}
