//! Sinks: verdict rows to Parquet, verdicts to the verdict topic, and Prometheus
//! metrics for every stage.
#![warn(missing_docs)]
