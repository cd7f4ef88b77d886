//! From a verified record to a verdict (SPEC §3–4): incident slice, production gate,
//! witness-grade edges, intervals over completions, duties, breach and blame-shift
//! certificates. A pure library.
#![warn(missing_docs)]
