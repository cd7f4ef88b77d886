//! How long past a window's end a stage downstream of the sealer waits before it
//! treats the window as complete: the grace, adapted to how late sealed messages
//! actually arrive.
//!
//! The sealer's event-time watermark promises that everything stamped before it is
//! sealed — if every source partition is written in time order. A producer that
//! publishes late (a device behind a slow link, a client draining its spool, two
//! principals on one partition with skewed clocks) breaks that premise: its message
//! arrives after the watermark passed its timestamp. A window judged the moment the
//! watermark passes its end would miss it. So the slicer (and the monitor, before it
//! declares) waits `grace` more of record time, where `grace` follows the lateness
//! observed in the sealed stream itself.
//!
//! Design constraints:
//! - **Lateness** of a sealed message: how far the watermark the stage held before
//!   the message's epoch was already past the message's timestamp (0 when not past).
//!   A message whose lateness is below the grace in force arrives before any window
//!   holding it is judged.
//! - **Grace** = 5/4 × the largest lateness observed over the last
//!   [`GRACE_WINDOW_MS`] of record time, plus [`GRACE_MARGIN_MS`], within
//!   [`GRACE_MIN_MS`]..=[`GRACE_MAX_MS`]; at least [`GRACE_COLD_MS`] until
//!   [`GRACE_WARMUP_MS`] of the stream has been observed. An in-order fleet thus
//!   waits ~0.1 s, a late source raises the grace at once, and it decays once the
//!   source catches up.
//! - The warm-up is short (5 s of record time, not the 30 s lateness is
//!   remembered over): every sealed message is a sample of the lateness, so a few
//!   seconds of a fleet's stream are tens of thousands of them, and a source that
//!   turns late later raises the grace at once anyway. A longer warm-up only
//!   delayed every verdict of a stage's first half minute by the cold grace (it
//!   was most of the tail of the verdict latency at 200 robots, BENCHMARKS.md).
//! - The trade-off: a message later than [`GRACE_MAX_MS`] can still miss its window
//!   (a cited one is then judged missing and named; an uncited one is absent), and a
//!   late source delays every verdict by up to that much while it lasts.
//! - Pure and deterministic in its inputs (record times only, no wall clock).

use std::collections::VecDeque;

/// Least grace (ms of record time): above the ingest watermark cadence's jitter.
pub const GRACE_MIN_MS: u64 = 100;
/// Most grace (ms of record time).
pub const GRACE_MAX_MS: u64 = 5_000;
/// Least grace before [`GRACE_WARMUP_MS`] of the stream was observed (ms).
pub const GRACE_COLD_MS: u64 = 1_000;
/// Record time a stage observes the stream for before the adapted grace alone is
/// in force (ms).
pub const GRACE_WARMUP_MS: u64 = 5_000;
/// Record time over which lateness is remembered (ms).
pub const GRACE_WINDOW_MS: u64 = 30_000;
/// Added to the scaled lateness (ms).
pub const GRACE_MARGIN_MS: u64 = 50;

/// The lateness observed in a sealed stream, and the grace it calls for.
#[derive(Clone, Debug, Default)]
pub struct Grace {
    /// (watermark after the epoch, largest lateness in it), oldest first; only
    /// epochs with lateness > 0 are kept.
    late: VecDeque<(u64, u64)>,
    /// The watermark held before the next epoch.
    watermark: u64,
    /// The first positive watermark observed.
    since: Option<u64>,
}

impl Grace {
    /// A tracker that has seen nothing yet.
    pub fn new() -> Grace {
        Grace::default()
    }

    /// Notes one epoch: the timestamps of the messages it sealed and the watermark
    /// it carries.
    pub fn observe(&mut self, timestamps: impl IntoIterator<Item = u64>, watermark: u64) {
        let worst = if self.watermark > 0 {
            timestamps
                .into_iter()
                .map(|t| self.watermark.saturating_sub(t))
                .max()
                .unwrap_or(0)
        } else {
            0
        };
        self.observe_lateness(worst, watermark);
    }

    /// Notes one epoch by the largest lateness of its messages, measured against
    /// the watermark held before it ([`Grace::watermark`]), and the watermark it
    /// carries: what [`Grace::observe`] does with the timestamps, for a reader that
    /// sees them in parts (each shard of a slicer cluster measures its own).
    pub fn observe_lateness(&mut self, worst: u64, watermark: u64) {
        if self.watermark > 0 && worst > 0 {
            self.late.push_back((watermark.max(self.watermark), worst));
        }
        if watermark > self.watermark {
            self.watermark = watermark;
            self.since.get_or_insert(watermark);
        }
        let horizon = self.watermark.saturating_sub(GRACE_WINDOW_MS);
        while self.late.front().is_some_and(|(w, _)| *w < horizon) {
            self.late.pop_front();
        }
    }

    /// The watermark held before the next epoch (what lateness is measured against).
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// The grace now (ms of record time).
    pub fn ms(&self) -> u64 {
        let warm = self
            .since
            .is_some_and(|s| self.watermark >= s.saturating_add(GRACE_WARMUP_MS));
        let worst = self.late.iter().map(|(_, l)| *l).max().unwrap_or(0);
        let adapted = (worst.saturating_mul(5) / 4)
            .saturating_add(GRACE_MARGIN_MS)
            .clamp(GRACE_MIN_MS, GRACE_MAX_MS);
        if warm {
            adapted
        } else {
            adapted.max(GRACE_COLD_MS)
        }
    }

    /// The largest lateness remembered (ms).
    pub fn worst_lateness_ms(&self) -> u64 {
        self.late.iter().map(|(_, l)| *l).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_order_stream_earns_the_least_grace_once_warm() {
        let mut g = Grace::new();
        assert_eq!(g.ms(), GRACE_COLD_MS);
        for i in 0..400u64 {
            let t = 1_000_000 + i * 100;
            g.observe([t - 90, t - 10], t);
        }
        assert_eq!(g.ms(), GRACE_MIN_MS);
    }

    #[test]
    fn the_cold_grace_holds_for_the_warm_up_only() {
        let mut g = Grace::new();
        let start = 1_000_000u64;
        let mut t = start;
        // The first watermark starts the warm-up.
        g.observe([t - 10], t);
        assert_eq!(g.ms(), GRACE_COLD_MS);
        while t < start + GRACE_WARMUP_MS - 100 {
            t += 100;
            g.observe([t - 10], t);
            assert_eq!(g.ms(), GRACE_COLD_MS, "at {} ms", t - start);
        }
        t += 100;
        g.observe([t - 10], t);
        assert_eq!(g.ms(), GRACE_MIN_MS);
        // Lateness seen during the warm-up still counts once warm.
        let mut h = Grace::new();
        h.observe([start], start);
        h.observe([start - 3_000], start + 100);
        h.observe([start + GRACE_WARMUP_MS], start + GRACE_WARMUP_MS + 100);
        assert_eq!(h.ms(), 3_000 * 5 / 4 + GRACE_MARGIN_MS);
    }

    #[test]
    fn a_late_source_raises_the_grace_at_once_and_it_decays() {
        let mut g = Grace::new();
        let mut t = 1_000_000u64;
        for _ in 0..400 {
            t += 100;
            g.observe([t - 50], t);
        }
        // A message 2 s behind the watermark: the grace covers it from now on.
        t += 100;
        g.observe([t - 2_100], t);
        assert_eq!(g.worst_lateness_ms(), 2_000);
        assert_eq!(g.ms(), 2_000 * 5 / 4 + GRACE_MARGIN_MS);
        // Far beyond: capped.
        g.observe([t - 60_000], t);
        assert_eq!(g.ms(), GRACE_MAX_MS);
        // A window of in-order traffic later, forgotten.
        for _ in 0..301 {
            t += 100;
            g.observe([t - 50], t);
        }
        assert_eq!(g.ms(), GRACE_MIN_MS);
    }

    #[test]
    fn an_empty_epoch_or_a_standing_watermark_changes_nothing() {
        let mut g = Grace::new();
        g.observe([], 0);
        g.observe([5], 0);
        assert_eq!(g.worst_lateness_ms(), 0);
        g.observe([10], 100);
        g.observe([], 100);
        assert_eq!(g.worst_lateness_ms(), 0);
        g.observe([40], 100);
        assert_eq!(g.worst_lateness_ms(), 60);
    }
}
