# shellcheck shell=bash
# What every bench script needs, sourced after it has set URL (and, optionally,
# LOG_PREFIX): tool checks, the URL with its password masked, `log`, `pg`, plain
# TCP for libpq clients, and the small formatting helpers of the reports.

[[ -x /usr/bin/time ]] || { echo "/usr/bin/time (GNU time) is required: apt-get install time" >&2; exit 2; }
command -v psql >/dev/null || { echo "psql is required: apt-get install postgresql-client" >&2; exit 2; }

# The same URL with any password masked, for everything we print or commit.
# shellcheck disable=SC2034  # used by the sourcing scripts
URL_SHOWN=$(sed -E 's#^([a-z]+://[^:/@]+):[^@]*@#\1:***@#' <<<"$URL")

log() { printf '[%s] %s\n' "${LOG_PREFIX:-bench}" "$*" >&2; }

# psql for the harness's own SQL: no ~/.psqlrc, stop on the first error,
# unaligned tuples-only output so results can be read into variables.
pg() { psql "$URL" -X -q -v ON_ERROR_STOP=1 -At "$@"; }

# sluice has no TLS; psql and psycopg (libpq, sslmode=prefer) would encrypt when
# the server offers it and pay for that. Compare like with like: plain TCP for
# every client unless PGSSLMODE is set.
export PGSSLMODE=${PGSSLMODE:-disable}

# shell_words ARG...: the args as a readable, copy-pasteable command line.
shell_words() {
    local a
    for a in "$@"; do
        # shellcheck disable=SC2016  # the literal placeholder $URL
        if [[ $a == '$URL' ]]; then printf ' "$URL"'
        elif [[ $a =~ ^[][A-Za-z0-9_./=:@%+,-]+$ ]]; then printf ' %s' "$a"
        elif [[ $a != *\'* ]]; then printf " '%s'" "$a"
        elif [[ $a != *[\"\$\`]* ]]; then printf ' "%s"' "$a"
        else printf ' %q' "$a"
        fi
    done
}

# mb KB -> megabytes with one decimal.
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
# fmt_int 1234567 -> 1,234,567 (not locale-dependent).
fmt_int() { sed -E ':a; s/([0-9])([0-9]{3})($|,)/\1,\2\3/; ta' <<<"$1"; }
