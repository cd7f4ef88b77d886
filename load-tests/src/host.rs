//! The host a measurement runs on: the CPU and memory of processes read from `/proc`
//! (this process, a stage process, the local Kafka broker, the whole machine), the
//! single-core Ed25519 verification rate every benchmark reports its rates against,
//! and a Kafka bus built from `--kafka KEY=VALUE` flags.
//!
//! Design constraints:
//! - Linux only, read-only: every reader returns `None` (or zero) where `/proc` or a
//!   field is missing, so a benchmark reports a gap rather than failing.
//! - The Ed25519 reference is measured in the calling process, on the same machine and
//!   in the same run as the figure it is set beside.

use std::time::{Duration, Instant};

use audita_bus::kafka::KafkaBus;
use audita_evidence::derive_signing_key;
use ed25519_dalek::Signer as _;

/// A Kafka bus on `bootstrap` with the librdkafka settings of `--kafka KEY=VALUE`
/// flags (applied after Audita's defaults; a setting a guarantee rests on is refused,
/// [`audita_bus::kafka::FIXED_SETTINGS`]).
pub fn kafka_bus(bootstrap: &str, settings: &[String]) -> anyhow::Result<KafkaBus> {
    let pairs = settings
        .iter()
        .map(|s| {
            s.split_once('=')
                .filter(|(k, _)| !k.trim().is_empty())
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| anyhow::anyhow!("--kafka '{s}': want KEY=VALUE"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(KafkaBus::new(bootstrap)?.with_settings(pairs)?)
}

/// Resident memory of this process (KiB), from `/proc/self/status`; 0 when unreadable.
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Ed25519 `verify_strict` calls per second on one core of this machine, measured
/// now (20,000 verifications of a 180-byte message).
pub fn ed25519_single_core_per_s() -> f64 {
    let key = derive_signing_key(9, "bench");
    let vk = key.verifying_key();
    let msg = [7u8; 180];
    let sig = key.sign(&msg);
    let n = 20_000;
    let t = Instant::now();
    for _ in 0..n {
        let _ = std::hint::black_box(vk.verify_strict(std::hint::black_box(&msg), &sig));
    }
    n as f64 / t.elapsed().as_secs_f64()
}

/// The `p` quantile (0..=1, nearest rank) of `sorted`; zero when it is empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Resident memory of process `pid` (MiB), from `/proc/PID/status`.
pub fn proc_rss_mib(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = s
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

/// CPU seconds the whole machine has spent busy (every core; user, nice, system,
/// irq, softirq and steal time: everything but idle and I/O wait), from `/proc/stat`.
pub fn machine_busy_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let line = s.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|v| v.parse::<f64>().ok())
        .collect::<Option<_>>()?;
    let busy = f.iter().sum::<f64>() - f.get(3)? - f.get(4)?;
    Some(busy / clock_ticks_per_s())
}

/// CPU seconds of a process (utime + stime), from `/proc/PID/stat`.
pub fn proc_cpu_s(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat (utime, stime), counted after the command name.
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / clock_ticks_per_s())
}

/// The kernel's clock ticks per second (the unit of `/proc`'s CPU times).
fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    #[allow(unsafe_code)]
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// CPU time of this process, ns resolution.
pub fn self_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// The local Kafka broker's pid, if exactly one `kafka.Kafka` java process runs.
pub fn find_broker() -> Option<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if cmd.split(|b| *b == 0).any(|a| a == b"kafka.Kafka") {
            found.push(pid);
        }
    }
    (found.len() == 1).then(|| found[0])
}
