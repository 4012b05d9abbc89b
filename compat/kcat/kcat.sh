#!/usr/bin/env bash
# skua compatibility suite: kcat (Debian's kcat, built on librdkafka).
#   compat/kcat/kcat.sh HOST:PORT
# Prints one PASS/FAIL line per case. Topics are created with librdkafka's admin API
# (compat/python/topic.py) since kcat cannot create topics.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../lib/common.sh"
source "$here/../lib/cases.sh"
B=${1:?usage: kcat.sh HOST:PORT}
PY="${COMPAT_PYTHON:-python3}"
K=(timeout -k 5 45 kcat -b "$B" -X socket.timeout.ms=20000 -X topic.metadata.refresh.interval.ms=1000)
echo "# $(kcat -V 2>&1 | grep -m1 Version)"

mk_topic() { # NAME PARTITIONS
  timeout 60 "$PY" "$here/../python/topic.py" "$B" create "$1" "$2" || return 1
  retry_until 20 bash -c "timeout 10 kcat -b '$B' -L -t '$1' 2>/dev/null | grep -q 'partition $(($2 - 1)), leader'"
}
TOPICS=()
trap 'timeout 60 "$PY" "$here/../python/topic.py" "$B" delete "${TOPICS[@]}" >/dev/null 2>&1; rm -rf "$CASE_TMP"' EXIT

c_metadata() {
  local t; t=$(uniq_name kcat-md); TOPICS+=("$t")
  mk_topic "$t" 3 || fail "could not create topic"
  "${K[@]}" -L -t "$t" >"$CASE_TMP/md" || return 1
  cat "$CASE_TMP/md"
  grep -Eq '^ *1 brokers:' "$CASE_TMP/md" || fail "not exactly one broker listed"
  grep -Eq "broker [0-9]+ at 127\.0\.0\.1:${B##*:}" "$CASE_TMP/md" || fail "broker not advertised at ${B}"
  grep -q "topic \"$t\" with 3 partitions:" "$CASE_TMP/md" || fail "topic line missing"
  for p in 0 1 2; do
    grep -Eq "partition $p, leader ([0-9]+), replicas: \1, isrs: \1" "$CASE_TMP/md" \
      || fail "partition $p leader/replicas/isrs wrong"
  done
}
c_metadata_json() {
  "${K[@]}" -L -J >"$CASE_TMP/md.json" || return 1
  "$PY" - "$CASE_TMP/md.json" <<'PY' >"$CASE_TMP/reason"
import json, sys
md = json.load(open(sys.argv[1]))
assert md["brokers"] and all("id" in b and "name" in b for b in md["brokers"]), "brokers"
assert isinstance(md["topics"], list), "topics"
assert md.get("controllerid", -1) != -1, f"controllerid {md.get('controllerid')}"
PY
}
produce_consume() { # CODEC
  local t; t=$(uniq_name "kcat-$1"); TOPICS+=("$t")
  mk_topic "$t" 1 || fail "could not create topic"
  for i in $(seq 1 200); do printf 'key-%d|value %d %s\n' "$i" "$i" "$(printf 'x%.0s' $(seq 1 $((i % 50))))"; done >"$CASE_TMP/in"
  "${K[@]}" -P -t "$t" -p 0 -K '|' -z "$1" -H src=kcat -H codec="$1" -l "$CASE_TMP/in" || return 1
  "${K[@]}" -C -t "$t" -p 0 -o beginning -e -q -f '%o|%k|%s|%h\n' >"$CASE_TMP/out" || return 1
  awk -v codec="$1" '{ printf "%d|%s|src=kcat,codec=%s\n", NR-1, $0, codec }' "$CASE_TMP/in" >"$CASE_TMP/want"
  diff "$CASE_TMP/want" "$CASE_TMP/out" >"$CASE_TMP/diff" \
    || fail "consumed records differ: $(head -c 300 "$CASE_TMP/diff" | tr '\n' ' ')"
}
c_keyed() {
  local t; t=$(uniq_name kcat-keyed); TOPICS+=("$t")
  mk_topic "$t" 4 || fail "could not create topic"
  for r in 1 2 3; do for k in $(seq 1 30); do echo "user-$k:$r"; done; done \
    | "${K[@]}" -P -t "$t" -K : || return 1
  "${K[@]}" -C -t "$t" -o beginning -e -q -f '%p %k %s\n' >"$CASE_TMP/out" || return 1
  "$PY" - "$CASE_TMP/out" <<'PY' >"$CASE_TMP/reason"
import sys, zlib
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
assert len(rows) == 90, f"{len(rows)} records, want 90"
where, last = {}, {}
for p, k, r in rows:
    where.setdefault(k, set()).add(int(p))
    assert int(r) > last.get(k, 0), f"key {k} out of order"
    last[k] = int(r)
for k, ps in where.items():
    # kcat's default partitioner is librdkafka's consistent_random: crc32(key) % partitions
    want = zlib.crc32(k.encode()) % 4
    assert ps == {want}, f"key {k} in partitions {ps}, consistent hash says {want}"
PY
}
c_offsets_for_times() {
  local t; t=$(uniq_name kcat-times); TOPICS+=("$t")
  mk_topic "$t" 1 || fail "could not create topic"
  for i in 0 1 2 3 4; do
    echo "v$i" | "${K[@]}" -P -t "$t" -p 0 -X 'topic.message.timeout.ms=20000' || return 1
    sleep 0.05
  done
  local ts; ts=$("${K[@]}" -C -t "$t" -p 0 -o beginning -e -q -f '%T\n' | sed -n 3p)
  [[ -n $ts ]] || fail "could not read back timestamps"
  "${K[@]}" -Q -t "$t:0:$ts" >"$CASE_TMP/out" || return 1
  grep -Eq "\[0\] offset 2\s*$" "$CASE_TMP/out" || fail "query for ts of offset 2 gave: $(tr '\n' ' ' <"$CASE_TMP/out")"
}
c_group() {
  local t; t=$(uniq_name kcat-group); TOPICS+=("$t")
  mk_topic "$t" 2 || fail "could not create topic"
  seq 1 20 | "${K[@]}" -P -t "$t" || return 1
  "${K[@]}" -G "$(uniq_name kcat-g)" -o beginning -c 20 -q -f '%s\n' "$t" \
    -X auto.offset.reset=earliest >"$CASE_TMP/out" 2>"$CASE_TMP/err"
  [[ $(sort -n "$CASE_TMP/out" | tr '\n' ' ') == "$(seq 1 20 | tr '\n' ' ')" ]] \
    || fail "group consumer got $(wc -l <"$CASE_TMP/out") of 20 records"
}

run_case kcat.metadata c_metadata
run_case kcat.metadata_json c_metadata_json
for codec in none gzip snappy lz4 zstd; do run_case "kcat.produce_consume.$codec" produce_consume "$codec"; done
run_case kcat.keyed_partitioning c_keyed
run_case kcat.offsets_for_times c_offsets_for_times
run_case kcat.group.consume c_group
exit 0
