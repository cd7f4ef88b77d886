//! `DutyRegistry::from_json` (verdict/SCHEMA.md) never panics on any text, and a
//! registry it accepts validates without panicking.
#![no_main]

use audita_verdict::DutyRegistry;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(d) = DutyRegistry::from_json(text) {
        let _ = d.validate();
    }
});
