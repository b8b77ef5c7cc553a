//! Fixtures shared by the integration tests.

/// A table holding every type sluice distinguishes, with NULLs and edge values:
/// empty strings, quotes, line breaks, emoji, huge numerics, NaN and infinities,
/// BC and infinite dates, nested arrays, composites and domains.
pub const ALL_TYPES: &str = r#"
create type mood as enum ('happy', 'sad "really"', 'with,comma');
create domain positive as int check (value > 0);
create type pair as (id int, label text, tags text[], at timestamptz, span interval, blob bytea);
create table all_types (
  id int primary key,
  c_bool bool, c_int2 int2, c_int4 int4, c_int8 int8,
  c_float4 float4, c_float8 float8, c_numeric numeric,
  c_text text, c_varchar varchar(20), c_char char(3), c_name name, c_bytea bytea,
  c_json json, c_jsonb jsonb,
  c_date date, c_time time, c_timetz timetz, c_timestamp timestamp, c_timestamptz timestamptz,
  c_interval interval,
  c_uuid uuid, c_inet inet, c_cidr cidr, c_macaddr macaddr, c_money money,
  c_mood mood, c_positive positive, c_range int4range, c_tstzrange tstzrange,
  c_int_array int[], c_text_2d text[][], c_jsonb_array jsonb[], c_float_array float8[],
  c_pair pair, c_pair_array pair[], c_bytea_array bytea[], c_numeric_array numeric[],
  c_timestamptz_array timestamptz[], c_mood_array mood[],
  c_bit bit(4), c_xml xml, c_oid oid
);
insert into all_types values (
  1, true, -32768, 2147483647, -9223372036854775808,
  3.4028235e38, 2.2250738585072014e-308, 123456789012345678901234567890.123456789012345678901234567890,
  'plain', 'vary', 'abc', 'a_name', '\x000102fffe',
  '{"a": [1, 2, {"b": null}]}', '{"nested": {"x": 1.5, "y": [true, false]}, "s": "quote \" here"}',
  '2024-02-29', '13:14:15.123456', '13:14:15+05:30', '2024-02-29 13:14:15.5', '2024-02-29 13:14:15.5+02',
  '1 year 2 mons 3 days 04:05:06.789',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', 1234.56,
  'happy', 42, '[1,10)', '[2024-01-01 00:00:00+00,2024-12-31 00:00:00+00)',
  '{1,NULL,3}', '{{"a b","c\"d"},{NULL,"e,f"}}', array['{"k": 1}'::jsonb, 'null'::jsonb, '[1, "x"]'::jsonb],
  '{1.5,NaN,Infinity,-Infinity}',
  row(7, 'lab"el, (x)', '{x,"y z"}', '2001-02-03 04:05:06+00', '-1 days 02:00:00', '\xdead')::pair,
  array[row(1, 'one', null, null, null, null)::pair, row(2, '', '{}', '2020-01-01 00:00:00+00', '1 hour', '\x00')::pair],
  '{"\\x00ff",NULL}', '{0.1,100000000000000000000.00000000000000000001}',
  '{"2020-01-01 00:00:00+00","infinity"}', '{happy,"sad \"really\"","with,comma"}',
  B'1010', '<a>x &amp; y</a>', 12345
), (
  2, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null,
  null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null,
  null, null, null, null, null, null, null, null
), (
  3, false, 0, 0, 0, 'NaN', '-Infinity', 'NaN',
  E'quotes " and \\ backslash\nnew line\r\ttab \x01 control, emoji 😀, ünïcödé, \u2028', '', '"', '',
  '\x',
  E'{\n  "pretty": "json\\nwith escapes",\n  "n": 1e10\n}', '[]',
  'infinity', '00:00:00', '00:00:00-08', '-infinity', 'infinity',
  '-1 years -2 mons +3 days -04:05:06',
  '00000000-0000-0000-0000-000000000000', '::1', '::/0', '00:00:00:00:00:00', -0.01,
  'with,comma', 1, 'empty', '(,)',
  '{}', '{}', '{}', '{}',
  row(null, null, null, null, null, null)::pair, '{}', '{}', '{}', '{}', '{}',
  B'0000', '', 0
), (
  4, true, 1, 1, 1, '1e-45', '1.7976931348623157e308', '-0.000000000000000000001',
  'NULL', 'null', 'a\b', 'x', '\x5c',
  '"just a string"', '12.5',
  '0044-03-15 BC', '23:59:59.999999', '23:59:59.999999+14', '0044-03-15 12:00:00 BC', '1999-12-31 23:59:59.999999-03:30',
  '0 seconds',
  'ffffffff-ffff-ffff-ffff-ffffffffffff', '255.255.255.255', '0.0.0.0/0', 'ff:ff:ff:ff:ff:ff', 0,
  'sad "really"', 2147483647, '(,5]', 'empty',
  '[0:1]={7,8}', '{{x},{NULL}}', '{NULL}', '{NULL}',
  row(0, 'NULL', '{NULL,"NULL"}', 'infinity', '0 seconds', '\x')::pair, '{NULL}', '{NULL,"\\x"}', '{NaN}',
  '{NULL}', '{}',
  B'1111', '<e/>', 4294967295
);
"#;
