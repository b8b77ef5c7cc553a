#!/usr/bin/env bash
# Many calls, one trip: 10,000 calls of one statement through `sluice proxy` at a
# given RTT, as a loop (one call in flight at a time) and pipelined.
#
#   bash bench/call.sh                 # RTT=1ms CALLS=10000 REPS=3
#   SLUICE_BENCH_PG_URL=postgres://… RTT=5ms bash bench/call.sh
set -euo pipefail
cd "$(dirname "$0")/.."

URL="${SLUICE_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
RTT="${RTT:-1ms}"
CALLS="${CALLS:-10000}"
REPS="${REPS:-3}"
PORT="${PROXY_PORT:-6499}"
SLUICE="${SLUICE_BIN:-target/release/sluice}"

[ "${SKIP_BUILD:-0}" = 1 ] || cargo build --release -p sluice-cli >&2

# Where the proxy forwards to: the host and port of the URL.
hostport=$(python3 -c "import sys,urllib.parse as u; p=u.urlparse(sys.argv[1]); print(f'{p.hostname or \"127.0.0.1\"}:{p.port or 5432}')" "$URL")
proxied=$(python3 -c "import sys,urllib.parse as u; p=u.urlparse(sys.argv[1]); print(p._replace(netloc=p.netloc.rsplit('@',1)[0]+'@127.0.0.1:'+sys.argv[2] if '@' in p.netloc else '127.0.0.1:'+sys.argv[2]).geturl())" "$URL" "$PORT")

"$SLUICE" proxy --listen "127.0.0.1:$PORT" --upstream "$hostport" --rtt "$RTT" 2>/dev/null &
proxy=$!
trap 'kill $proxy 2>/dev/null || true' EXIT
sleep 0.5

params=$(mktemp)
seq 1 "$CALLS" | awk '{print "[" $1 ", " $1 % 7 "]"}' > "$params"
# shellcheck disable=SC2016 # $1 and $2 are SQL parameters, not shell ones
sql='select $1::int8 * 2 + $2::int8 as result'

# median of a list of numbers
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

run() { # prints "seconds round_trips"
  local start end trips
  start=$(date +%s.%N)
  trips=$("$SLUICE" call --db "$proxied" --query "$sql" --params-file "$params" -o /dev/null --stats "$@" 2>&1 \
          | awk -F': ' '/^round trips: /{print $2}')
  end=$(date +%s.%N)
  echo "$(awk -v a="$end" -v b="$start" 'BEGIN{print a-b}') $trips"
}

loop_times=(); pipe_times=(); loop_trips=0; pipe_trips=0
for _ in $(seq 1 "$REPS"); do
  read -r t n < <(run --transaction each --window-bytes 1); loop_times+=("$t"); loop_trips=$n
  read -r t n < <(run); pipe_times+=("$t"); pipe_trips=$n
done
loop=$(printf '%s\n' "${loop_times[@]}" | median)
pipe=$(printf '%s\n' "${pipe_times[@]}" | median)
ratio=$(awk -v a="$loop" -v b="$pipe" 'BEGIN{print a/b}')

out="bench/results/call-$(date -u +%F).md"
mkdir -p bench/results
{
  echo "# sluice call: $CALLS calls through sluice proxy at RTT $RTT — $(date -u +%F)"
  echo
  echo "| variant | median s | round trips |"
  echo "| --- | ---: | ---: |"
  # shellcheck disable=SC2016 # backticks are Markdown
  printf '| loop (one call in flight: `--transaction each --window-bytes 1`) | %.2f | %s |\n' "$loop" "$loop_trips"
  # shellcheck disable=SC2016 # backticks are Markdown
  printf '| pipelined (`sluice call`, default window) | %.3f | %s |\n' "$pipe" "$pipe_trips"
  echo
  printf 'Pipelined is **%.0f×** faster than the loop. Median of %s runs; 2-core machine, PostgreSQL on the same host behind the proxy.\n' "$ratio" "$REPS"
  echo
  echo "Reproduce: \`RTT=$RTT CALLS=$CALLS REPS=$REPS bash bench/call.sh\`"
} | tee "$out"
rm -f "$params"
