//! CSV, as `sluice import` and `POST /tables` read it, for an arbitrary
//! table, with and without a header: no panic, no hang, every rejection on a
//! line of the input, and the same result however the input is cut.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_core::Decoder;
use sluice_formats::{CsvDecoder, CsvHeader, CsvOptions};
use sluice_fuzz::decoders::{agree, schema};
use sluice_fuzz::Bytes;

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let table = schema(&mut input);
    let flags = input.byte();
    let pieces = [input.byte(), input.byte(), input.byte()];
    let options = CsvOptions {
        header: match flags % 3 {
            0 => CsvHeader::Present,
            1 => CsvHeader::Match,
            _ => CsvHeader::Absent,
        },
        max_record_bytes: if flags & 4 != 0 { 64 } else { 1 << 20 },
        keep_records: flags & 8 != 0,
        ..CsvOptions::default()
    };
    let make = || -> Box<dyn Decoder> { Box::new(CsvDecoder::new(table.clone(), options.clone())) };
    agree(make, input.rest(), &pieces);
});
