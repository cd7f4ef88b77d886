//! Engine workers: a consumer group that gates, grades, certifies and writes the
//! verdict for each incident slice. Verdicts do not depend on the number of workers.
#![warn(missing_docs)]
