# shellcheck shell=bash
# The benchmark table, shared by every script in bench/: `payment_events` (or a
# table named for another row count) generated deterministically on the server.
# Sourced after bench/lib/common.sh (URL, ROWS, `pg`, `log`).

# Bump when the generator SQL changes, so existing tables get regenerated.
GEN_VERSION=1
# SCALE_CHECK=1: also a SCALE_ROWS-row table, for the scripts' check that
# sluice's memory does not grow with the row count.
SCALE_CHECK=${SCALE_CHECK:-0}
SCALE_ROWS=5000000

# Table name for a row count: the main one is payment_events; other sizes get
# a suffix (payment_events_5m) so both can be kept between runs.
table_for() {
    local n=$1
    if [[ $n == "$ROWS" ]]; then echo payment_events
    elif (( n % 1000000 == 0 )); then echo "payment_events_$(( n / 1000000 ))m"
    elif (( n % 1000 == 0 )); then echo "payment_events_$(( n / 1000 ))k"
    else echo "payment_events_$n"
    fi
}

# ensure_tables: payment_events with ROWS rows and, with SCALE_CHECK=1,
# SCALE_TABLE with SCALE_ROWS.
ensure_tables() {
    ensure_table payment_events "$ROWS"
    if [[ $SCALE_CHECK == 1 ]]; then
        SCALE_TABLE=$(table_for "$SCALE_ROWS")
        ensure_table "$SCALE_TABLE" "$SCALE_ROWS"
    fi
}

# ------------------------------------------------------------- test table --

# ensure_table NAME N: make NAME hold exactly N rows from this generator.
# The table comment records generator version and row count; the count(*) is
# checked too, so a half-loaded or hand-edited table is also rebuilt.
ensure_table() {
    local table=$1 n=$2 marker="sluice-bench v$GEN_VERSION rows=$2" have_marker have_rows
    if [[ -n $(pg -c "select to_regclass('$table')") ]]; then
        have_marker=$(pg -c "select coalesce(obj_description('$table'::regclass, 'pg_class'), '')")
        have_rows=$(pg -c "select count(*) from $table")
        if [[ $have_marker == "$marker" && $have_rows == "$n" ]]; then
            log "table $table: $n rows, up to date"
            return
        fi
        log "table $table: has $have_rows rows / '$have_marker', want $n / '$marker': recreating"
    else
        log "table $table: creating with $n rows"
    fi

    # Values come from hashint8extended(id, seed) rather than random(), so the
    # data is the same on every machine and every run (comparable results).
    # h1..h10 are independent non-negative 63-bit hashes per row. Amounts are
    # log-uniform (many small, few large payments), ~2% of descriptions are
    # NULL, descriptions carry commas, double and single quotes and non-ASCII
    # text (CSV quoting, JSON escaping), created_at has microseconds.
    # The primary key is added after the load, which is faster than
    # maintaining the index row by row. One transaction: all or nothing.
    pg -1 -v n="$n" -f - <<SQL
SET client_min_messages = warning;  -- no NOTICE when the table is new
DROP TABLE IF EXISTS $table;
CREATE TABLE $table (
    id          bigint,
    account_id  bigint,
    amount      numeric(12,2),
    currency    char(3),
    status      text,
    created_at  timestamptz,
    description text,
    payload     jsonb
);
INSERT INTO $table
SELECT g,
  1 + h.h1 % 50000,
  round((exp((h.h2 % 1000000) / 1000000.0 * 11.5) - 0.99)::numeric, 2),
  (ARRAY['USD','USD','USD','EUR','EUR','GBP','JPY','CAD','AUD','CHF','SEK','BRL'])[1 + h.h3 % 12],
  CASE WHEN h.h4 % 100 < 72 THEN 'settled'
       WHEN h.h4 % 100 < 87 THEN 'pending'
       WHEN h.h4 % 100 < 96 THEN 'failed'
       ELSE 'refunded' END,
  timestamptz '2024-01-01 00:00:00+00' + g * interval '30 seconds'
    + (h.h5 % 30000000) * interval '1 microsecond',
  CASE WHEN h.h6 % 50 = 0 THEN NULL ELSE
    CASE h.h7 % 5
      WHEN 0 THEN format('Order #%s – %s', 100000 + h.h8 % 900000,
        (ARRAY['Acme, Inc.','Blue Bottle Café','O''Reilly Media','Smith & Sons',
               'Nordström AB','"Best" Widgets Ltd'])[1 + h.h9 % 6])
      WHEN 1 THEN format('Refund for "%s", ref %s',
        (ARRAY['Pro plan','Gift card','Shoes, size 42','12" pizza','Annual licence'])[1 + h.h8 % 5],
        upper(to_hex(h.h9 % 16777216)))
      WHEN 2 THEN format('Subscription, %s plan (%s), seat %s',
        (ARRAY['basic','team','enterprise'])[1 + h.h8 % 3],
        (ARRAY['monthly','yearly'])[1 + h.h9 % 2], 1 + h.h10 % 250)
      WHEN 3 THEN format('Transfer to acct %s, memo: "%s"', 1 + h.h8 % 50000,
        (ARRAY['rent','thanks!','split, dinner','loan – part 2','it''s for the trip'])[1 + h.h9 % 5])
      ELSE format('Card payment at %s, %s',
        (ARRAY['Joe''s Diner','Café de Flore','SuperMart #12','"The Pub"'])[1 + h.h8 % 4],
        (ARRAY['London','New York, NY','Zürich','São Paulo','Kraków'])[1 + h.h9 % 5])
    END
  END,
  jsonb_build_object(
    'source',     (ARRAY['api','web','mobile','batch'])[1 + h.h8 % 4],
    'attempt',    1 + h.h9 % 3,
    'risk_score', round((h.h10 % 1000) / 1000.0, 3),
    'card',       jsonb_build_object(
                    'brand', (ARRAY['visa','mastercard','amex'])[1 + h.h10 % 3],
                    'last4', lpad((h.h2 % 10000)::text, 4, '0')),
    'three_ds',   h.h3 % 3 = 0,
    'error_code', CASE WHEN h.h4 % 100 BETWEEN 87 AND 95
                       THEN (ARRAY['card_declined','insufficient_funds','expired_card'])[1 + h.h5 % 3]
                  END)
FROM generate_series(1, :n) AS g
CROSS JOIN LATERAL (SELECT
  hashint8extended(g, 1)  & 9223372036854775807 AS h1,
  hashint8extended(g, 2)  & 9223372036854775807 AS h2,
  hashint8extended(g, 3)  & 9223372036854775807 AS h3,
  hashint8extended(g, 4)  & 9223372036854775807 AS h4,
  hashint8extended(g, 5)  & 9223372036854775807 AS h5,
  hashint8extended(g, 6)  & 9223372036854775807 AS h6,
  hashint8extended(g, 7)  & 9223372036854775807 AS h7,
  hashint8extended(g, 8)  & 9223372036854775807 AS h8,
  hashint8extended(g, 9)  & 9223372036854775807 AS h9,
  hashint8extended(g, 10) & 9223372036854775807 AS h10) AS h;
ALTER TABLE $table ADD PRIMARY KEY (id);
COMMENT ON TABLE $table IS '$marker';
SQL
    # VACUUM sets the visibility map and hint bits now, so the first timed
    # scan doesn't pay for them; ANALYZE gives the planner real statistics.
    pg -c "VACUUM ANALYZE $table"
    log "table $table: $(pg -c "select pg_size_pretty(pg_total_relation_size('$table'))") on disk"
}

# ensure_account_index: the index the gateway benchmarks' short query (one
# account's payments) is served by, payment_events_account_id_idx on
# (account_id), made if missing; ACCOUNT_INDEX_NOTE says which it was.
ensure_account_index() {
    # shellcheck disable=SC2034  # read by the scripts that source this file
    ACCOUNT_INDEX_NOTE="payment_events_account_id_idx on (account_id) existed already"
    [[ -z $(pg -c "select to_regclass('payment_events_account_id_idx')") ]] || return 0
    log "creating index payment_events_account_id_idx on payment_events (account_id)"
    pg -c "create index payment_events_account_id_idx on payment_events (account_id)"
    # shellcheck disable=SC2034
    ACCOUNT_INDEX_NOTE="payment_events_account_id_idx on (account_id) was missing: this run created it"
}

# warm_account_reads: read payment_events and its account index once, so the
# first cells do not pay for pages the OS evicted while the machine idled
# (seen here: a 1-client pgbench at 25 tx/s, the CPUs mostly in iowait, after
# a few quiet minutes; 3,700 once read). A sequential scan reads every
# heap page and an index-only scan every index page through the page cache.
warm_account_reads() {
    log "reading payment_events and payment_events_account_id_idx into the page cache"
    pg -c "select count(*) from payment_events where payload is not null" >/dev/null
    pg -c "set enable_seqscan = off; set enable_bitmapscan = off;
           select count(*) from payment_events where account_id >= 0" >/dev/null
}
