//! The framing checked byte for byte against the protocol's message formats
//! (<https://www.postgresql.org/docs/current/protocol-message-formats.html>), and
//! the decoder against split, lying, truncated and arbitrary input.

use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::Message;
use proptest::prelude::*;
use sluice_core::{Batch, ErrorKind};

use super::*;

/// What an encoder appended to a fresh buffer.
fn encoded(encode: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
    let mut buffer = BytesMut::new();
    encode(&mut buffer);
    buffer.to_vec()
}

/// The tag and declared length of a message, as the documentation lays them
/// out: Byte1 then Int32, the length counting itself but not the tag.
fn head(tag: u8, length: i32) -> Vec<u8> {
    [&[tag][..], &length.to_be_bytes()].concat()
}

#[test]
fn parse_is_tag_length_name_query_and_no_parameter_types() {
    let bytes = encoded(|buffer| encode_parse(buffer, "s1", "select 1").unwrap());
    let expected = [
        &head(b'P', 4 + 3 + 9 + 2)[..],
        b"s1\0",
        b"select 1\0",
        &0i16.to_be_bytes(),
    ]
    .concat();
    assert_eq!(bytes, expected);
}

#[test]
fn describe_names_a_statement() {
    let bytes = encoded(|buffer| encode_describe_statement(buffer, "s1").unwrap());
    assert_eq!(bytes, [&head(b'D', 4 + 1 + 3)[..], b"S", b"s1\0"].concat());
}

#[test]
fn bind_lays_out_formats_values_nulls_and_result_formats() {
    let seven = 7i32.to_be_bytes();
    let bytes =
        encoded(|buffer| encode_bind(buffer, "s1", [1], [Some(&seven[..]), None], [1, 0]).unwrap());
    let expected = [
        &head(b'B', 4 + 1 + 3 + 2 + 2 + 2 + (4 + 4) + 4 + 2 + 4)[..],
        b"\0",                  // the unnamed portal
        b"s1\0",                // the statement
        &1i16.to_be_bytes(),    // one parameter format...
        &1i16.to_be_bytes(),    // ...binary, for all
        &2i16.to_be_bytes(),    // two parameter values
        &4i32.to_be_bytes(),    // the first: four bytes
        &seven,                 //
        &(-1i32).to_be_bytes(), // the second: NULL, no bytes
        &2i16.to_be_bytes(),    // two result formats
        &1i16.to_be_bytes(),    //
        &0i16.to_be_bytes(),    //
    ]
    .concat();
    assert_eq!(bytes, expected);
}

#[test]
fn bind_past_the_protocols_parameter_count_queues_nothing() {
    let mut buffer = BytesMut::new();
    encode_sync(&mut buffer);
    let values = vec![None; u16::MAX as usize + 1];
    let error = encode_bind(&mut buffer, "s1", [0], values, [0]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Config, "{error}");
    assert_eq!(
        buffer.to_vec(),
        head(b'S', 4),
        "the message before is intact"
    );
}

#[test]
fn execute_names_the_unnamed_portal_and_a_row_limit() {
    let bytes = encoded(|buffer| encode_execute(buffer, 100).unwrap());
    assert_eq!(
        bytes,
        [&head(b'E', 4 + 1 + 4)[..], b"\0", &100i32.to_be_bytes()].concat()
    );
}

#[test]
fn execute_clamps_a_row_limit_past_i32() {
    let bytes = encoded(|buffer| encode_execute(buffer, u32::MAX).unwrap());
    assert_eq!(bytes[6..], i32::MAX.to_be_bytes());
}

#[test]
fn close_names_a_statement() {
    let bytes = encoded(|buffer| encode_close_statement(buffer, "s1").unwrap());
    assert_eq!(bytes, [&head(b'C', 4 + 1 + 3)[..], b"S", b"s1\0"].concat());
}

#[test]
fn sync_and_flush_are_bare_headers() {
    assert_eq!(encoded(encode_sync), head(b'S', 4));
    assert_eq!(encoded(encode_flush), head(b'H', 4));
}

#[test]
fn query_is_a_terminated_string() {
    let bytes = encoded(|buffer| encode_query(buffer, "select 1").unwrap());
    assert_eq!(bytes, [&head(b'Q', 4 + 9)[..], b"select 1\0"].concat());
}

#[test]
fn copy_data_measures_what_was_written_into_it() {
    let bytes = encoded(|buffer| encode_copy_data(buffer, |out| out.put_slice(b"1\tx\n")).unwrap());
    assert_eq!(bytes, [&head(b'd', 4 + 4)[..], b"1\tx\n"].concat());
    let empty = encoded(|buffer| encode_copy_data(buffer, |_| {}).unwrap());
    assert_eq!(empty, head(b'd', 4));
}

#[test]
fn copy_data_after_other_messages_measures_only_itself() {
    let bytes = encoded(|buffer| {
        encode_sync(buffer);
        encode_copy_data(buffer, |out| out.put_slice(b"ab")).unwrap();
    });
    assert_eq!(
        bytes,
        [head(b'S', 4), head(b'd', 6), b"ab".to_vec()].concat()
    );
}

#[test]
fn copy_done_and_copy_fail() {
    assert_eq!(encoded(encode_copy_done), head(b'c', 4));
    let bytes = encoded(|buffer| encode_copy_fail(buffer, "stop").unwrap());
    assert_eq!(bytes, [&head(b'f', 4 + 5)[..], b"stop\0"].concat());
}

#[test]
fn a_nul_inside_a_string_queues_nothing() {
    let mut buffer = BytesMut::new();
    encode_flush(&mut buffer);
    assert!(encode_query(&mut buffer, "select '\0'").is_err());
    assert!(encode_parse(&mut buffer, "s\0", "select 1").is_err());
    assert!(encode_parse(&mut buffer, "s", "select '\0'").is_err());
    assert!(encode_describe_statement(&mut buffer, "s\0").is_err());
    assert!(encode_close_statement(&mut buffer, "s\0").is_err());
    assert!(encode_copy_fail(&mut buffer, "no\0").is_err());
    assert_eq!(buffer.to_vec(), head(b'H', 4));
}

/// A backend message with an honest length.
fn backend(tag: u8, body: &[u8]) -> Vec<u8> {
    [head(tag, body.len() as i32 + 4), body.to_vec()].concat()
}

/// A `DataRow` body holding `values` (`None`: NULL).
fn data_row(values: &[Option<&[u8]>]) -> Vec<u8> {
    let mut body = (values.len() as u16).to_be_bytes().to_vec();
    for value in values {
        match value {
            Some(bytes) => {
                body.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
                body.extend_from_slice(bytes);
            }
            None => body.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    backend(b'D', &body)
}

/// One result as the server sends it: parse and bind done, two rows, the
/// command's tag, ready.
fn result_stream() -> Vec<u8> {
    [
        backend(b'1', b""),
        backend(b'2', b""),
        data_row(&[Some(b"1"), None]),
        data_row(&[Some(b"twenty two"), Some(b"")]),
        backend(b'C', b"SELECT 2\0"),
        backend(b'Z', b"I"),
    ]
    .concat()
}

/// A message as a line of text, to compare decodings.
fn named(message: &Message) -> String {
    match message {
        Message::ParseComplete => "ParseComplete".into(),
        Message::BindComplete => "BindComplete".into(),
        Message::CommandComplete(body) => format!("CommandComplete {}", body.tag().unwrap()),
        Message::ReadyForQuery(body) => format!("ReadyForQuery {}", char::from(body.status())),
        Message::DataRow(body) => format!("DataRow of {} values", body.ranges().count().unwrap()),
        _ => "another message".into(),
    }
}

/// Everything `receive` makes of the bytes so far, draining `buffer`.
fn drain(buffer: &mut BytesMut, rows: &mut Batch, seen: &mut Vec<String>) {
    loop {
        match receive(buffer, rows).unwrap() {
            Received::Row => seen.push("Row".into()),
            Received::Message(message) => seen.push(named(&message)),
            Received::Incomplete => return,
        }
    }
}

/// The rows of a batch as text (`NULL` for NULL).
fn rows_of(batch: &Batch) -> Vec<Vec<String>> {
    batch
        .rows()
        .map(|row| {
            (0..row.len())
                .map(|column| match row.get(column) {
                    Some(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                    None => "NULL".into(),
                })
                .collect()
        })
        .collect()
}

#[test]
fn a_whole_result_decodes_rows_into_the_batch_and_the_rest_as_messages() {
    let mut buffer = BytesMut::from(&result_stream()[..]);
    let (mut rows, mut seen) = (Batch::new(2), Vec::new());
    drain(&mut buffer, &mut rows, &mut seen);
    let expected = [
        "ParseComplete",
        "BindComplete",
        "Row",
        "Row",
        "CommandComplete SELECT 2",
        "ReadyForQuery I",
    ];
    assert_eq!(seen, expected);
    assert_eq!(rows_of(&rows), [["1", "NULL"], ["twenty two", ""]]);
    assert!(buffer.is_empty());
}

#[test]
fn a_result_split_at_every_byte_decodes_the_same() {
    let stream = result_stream();
    let mut whole = (Batch::new(2), Vec::new());
    drain(&mut BytesMut::from(&stream[..]), &mut whole.0, &mut whole.1);
    for split in 0..=stream.len() {
        let mut buffer = BytesMut::from(&stream[..split]);
        let (mut rows, mut seen) = (Batch::new(2), Vec::new());
        drain(&mut buffer, &mut rows, &mut seen);
        buffer.extend_from_slice(&stream[split..]);
        drain(&mut buffer, &mut rows, &mut seen);
        assert_eq!(seen, whole.1, "split at {split}");
        assert_eq!(rows_of(&rows), rows_of(&whole.0), "split at {split}");
        assert!(buffer.is_empty(), "split at {split}");
    }
}

#[test]
fn a_result_arriving_byte_by_byte_decodes_the_same() {
    let stream = result_stream();
    let (mut buffer, mut rows, mut seen) = (BytesMut::new(), Batch::new(2), Vec::new());
    for byte in &stream {
        buffer.extend_from_slice(&[*byte]);
        drain(&mut buffer, &mut rows, &mut seen);
    }
    assert_eq!(seen.len(), 6);
    assert_eq!(rows.num_rows(), 2);
}

#[test]
fn next_message_parses_data_rows_too() {
    let mut buffer = BytesMut::from(&result_stream()[..]);
    let mut seen = Vec::new();
    while let Some(message) = next_message(&mut buffer).unwrap() {
        seen.push(named(&message));
    }
    assert_eq!(seen[2..4], ["DataRow of 2 values", "DataRow of 2 values"]);
    assert_eq!(seen.len(), 6);
}

#[test]
fn less_than_a_header_is_incomplete_and_left_alone() {
    for length in 0..5 {
        let mut buffer = BytesMut::from(&backend(b'Z', b"I")[..length]);
        assert!(matches!(
            receive(&mut buffer, &mut Batch::new(0)),
            Ok(Received::Incomplete)
        ));
        assert!(next_message(&mut buffer).unwrap().is_none());
        assert_eq!(buffer.len(), length);
    }
}

/// The kind of error `bytes` give both decoders.
fn decoding_error(bytes: &[u8], columns: usize) -> ErrorKind {
    let received = receive(&mut BytesMut::from(bytes), &mut Batch::new(columns));
    let Err(error) = received else {
        panic!("{bytes:?} decoded");
    };
    error.kind()
}

#[test]
fn a_length_shorter_than_its_own_field_is_refused() {
    for length in [0, 1, 3] {
        let bytes = [head(b'Z', length), b"Iabcdef".to_vec()].concat();
        assert_eq!(decoding_error(&bytes, 0), ErrorKind::Protocol, "{length}");
        assert!(next_message(&mut BytesMut::from(&bytes[..])).is_err());
        // The header alone is enough to know.
        assert!(frame_header(&bytes[..5]).is_err());
    }
}

#[test]
fn a_negative_length_is_refused_without_waiting_for_it() {
    for length in [-1, -4, i32::MIN] {
        let bytes = head(b'D', length);
        assert_eq!(decoding_error(&bytes, 0), ErrorKind::Protocol, "{length}");
    }
}

#[test]
fn a_length_longer_than_what_arrived_waits_for_the_rest() {
    let mut buffer = BytesMut::from(&[head(b'Z', 1000), b"I".to_vec()].concat()[..]);
    assert!(matches!(
        receive(&mut buffer, &mut Batch::new(0)),
        Ok(Received::Incomplete)
    ));
    assert_eq!(buffer.len(), 6, "nothing consumed");
    assert_eq!(frame_header(&buffer).unwrap(), Some((b'Z', 1001)));
}

#[test]
fn a_length_that_swallows_the_next_message_is_refused() {
    // ReadyForQuery claims the BindComplete after it as its own.
    let bytes = [head(b'Z', 4 + 1 + 5), b"I".to_vec(), backend(b'2', b"")].concat();
    assert_eq!(decoding_error(&bytes, 0), ErrorKind::Protocol);
    // A row that does so carries bytes after its last value.
    let row = data_row(&[Some(b"x")]);
    let mut swallowing = row.clone();
    swallowing[1..5].copy_from_slice(&(row.len() as i32 - 1 + 5).to_be_bytes());
    swallowing.extend(backend(b'2', b""));
    assert_eq!(decoding_error(&swallowing, 1), ErrorKind::Protocol);
}

#[test]
fn an_unknown_message_type_is_a_protocol_error() {
    assert_eq!(decoding_error(&backend(b'!', b"x"), 0), ErrorKind::Protocol);
    assert_eq!(decoding_error(&backend(0, b""), 0), ErrorKind::Protocol);
}

#[test]
fn a_frame_truncated_inside_its_body_is_a_protocol_error() {
    // ReadyForQuery without its status byte.
    assert_eq!(decoding_error(&backend(b'Z', b""), 0), ErrorKind::Protocol);
    // A row whose value header is cut short, and one whose value is.
    let cut_header = backend(b'D', &[0, 1, 0, 0]);
    assert_eq!(decoding_error(&cut_header, 1), ErrorKind::Protocol);
    let cut_value = backend(b'D', &[&[0, 1][..], &5i32.to_be_bytes(), b"abc"].concat());
    assert_eq!(decoding_error(&cut_value, 1), ErrorKind::Protocol);
    // A row without even its value count.
    assert_eq!(decoding_error(&backend(b'D', &[0]), 0), ErrorKind::Protocol);
}

#[test]
fn a_row_of_the_wrong_width_or_value_length_is_refused() {
    let two = data_row(&[Some(b"a"), Some(b"b")]);
    assert_eq!(decoding_error(&two, 3), ErrorKind::Protocol);
    let below_null = backend(b'D', &[&[0, 1][..], &(-2i32).to_be_bytes()].concat());
    assert_eq!(decoding_error(&below_null, 1), ErrorKind::Protocol);
}

/// Frames as a hostile server might make them: a known tag or any byte, any
/// body, and a length that is honest or off by a little.
fn frames() -> impl Strategy<Value = Vec<u8>> {
    let tag = prop_oneof![
        prop::sample::select(b"DZC12nstTSKREN3cdGHIs".to_vec()),
        any::<u8>(),
    ];
    let frame =
        (tag, prop::collection::vec(any::<u8>(), 0..40), -6i32..6).prop_map(|(tag, body, lie)| {
            let honest = body.len() as i32 + 4;
            let length = if lie == 0 { honest } else { honest + lie };
            [head(tag, length), body].concat()
        });
    prop::collection::vec(frame, 0..8).prop_map(|frames| frames.concat())
}

/// Feeds `bytes` to both decoders until they stop; each step must consume.
fn decode_all(bytes: &[u8], columns: usize) {
    let mut buffer = BytesMut::from(bytes);
    let mut rows = Batch::new(columns);
    while let Ok(Received::Row | Received::Message(_)) = receive(&mut buffer, &mut rows) {}
    let mut buffer = BytesMut::from(bytes);
    let mut before = buffer.len() + 1;
    while let Ok(Some(_)) = next_message(&mut buffer) {
        assert!(buffer.len() < before, "a message consumed nothing");
        before = buffer.len();
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        columns in 0usize..4,
    ) {
        decode_all(&bytes, columns);
    }

    #[test]
    fn hostile_frames_never_panic_the_decoder(bytes in frames(), columns in 0usize..4) {
        decode_all(&bytes, columns);
    }
}
