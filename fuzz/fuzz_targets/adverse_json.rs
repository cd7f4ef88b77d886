//! `Adverse::from_json` (verdict/SCHEMA.md) never panics on any text, and every
//! declaration it accepts has a finite, non-negative severity (never `null` in a
//! verdict) and a window that does not end before it starts.
#![no_main]

use audita_verdict::Adverse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(a) = Adverse::from_json(text) {
        let j = a.severity_j();
        assert!(j.is_finite() && j >= 0.0, "severity {j}");
        assert!(a.decl.window_end() >= a.decl.window_start_ms);
    }
});
