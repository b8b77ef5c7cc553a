-- The PostgreSQL side of the fuzzed server: one schema of its own (named by
-- run.sh, :"schema"), tables a named query reads and an upload writes, and the
-- unprivileged login that POST /sql runs as.
create schema :"schema";
set search_path = :"schema";

create table accounts (
    id bigint primary key,
    owner text not null,
    balance numeric(14, 2) not null,
    opened date not null,
    active boolean not null,
    score double precision,
    tag uuid,
    settings jsonb,
    updated_at timestamptz not null
);
insert into accounts
select n, 'owner ' || n, n * 10.25, date '2024-01-01' + n, n % 3 <> 0, n / 7.0,
       md5(n::text)::uuid, jsonb_build_object('n', n), timestamptz '2024-01-01 00:00:00+00' + n * interval '1 hour'
from generate_series(1, 500) as n;

create table uploads (
    id bigint primary key,
    label text not null,
    amount numeric(12, 2),
    at timestamptz default now(),
    flags jsonb
);

create role :"login" login;
grant usage on schema :"schema" to :"login";
grant select on accounts to :"login";

-- A value of every kind the JSON writer spells its own way, and NULL in each:
-- schemathesis holds each row to the schema the server typed from the
-- prepared statement (infinities, NaN, BC dates, nested arrays, composites).
create type pair as (a int, b text);
create view kinds as
select * from (values
    (1, true, 32767::int2, 9007199254740993::int8, 'NaN'::numeric, 'Infinity'::float8,
     1.5::numeric(4, 2), '\x00ff'::bytea, 'infinity'::timestamptz, '0044-03-15 BC'::date,
     '2024-02-29 13:14:15.5'::timestamp, '1 year 2 mons 3 days 04:05:06.789'::interval,
     '13:14:15+05:30'::timetz, '{{1,2},{3,NULL}}'::int4[], row(1, 'x')::pair,
     '{"a": [1, null]}'::json, 'text'::text, '127.0.0.1'::inet,
     '{(1,2),(3,4);(5,6),(7,8)}'::box[]),
    (2, null, null, null, null, null, null, null, null, null, null, null, null, null, null,
     null, null, null, null),
    (3, false, -1::int2, -9007199254740993::int8, 123456789012345678901234567890.5::numeric,
     -0.5::float8, -1.25::numeric(4, 2), ''::bytea, '-infinity'::timestamptz, 'infinity'::date,
     '-infinity'::timestamp, '-1 days'::interval, '00:00:00-01'::timetz, '{}'::int4[],
     row(null, null)::pair, 'null'::json, '', '::1'::inet, '{}'::box[])
) as kinds(id, flag, small, big, exact, approximate, money_like, bytes, moment, day, local,
           span, clock, grid, pair, document, label, address, boxes);
