# Case helpers for shell-driven suites. Source, don't execute.
# A case is a shell function that returns 0 on success; on failure it writes a one-line
# reason with `fail "..."` (or the last lines of $CASE_LOG are used). A case that called
# `fail` has failed even if a later command of it succeeded (`check || fail "..."` in the
# middle of a function does not end the function).
# shellcheck shell=bash

CASE_TMP=$(mktemp -d "${TMPDIR:-/tmp}/compat-case.XXXXXX")
trap 'rm -rf "$CASE_TMP"' EXIT
CASE_LOG="$CASE_TMP/log"

fail() { printf '%s\n' "$*" >"$CASE_TMP/reason"; return 1; }

# run_case ID FUNCTION [ARGS...]: prints `PASS ID` or `FAIL ID: reason`.
run_case() {
  local id=$1; shift
  : >"$CASE_LOG"; rm -f "$CASE_TMP/reason"
  if "$@" >>"$CASE_LOG" 2>&1 && [[ ! -s $CASE_TMP/reason ]]; then
    printf 'PASS %s\n' "$id"
  else
    local reason
    if [[ -s $CASE_TMP/reason ]]; then reason=$(head -c 400 "$CASE_TMP/reason")
    else reason=$(grep -v '^\s*$' "$CASE_LOG" | tail -n 3 | tr '\n' ' ' | head -c 400); fi
    printf 'FAIL %s: %s\n' "$id" "${reason:-exit status non-zero}"
    if [[ -n ${COMPAT_VERBOSE:-} ]]; then sed 's/^/    | /' "$CASE_LOG" >&2; fi
  fi
}

# retry_until SECONDS CMD...: retry CMD until it succeeds or time runs out.
retry_until() {
  local t=$1; shift
  local deadline=$((SECONDS + t))
  until "$@"; do ((SECONDS < deadline)) || return 1; sleep 0.5; done
}

uniq_name() { printf 'compat-%s-%s' "$1" "$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"; }
