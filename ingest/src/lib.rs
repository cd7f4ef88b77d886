//! Ingest stage: consumes signed envelopes, checks form and signature, and quarantines
//! failures to the suspect topic with a reason. Nothing is silently dropped.
#![warn(missing_docs)]
