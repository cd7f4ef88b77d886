//! A stage that cannot write resumes by itself: the in-process supervisor of a stage's
//! run loop.
//!
//! Design constraints:
//! - Every stage commits an input offset only after its effect is durable (the sealer's
//!   record on disk, every produced record acknowledged by the broker, the sink's
//!   journal), and a stage reopened on the same directory and consumer group resumes
//!   from exactly that durable state: it is what a SIGKILL and a restart already do,
//!   and what the kill tests check. So a stage whose output cannot be written (the
//!   broker unreachable past the producer's delivery timeout, a full or failing disk)
//!   stops: its loop returns the error, nothing past what is durable is committed, and
//!   the supervisor opens the stage again from its durable state once it has waited
//!   ([`Backoff`]), for as long as the fault lasts.
//! - It says so while it cannot keep up: one log line per failure naming the stage, the
//!   cause and the wait; `audita_stage_stalled` is 1 and `/readyz` answers 503 until
//!   the stage runs again; `audita_stage_faults_total{reason}` counts the failures
//!   (`bus`, `storage`, `cluster`: a slicer cluster that lost a member and reforms),
//!   which the chart's `AuditaStageCannotWrite` alert reads.
//! - Only faults a wait can heal are retried ([`Error::heals_by_waiting`]): a record
//!   that does not reproduce its own seals, a bad setting or an undecodable file stops
//!   the process with its one-line error, as before.

use crate::metrics::Metrics;
use crate::{Error, Result};
use audita_sealer::stage::StageError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The waits between attempts: 1 s doubling up to 10 s; a run that lasted longer than
/// [`Backoff::HEALTHY`] starts the sequence again.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    /// The first wait.
    pub first: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Backoff {
    /// A run this long was healthy: the next failure waits [`Backoff::first`] again.
    pub const HEALTHY: Duration = Duration::from_secs(60);
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            first: Duration::from_secs(1),
            // A healed fault is noticed within 10 s; a fault that lasts costs one
            // attempt (an open from durable state) per 10 s.
            max: Duration::from_secs(10),
        }
    }
}

impl Error {
    /// The kind of a fault a wait can heal (`bus`: the broker unreachable or not
    /// acknowledging; `storage`: a file could not be read or written, e.g. a full
    /// disk), or `None` for one it cannot (an inconsistent record, a bad setting).
    pub fn heals_by_waiting(&self) -> Option<&'static str> {
        let bus = |e: &audita_bus::BusError| e.is_transient().then_some("bus");
        match self {
            Error::Bus(e) => bus(e),
            Error::Sealer(StageError::Bus(e)) => bus(e),
            Error::Sealer(StageError::Disk(e)) => e.is_transient().then_some("storage"),
            Error::Sealer(StageError::Tiles(audita_record::tiles::TileError::Disk(e))) => {
                e.is_transient().then_some("storage")
            }
            Error::Slicer(audita_slicer::stage::SlicerError::Bus(e)) => bus(e),
            Error::Slicer(audita_slicer::stage::SlicerError::Spill(_)) => Some("storage"),
            // A slicer cluster member lost: the members reform once all are back.
            Error::Slicer(audita_slicer::stage::SlicerError::Cluster(_)) => Some("cluster"),
            Error::Sink(audita_sinks::parquet::SinkError::Bus(e)) => bus(e),
            Error::Sink(audita_sinks::parquet::SinkError::Io { .. }) => Some("storage"),
            _ => None,
        }
    }
}

/// Runs `attempt` (one life of stage `stage`: open from durable state, run until
/// stopped) until it returns `Ok` or a fault no wait heals; between attempts, waits per
/// `backoff` (or until `stop` is set) with the stage marked stalled and not ready.
pub fn supervise<T>(
    stage: &str,
    m: &Metrics,
    stop: &AtomicBool,
    backoff: Backoff,
    mut attempt: impl FnMut() -> Result<T>,
) -> Result<T> {
    let mut wait = backoff.first;
    loop {
        let began = Instant::now();
        let err = match attempt() {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let Some(reason) = err.heals_by_waiting() else {
            return Err(err);
        };
        if stop.load(Ordering::SeqCst) {
            return Err(err);
        }
        if began.elapsed() >= Backoff::HEALTHY {
            wait = backoff.first;
        }
        m.stage_faults.with_label_values(&[reason]).inc();
        m.stage_stalled.set(1);
        m.set_ready(false);
        tracing::error!(
            stage,
            reason,
            error = %err,
            wait_s = wait.as_secs_f64(),
            "stage cannot keep its promise: stopped taking input, nothing past its durable state committed; reopening from that state after the wait"
        );
        let until = Instant::now() + wait;
        while Instant::now() < until && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
        }
        if stop.load(Ordering::SeqCst) {
            return Err(err);
        }
        wait = (wait * 2).min(backoff.max);
        m.stage_stalled.set(0);
        m.set_ready(true);
        tracing::info!(stage, "stage reopening from its durable state");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use audita_bus::BusError;
    use std::cell::Cell;

    fn quick() -> Backoff {
        Backoff {
            first: Duration::from_millis(1),
            max: Duration::from_millis(4),
        }
    }

    #[test]
    fn a_stage_whose_broker_fails_runs_again_and_is_counted() {
        let m = Metrics::new();
        let stop = AtomicBool::new(false);
        let tries = Cell::new(0);
        let got = supervise("sealer", &m, &stop, quick(), || {
            tries.set(tries.get() + 1);
            if tries.get() < 3 {
                Err(Error::Bus(BusError::Transient("all brokers down".into())))
            } else {
                Ok(7)
            }
        });
        assert_eq!(got.unwrap(), 7);
        assert_eq!(tries.get(), 3);
        assert_eq!(m.stage_faults.with_label_values(&["bus"]).get(), 2);
        assert_eq!(m.stage_stalled.get(), 0);
    }

    #[test]
    fn a_full_disk_heals_by_waiting_and_an_inconsistent_record_does_not() {
        let full = Error::Sealer(StageError::Disk(audita_record::ReadError::Io {
            path: "/r/seg".into(),
            source: std::io::Error::from_raw_os_error(28), // ENOSPC
        }));
        assert_eq!(full.heals_by_waiting(), Some("storage"));
        let forked = Error::Sealer(StageError::Inconsistent("/r".into(), "fork".into()));
        assert_eq!(forked.heals_by_waiting(), None);
        let m = Metrics::new();
        let stop = AtomicBool::new(false);
        let tries = Cell::new(0);
        let got: Result<()> = supervise("sealer", &m, &stop, quick(), || {
            tries.set(tries.get() + 1);
            Err(Error::Sealer(StageError::Inconsistent(
                "/r".into(),
                "fork".into(),
            )))
        });
        assert!(got.is_err());
        assert_eq!(tries.get(), 1, "a fault no wait heals is not retried");
        assert_eq!(
            Error::Bus(BusError::Permanent("unknown topic".into())).heals_by_waiting(),
            None
        );
    }

    #[test]
    fn a_stop_during_the_wait_ends_the_supervisor() {
        let m = Metrics::new();
        let stop = AtomicBool::new(false);
        let tries = Cell::new(0);
        let got: Result<()> = supervise(
            "sink",
            &m,
            &stop,
            Backoff {
                first: Duration::from_secs(3600),
                max: Duration::from_secs(3600),
            },
            || {
                tries.set(tries.get() + 1);
                stop.store(true, Ordering::SeqCst);
                Err(Error::Bus(BusError::Transient("down".into())))
            },
        );
        assert!(got.is_err());
        assert_eq!(tries.get(), 1);
    }
}
