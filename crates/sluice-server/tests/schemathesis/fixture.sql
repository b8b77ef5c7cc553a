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
