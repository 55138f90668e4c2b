//! A topic name and partition index, as Kafka's `org.apache.kafka.common.TopicPartition`
//! names one: here so that the coordinators, which see partitions only through traits, name
//! them with the same type the replication layer uses.

use std::fmt;

/// A topic name and partition index, as Kafka names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index within the topic.
    pub partition: i32,
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}
