//! `BrokerTopicStats` (Kafka's per-topic BytesIn/BytesOut/MessagesIn): what producers
//! appended to and consumers read from each topic.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use metrics::{counter, Counter};
use parking_lot::RwLock;

/// One topic's counters.
struct TopicStats {
    bytes_in: Counter,
    records_in: Counter,
    bytes_out: Counter,
    records_out: Counter,
}

/// Per-topic counters, resolved on a topic's first use and kept by name.
pub struct BrokerTopicStats {
    topics: RwLock<HashMap<String, Arc<TopicStats>>>,
}

impl BrokerTopicStats {
    fn global() -> &'static BrokerTopicStats {
        static GLOBAL: OnceLock<BrokerTopicStats> = OnceLock::new();
        GLOBAL.get_or_init(|| BrokerTopicStats {
            topics: RwLock::new(HashMap::new()),
        })
    }

    fn topic(&self, name: &str) -> Arc<TopicStats> {
        if let Some(stats) = self.topics.read().get(name) {
            return Arc::clone(stats);
        }
        let label = name.to_string();
        Arc::clone(
            self.topics
                .write()
                .entry(name.to_string())
                .or_insert_with(|| {
                    Arc::new(TopicStats {
                        bytes_in: counter!("logbook_topic_bytes_in_total", "topic" => label.clone()),
                        records_in: counter!("logbook_topic_records_in_total", "topic" => label.clone()),
                        bytes_out: counter!("logbook_topic_bytes_out_total", "topic" => label.clone()),
                        records_out: counter!("logbook_topic_records_out_total", "topic" => label),
                    })
                }),
        )
    }

    /// A producer's `records` records of `bytes` were appended to `topic`.
    pub fn appended(topic: &str, bytes: usize, records: u64) {
        if !super::enabled() {
            return;
        }
        let stats = Self::global().topic(topic);
        stats.bytes_in.increment(bytes as u64);
        stats.records_in.increment(records);
    }

    /// `bytes` of `topic`, spanning `offsets` offsets, were sent to a consumer.
    pub fn fetched(topic: &str, bytes: usize, offsets: u64) {
        if !super::enabled() || bytes == 0 {
            return;
        }
        let stats = Self::global().topic(topic);
        stats.bytes_out.increment(bytes as u64);
        stats.records_out.increment(offsets);
    }
}
