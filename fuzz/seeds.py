#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets that play a hostile server:
honest answers to sluice's query, which the fuzzer then mutates (a fuzzer
starting from nothing rarely finds its way past the first message).

Each seed is a flags byte (see the target) followed by the server's bytes.
Run from fuzz/: python3 seeds.py (bench/fuzz.sh does).
"""
import os
import struct


def pg_message(tag, body=b""):
    return tag + struct.pack(">I", len(body) + 4) + body


def pg_row_description(columns):
    body = struct.pack(">H", len(columns))
    for name, oid in columns:
        body += name + b"\0" + struct.pack(">IHIhiH", 0, 0, oid, -1, -1, 0)
    return pg_message(b"T", body)


def pg_data_row(values):
    body = struct.pack(">H", len(values))
    for value in values:
        if value is None:
            body += struct.pack(">i", -1)
        else:
            body += struct.pack(">i", len(value)) + value
    return pg_message(b"D", body)


def pg_answer(columns, rows):
    described = (
        pg_message(b"1")
        + pg_message(b"t", struct.pack(">H", 0))
        + pg_row_description(columns)
    )
    result = pg_message(b"2") + b"".join(pg_data_row(row) for row in rows)
    done = pg_message(b"C", b"SELECT %d\0" % len(rows)) + pg_message(b"Z", b"I")
    return described + result + done


def postgres_seeds():
    int8, text, bytea, numeric, jsonb, int4_array = 20, 25, 17, 1700, 3802, 1007
    yield pg_answer([(b"v", text)], [[b"a"], [None], [b""]])
    yield pg_answer(
        [(b"id", int8), (b"body", bytea), (b"amount", numeric)],
        [[struct.pack(">q", 7), b"\\x00ff", b"12.50"], [None, None, None]],
    )
    yield pg_answer([(b"doc", jsonb), (b"list", int4_array)], [[b'{"k": [1]}', b"{1,NULL,3}"]])
    # An error instead of rows.
    yield pg_message(b"E", b"SERROR\0C42P01\0Mrelation does not exist\0\0") + pg_message(b"Z", b"I")


def my_packet(sequence, payload):
    return struct.pack("<I", len(payload))[:3] + bytes([sequence]) + payload


def lenenc(text):
    return bytes([len(text)]) + text


def my_column(name, column_type, flags=0, length=255, decimals=0, charset=45):
    return (
        lenenc(b"def") + lenenc(b"fuzz") + lenenc(b"t") + lenenc(b"t")
        + lenenc(name) + lenenc(name) + b"\x0c"
        + struct.pack("<HIBHB", charset, length, column_type, flags, decimals) + b"\0\0"
    )


def my_answer(columns, rows):
    """MariaDB's direct execute: the prepare's answer, then the result."""
    sequence = 1
    packets = [struct.pack("<BIHHBH", 0, 1, len(columns), 0, 0, 0)]
    packets += [my_column(*column) for column in columns]
    result = [bytes([len(columns)])] + [my_column(*column) for column in columns]
    for row in rows:
        bitmap = bytearray((len(columns) + 9) // 8)
        values = b""
        for index, value in enumerate(row):
            if value is None:
                bitmap[(index + 2) // 8] |= 1 << ((index + 2) % 8)
            else:
                values += value
        result.append(b"\x00" + bytes(bitmap) + values)
    result.append(b"\xfe\x00\x00\x02\x00\x00\x00")
    out = b""
    for payload in packets:
        out += my_packet(sequence, payload)
        sequence += 1
    sequence = 1
    for payload in result:
        out += my_packet(sequence, payload)
        sequence += 1
    return out


def mariadb_seeds():
    longlong, var_string, blob, newdecimal, datetime = 8, 253, 252, 246, 12
    yield my_answer([(b"id", longlong, 0, 20)], [[struct.pack("<q", 7)], [None]])
    yield my_answer(
        [(b"name", var_string), (b"data", blob, 0x80, 65535, 0, 63), (b"amount", newdecimal, 0, 12, 2)],
        [[lenenc(b"caf\xc3\xa9"), lenenc(b"\x00\xff"), lenenc(b"12.50")]],
    )
    yield my_answer([(b"at", datetime, 0, 26, 6)], [[b"\x0b\xe8\x07\x06\x01\x0a\x00\x00\x40\x42\x0f\x00"]])
    yield my_packet(1, b"\xff\x7a\x04#42S02Table 'fuzz.t' doesn't exist")


def write(target, seeds):
    directory = os.path.join("seeds", target)
    os.makedirs(directory, exist_ok=True)
    for index, seed in enumerate(seeds):
        for flags in (0, 1, 2):
            with open(os.path.join(directory, f"seed-{index}-{flags}"), "wb") as file:
                file.write(bytes([flags]) + seed)


if __name__ == "__main__":
    write("postgres_server", postgres_seeds())
    write("mariadb_server", mariadb_seeds())
