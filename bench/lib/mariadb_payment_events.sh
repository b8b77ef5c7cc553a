# shellcheck shell=bash
# shellcheck disable=SC2034  # the settings are read by the sourcing scripts
# MariaDB's payment_events, shared by bench/mariadb.sh and bench/copy.sh:
# the connection (a URL taken apart for the mariadb client, sluice and the
# Python peers) and the deterministic generator of the table. Sourced after
# bench/lib/common.sh (`log`); call mdb_check_server before anything else.
#
# Settings: SLUICE_BENCH_MARIADB_URL, the server URL (default
# mariadb://root@127.0.0.1:3306/test). Needs the `mariadb` client.
#
# Connection: host, port, user, password and database come from the URL
# (`localhost` becomes 127.0.0.1). Every client connects over plain TCP to that
# address: the mariadb client with `--no-defaults --protocol=TCP --skip-ssl`
# (no option files, no TLS), sluice with ssl-mode=DISABLED (SLUICE_SURL). A
# password in the URL goes to every client through MYSQL_PWD, never on a
# command line: SURL and SLUICE_SURL are the URL without it.
#
# Defines: MDB_URL, MDB_URL_SHOWN, MDB_SCHEME, MDB_HOST, MDB_PORT, MDB_USER,
# MDB_DB, SURL, SLUICE_SURL, MDB_ARGS, mdb, mdb_check_server, table_marker,
# table_exists, table_mb, MDB_GEN_VERSION, mdb_machine_section,
# mdb_reproduce_section and ensure_mdb_table NAME N (the
# table's definition and values are described in bench/mariadb.sh's header).

MDB_URL=${SLUICE_BENCH_MARIADB_URL:-mariadb://root@127.0.0.1:3306/test}
MDB_URL_SHOWN=$(sed -E 's#^([a-z]+://[^:/@]+):[^@]*@#\1:***@#' <<<"$MDB_URL")
# Bump when the generator SQL below changes, so existing tables get regenerated.
MDB_GEN_VERSION=1

command -v mariadb >/dev/null || { echo "the mariadb client is required: apt-get install mariadb-client" >&2; exit 2; }

# ------------------------------------------------------------ connection --

# scheme://[user[:password]@]host[:port][/database][?options]
url_re='^(mariadb|mysql)://(([^:@/]*)(:([^@/]*))?@)?([^:/?@]+)(:([0-9]+))?(/([^?]*))?(\?.*)?$'
[[ $MDB_URL =~ $url_re ]] || { echo "SLUICE_BENCH_MARIADB_URL is not a mariadb://user[:password]@host[:port]/database URL: $MDB_URL_SHOWN" >&2; exit 2; }
url_decode() { printf '%b' "${1//%/\\x}"; }
MDB_SCHEME=${BASH_REMATCH[1]}
user_raw=${BASH_REMATCH[3]}
password_raw=${BASH_REMATCH[5]}
MDB_HOST=${BASH_REMATCH[6]}
MDB_PORT=${BASH_REMATCH[8]:-3306}
db_raw=${BASH_REMATCH[10]}
url_options=${BASH_REMATCH[11]}
[[ -n $user_raw ]] || user_raw=${USER:-$(id -un)}
MDB_USER=$(url_decode "$user_raw")
MDB_DB=$(url_decode "$db_raw")
[[ -n $MDB_DB ]] || { echo "SLUICE_BENCH_MARIADB_URL names no database: $MDB_URL_SHOWN" >&2; exit 2; }
# mysqlclient (libmariadb) would take `localhost` to mean the Unix socket.
if [[ $MDB_HOST == localhost ]]; then MDB_HOST=127.0.0.1; fi
if [[ -n $password_raw ]]; then
    MYSQL_PWD=$(url_decode "$password_raw")
    export MYSQL_PWD
fi
unset password_raw
# The URL sluice and the Python peers get: no password (MYSQL_PWD has it).
SURL="$MDB_SCHEME://$user_raw@$MDB_HOST:$MDB_PORT/$db_raw$url_options"
# sluice's URL: plain TCP like every other client (PREFERRED would take TLS
# from a server that offers it).
if [[ $SURL == *\?* ]]; then SLUICE_SURL="$SURL&ssl-mode=DISABLED"; else SLUICE_SURL="$SURL?ssl-mode=DISABLED"; fi

# The mariadb client's connection options, for the references and the
# harness: no option files (as psql -X), TCP, no TLS, utf8mb4 (what the other
# clients use).
MDB_ARGS=(--no-defaults --protocol=TCP "--host=$MDB_HOST" "--port=$MDB_PORT" "--user=$MDB_USER"
          --default-character-set=utf8mb4 --skip-ssl)
# mdb ARGS...: the harness's own SQL (-e '…' or standard input), results as
# tab-separated values without column names.
mdb() { mariadb "${MDB_ARGS[@]}" --batch --skip-column-names "$@" "$MDB_DB"; }

# mdb_check_server: exit 2 unless the server answers and has the SEQUENCE
# engine the generator needs.
mdb_check_server() {
    mdb -e 'select 1' >/dev/null || { echo "cannot connect to $MDB_URL_SHOWN with the mariadb client" >&2; exit 2; }
    if [[ $(mdb -e "select count(*) from information_schema.engines where engine = 'SEQUENCE' and support in ('YES', 'DEFAULT')") != 1 ]]; then
        echo "the server has no SEQUENCE engine (seq_1_to_N): this script needs MariaDB" >&2
        exit 2
    fi
}

# table_marker NAME: NAME's comment, or nothing when there is no such table.
table_marker() {
    mdb -e "select table_comment from information_schema.tables
            where table_schema = database() and table_name = '$1'"
}
table_exists() {
    [[ $(mdb -e "select count(*) from information_schema.tables
                 where table_schema = database() and table_name = '$1'") == 1 ]]
}
table_mb() {
    mdb -e "select round((data_length + index_length) / 1048576) from information_schema.tables
            where table_schema = database() and table_name = '$1'"
}

# ensure_mdb_table NAME N: make NAME hold exactly N rows from this generator
# (see the header for the types). The comment says "loading" until the
# INSERT has committed, so an interrupted load is rebuilt next time.
ensure_mdb_table() {
    local table=$1 n=$2 marker="sluice-bench mariadb v$MDB_GEN_VERSION rows=$2" have_marker have_rows
    if table_exists "$table"; then
        have_marker=$(table_marker "$table")
        have_rows=$(mdb -e "select count(*) from $table")
        if [[ $have_marker == "$marker" && $have_rows == "$n" ]]; then
            log "MariaDB table $table: $n rows, up to date"
            return
        fi
        log "MariaDB table $table: has $have_rows rows / '$have_marker', want $n / '$marker': recreating"
    else
        log "MariaDB table $table: creating with $n rows"
    fi
    # h1..h10: ten independent 48-bit hashes per row, slices of one SHA-512.
    # Amounts log-uniform, ~2% NULL descriptions with commas, quotes and
    # non-ASCII text, created_at with microseconds: as the PostgreSQL table.
    # (>/dev/null: ANALYZE TABLE answers with a result row.)
    mdb >/dev/null <<SQL
SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION';
DROP TABLE IF EXISTS $table;
CREATE TABLE $table (
    id          BIGINT NOT NULL,
    account_id  BIGINT,
    amount      DECIMAL(12,2),
    currency    CHAR(3),
    status      VARCHAR(16),
    created_at  DATETIME(6),
    description VARCHAR(255),
    payload     JSON,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='sluice-bench mariadb: loading';
INSERT INTO $table
SELECT g,
  1 + h1 % 50000,
  ROUND(EXP((h2 % 1000000) / 1000000 * 11.5) - 0.99, 2),
  ELT(1 + h3 % 12, 'USD','USD','USD','EUR','EUR','GBP','JPY','CAD','AUD','CHF','SEK','BRL'),
  CASE WHEN h4 % 100 < 72 THEN 'settled'
       WHEN h4 % 100 < 87 THEN 'pending'
       WHEN h4 % 100 < 96 THEN 'failed'
       ELSE 'refunded' END,
  TIMESTAMP'2024-01-01 00:00:00.000000' + INTERVAL (g * 30000000 + h5 % 30000000) MICROSECOND,
  CASE WHEN h6 % 50 = 0 THEN NULL ELSE
    CASE h7 % 5
      WHEN 0 THEN CONCAT('Order #', 100000 + h8 % 900000, ' – ',
        ELT(1 + h9 % 6, 'Acme, Inc.', 'Blue Bottle Café', 'O''Reilly Media', 'Smith & Sons',
                        'Nordström AB', '"Best" Widgets Ltd'))
      WHEN 1 THEN CONCAT('Refund for "',
        ELT(1 + h8 % 5, 'Pro plan', 'Gift card', 'Shoes, size 42', '12" pizza', 'Annual licence'),
        '", ref ', HEX(h9 % 16777216))
      WHEN 2 THEN CONCAT('Subscription, ', ELT(1 + h8 % 3, 'basic', 'team', 'enterprise'),
        ' plan (', ELT(1 + h9 % 2, 'monthly', 'yearly'), '), seat ', 1 + h10 % 250)
      WHEN 3 THEN CONCAT('Transfer to acct ', 1 + h8 % 50000, ', memo: "',
        ELT(1 + h9 % 5, 'rent', 'thanks!', 'split, dinner', 'loan – part 2', 'it''s for the trip'),
        '"')
      ELSE CONCAT('Card payment at ',
        ELT(1 + h8 % 4, 'Joe''s Diner', 'Café de Flore', 'SuperMart #12', '"The Pub"'), ', ',
        ELT(1 + h9 % 5, 'London', 'New York, NY', 'Zürich', 'São Paulo', 'Kraków'))
    END
  END,
  JSON_COMPACT(JSON_OBJECT(
    'source',     ELT(1 + h8 % 4, 'api', 'web', 'mobile', 'batch'),
    'attempt',    1 + h9 % 3,
    'risk_score', ROUND((h10 % 1000) / 1000, 3),
    'card',       JSON_OBJECT('brand', ELT(1 + h10 % 3, 'visa', 'mastercard', 'amex'),
                              'last4', LPAD(h2 % 10000, 4, '0')),
    'three_ds',   JSON_EXTRACT('[false, true]', IF(h3 % 3 = 0, '\$[1]', '\$[0]')),
    'error_code', IF(h4 % 100 BETWEEN 87 AND 95,
                     ELT(1 + h5 % 3, 'card_declined', 'insufficient_funds', 'expired_card'), NULL)))
FROM (SELECT seq AS g,
        CAST(CONV(SUBSTRING(x,   1, 12), 16, 10) AS UNSIGNED) AS h1,
        CAST(CONV(SUBSTRING(x,  13, 12), 16, 10) AS UNSIGNED) AS h2,
        CAST(CONV(SUBSTRING(x,  25, 12), 16, 10) AS UNSIGNED) AS h3,
        CAST(CONV(SUBSTRING(x,  37, 12), 16, 10) AS UNSIGNED) AS h4,
        CAST(CONV(SUBSTRING(x,  49, 12), 16, 10) AS UNSIGNED) AS h5,
        CAST(CONV(SUBSTRING(x,  61, 12), 16, 10) AS UNSIGNED) AS h6,
        CAST(CONV(SUBSTRING(x,  73, 12), 16, 10) AS UNSIGNED) AS h7,
        CAST(CONV(SUBSTRING(x,  85, 12), 16, 10) AS UNSIGNED) AS h8,
        CAST(CONV(SUBSTRING(x,  97, 12), 16, 10) AS UNSIGNED) AS h9,
        CAST(CONV(SUBSTRING(x, 109, 12), 16, 10) AS UNSIGNED) AS h10
      FROM (SELECT seq, SHA2(CONCAT('payment_events:', seq), 512) AS x
            FROM seq_1_to_$n) AS s) AS h;
ALTER TABLE $table COMMENT = '$marker';
ANALYZE TABLE $table;
SQL
    log "MariaDB table $table: $(table_mb "$table") MB on disk"
}

# ------------------------------------------------------------- reports --

# mdb_machine_section PYTHON: "## Machine" for a run against MariaDB: CPUs,
# memory, kernel, load (LOAD_AVG_START), the server and its settings that
# bear on speed, the mariadb client, sluice (SLUICE) and PYTHON, a line about
# the Python peers.
mdb_machine_section() {
    local dirty="" cpu
    if [[ -n $(git -C "$ROOT" status --porcelain 2>/dev/null) ]]; then dirty=" (with uncommitted changes)"; fi
    cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
    echo "## Machine"
    echo
    echo "- CPUs (nproc): $(nproc)${cpu:+ — $cpu}"
    echo "- memory: $(awk '/^MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo) GiB"
    echo "- kernel: $(uname -sr)"
    echo "- load average (1/5/15 min) at start: $LOAD_AVG_START; at end: $(load_average)"
    echo "- MariaDB server: $(mdb -e 'select version()') at $MDB_URL_SHOWN (client and server on the same machine unless the URL says otherwise); $(mdb -e "select concat_ws(', ',
        concat('innodb_buffer_pool_size=', @@innodb_buffer_pool_size div 1048576, 'MB'),
        concat('innodb_flush_method=', @@innodb_flush_method),
        concat('innodb_flush_log_at_trx_commit=', @@innodb_flush_log_at_trx_commit),
        concat('innodb_log_file_size=', @@innodb_log_file_size div 1048576, 'MB'),
        concat('max_allowed_packet=', @@max_allowed_packet),
        concat('local_infile=', @@local_infile),
        concat('have_ssl=', @@have_ssl),
        concat('log_bin=', @@log_bin))")"
    echo "- mariadb client: $(mariadb --version)"
    echo "- sluice: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "no commit")$dirty, ${SLUICE#"$ROOT"/}"
    echo "- Python: $1"
    echo
}

# mdb_reproduce_section SCRIPT SETTINGS: "## Reproduce" for a run against
# MariaDB (its masked URL).
mdb_reproduce_section() {
    reproduce_section "$1" "$2" SLUICE_BENCH_MARIADB_URL "$MDB_URL_SHOWN"
}
