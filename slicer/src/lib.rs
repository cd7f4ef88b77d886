//! Slicer stage: timely + differential-dataflow maintain the citation graph and
//! production paths across epochs and fan incident slices out on adverse events.
#![warn(missing_docs)]
