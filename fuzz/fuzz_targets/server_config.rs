//! `sluice.toml` as `sluice serve` loads it, from arbitrary text: no panic,
//! and every refusal says what is wrong.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(error) = sluice_server::Config::parse(text, "sluice.toml") {
        assert!(!error.to_string().is_empty());
    }
});
