//! The proxy's protocol observer on arbitrary bytes in both directions, cut
//! into arbitrary reads: no panic, no hang, and a report at the end.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_fuzz::Bytes;
use sluice_proxy::observe::Observer;

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let mut observer = Observer::new();
    let mut rest = input.rest().to_vec();
    while !rest.is_empty() {
        let mut header = Bytes(&rest);
        let from_server = header.byte() & 1 == 1;
        let size = usize::from(header.byte()).min(header.rest().len());
        let chunk = header.rest()[..size].to_vec();
        let after = header.rest()[size..].to_vec();
        if from_server {
            observer.from_server(&chunk);
        } else {
            observer.from_client(&chunk);
        }
        rest = after;
    }
    input.byte();
    let _ = format!("{observer:?}");
});
