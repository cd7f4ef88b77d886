//! Test support: a real Apache Kafka broker for integration tests.
//!
//! [`KafkaBroker::start`] uses the broker named by `AUDITA_KAFKA_BOOTSTRAP` when it is
//! set (`.ci/run` starts one for the whole suite); otherwise it starts a private
//! single-node KRaft broker with `.ci/kafka.sh` (resolving the Apache Kafka jars
//! through Maven on first use) and stops it on drop. There is no fallback: if no
//! broker can be had, `start` fails with the reason and the test fails loudly.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// A running broker for the duration of a test.
pub struct KafkaBroker {
    bootstrap: String,
    owned_run_dir: Option<PathBuf>,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.ci/kafka.sh")
}

impl KafkaBroker {
    /// The broker of `AUDITA_KAFKA_BOOTSTRAP`, or a freshly started private one.
    pub fn start() -> Result<KafkaBroker, String> {
        if let Ok(b) = std::env::var("AUDITA_KAFKA_BOOTSTRAP") {
            if !b.trim().is_empty() {
                return Ok(KafkaBroker {
                    bootstrap: b.trim().to_string(),
                    owned_run_dir: None,
                });
            }
        }
        KafkaBroker::start_private()
    }

    /// A private single-node broker of this test alone (never the shared one), which
    /// the test may [`stop`](Self::stop) and [`restart`](Self::restart).
    pub fn start_private() -> Result<KafkaBroker, String> {
        KafkaBroker::start_private_proxied(0)
    }

    /// A private broker with `proxied` more listeners for clients that reach it through
    /// a proxy (`.ci/kafka.sh`: [`Self::proxied`] lists their ports).
    pub fn start_private_proxied(proxied: usize) -> Result<KafkaBroker, String> {
        let run = std::env::temp_dir().join(format!(
            "audita-kafka-{}-{}",
            std::process::id(),
            UNIQUE.fetch_add(1, Ordering::SeqCst)
        ));
        let out = Command::new("bash")
            .env("AUDITA_KAFKA_PROXIED", proxied.to_string())
            .arg(script())
            .arg("start")
            .arg(&run)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script().display()))?;
        if !out.status.success() {
            return Err(format!(
                "no Kafka broker: AUDITA_KAFKA_BOOTSTRAP is unset and starting one failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let bootstrap = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok(KafkaBroker {
            bootstrap,
            owned_run_dir: Some(run),
        })
    }

    /// `host:port` of the broker.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// The run directory of a private broker (`.ci/kafka.sh start RUNDIR`).
    pub fn run_dir(&self) -> Option<&std::path::Path> {
        self.owned_run_dir.as_deref()
    }

    /// The proxied listeners of a private broker: (upstream port the broker listens
    /// on, proxy port it advertises), one per listener.
    pub fn proxied(&self) -> Vec<(u16, u16)> {
        let text = self
            .owned_run_dir
            .as_ref()
            .and_then(|r| std::fs::read_to_string(r.join("proxied")).ok())
            .unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                let (a, b) = l.split_once(' ')?;
                Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
            })
            .collect()
    }

    /// SIGKILLs a private broker (its data stays as the kill left it;
    /// [`Self::restart`] brings it back).
    pub fn kill(&self) -> Result<(), String> {
        self.control("kill")
    }

    fn control(&self, what: &str) -> Result<(), String> {
        let run = self
            .owned_run_dir
            .as_ref()
            .ok_or_else(|| format!("cannot {what} the shared broker (use start_private)"))?;
        let out = Command::new("bash")
            .arg(script())
            .arg(what)
            .arg(run)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script().display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "kafka {what} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Stops a private broker (its data stays; [`Self::restart`] brings it back).
    pub fn stop(&self) -> Result<(), String> {
        self.control("stop")
    }

    /// Starts a stopped private broker again on the same address with its data.
    pub fn restart(&self) -> Result<(), String> {
        self.control("restart")
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        if let Some(run) = &self.owned_run_dir {
            let _ = Command::new("bash")
                .arg(script())
                .arg("stop")
                .arg(run)
                .status();
            let _ = std::fs::remove_dir_all(run);
        }
    }
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

/// A topic or group name no other test run uses, so tests can share one broker.
pub fn unique_name(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{prefix}-{}-{nanos}-{}",
        std::process::id(),
        UNIQUE.fetch_add(1, Ordering::SeqCst)
    )
}
