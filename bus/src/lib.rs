//! The transport the stages share: one `Bus` interface with an embedded in-process
//! implementation and an Apache Kafka implementation (rdkafka).
#![warn(missing_docs)]
