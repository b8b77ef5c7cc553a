//! NDJSON, as `sluice import` and `POST /tables` read it, for an arbitrary
//! table: no panic, no hang, every rejection on a line of the input, and the
//! same rows and rejections however the input is cut into reads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_core::Decoder;
use sluice_formats::{NdjsonDecoder, NdjsonOptions};
use sluice_fuzz::decoders::{agree, schema};
use sluice_fuzz::Bytes;

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let table = schema(&mut input);
    let flags = input.byte();
    let pieces = [input.byte(), input.byte(), input.byte()];
    let options = NdjsonOptions {
        ignore_unknown: flags & 1 != 0,
        // Small limits reach the too-long path with small inputs.
        max_line_bytes: if flags & 2 != 0 { 64 } else { 1 << 20 },
        keep_records: flags & 4 != 0,
        ..NdjsonOptions::default()
    };
    let make = || -> Box<dyn Decoder> {
        Box::new(NdjsonDecoder::new(table.clone(), options.clone()).expect("no column list"))
    };
    agree(make, input.rest(), &pieces);
});
