//! The real Alertmanager for tests: Debian's `prometheus-alertmanager`, started on a
//! loopback port with a null receiver, and waited for until ready.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts Alertmanager on `127.0.0.1:port` with its configuration and state in `dir`
/// (grouped by `alertname` and `site`, no receiver), ready within 20 s, or panics
/// naming what is missing.
pub fn start_alertmanager(port: u16, dir: &Path) -> Child {
    let config = dir.join("alertmanager.yml");
    std::fs::write(
        &config,
        "route:\n  receiver: \"null\"\n  group_by: [alertname, site]\nreceivers:\n  - name: \"null\"\n",
    )
    .expect("writing alertmanager.yml");
    let child = Command::new("prometheus-alertmanager")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus-alertmanager (Debian's package; .ci/prereqs.sh installs it)");
    let deadline = Instant::now() + Duration::from_secs(20);
    while ureq::get(&format!("http://127.0.0.1:{port}/-/ready"))
        .call()
        .is_err()
    {
        assert!(Instant::now() < deadline, "Alertmanager not ready in 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}
