#!/usr/bin/env bash
# Run every cargo-fuzz target (tests/fuzz) for a bounded time each: the
# parsers of device data (completion entries and queues, Identify pages) and
# of option values. Exit 0 when no target found a crash, 1 otherwise (the
# crashing input is saved under tests/fuzz/artifacts/<target>/).
#
#   scripts/fuzz.sh                 # every target, NVB_FUZZ_SECONDS (25) each
#   scripts/fuzz.sh options 60      # one target, 60 s
#   scripts/fuzz.sh --build         # build every target, run none
#
# cargo-fuzz needs a nightly compiler for its -Z flags (sanitizer coverage,
# AddressSanitizer). The machine has one stable toolchain and no other can be
# fetched, so the build sets RUSTC_BOOTSTRAP=1, which lets the stable
# compiler accept them (libfuzzer-sys and the AddressSanitizer runtime ship
# with it). cargo-fuzz itself is installed from crates.io when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECS=${2:-${NVB_FUZZ_SECONDS:-25}}
TARGETS=${1:-"completion identify options hostile"}

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz (once; about 2 minutes)"
  cargo install --locked cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
fi

export RUSTC_BOOTSTRAP=1
FUZZ=$ROOT/tests/fuzz
if [ "${1:-}" = --build ]; then
  # The same build `cargo fuzz run --release` makes, ahead of time
  # (scripts/test.sh builds them beside its release build).
  cargo fuzz build --fuzz-dir "$FUZZ" --release
  echo "fuzz: targets built"
  exit 0
fi
failed=""
passed=0
for t in $TARGETS; do
  mkdir -p "$FUZZ/corpus/$t"
  echo "fuzz: $t for ${SECS}s"
  log=$(mktemp)
  # -max_total_time bounds the run; -rss_limit_mb catches unbounded
  # allocation; -timeout makes one input that hangs a finding; the corpus
  # persists between runs (not committed). `hostile` leaks by design: the
  # driver keeps the memory of a controller it never saw stop mapped for
  # the rest of the process (keep_mapped), so LeakSanitizer is off for it.
  extra=""
  asan=${ASAN_OPTIONS:-}
  if [ "$t" = hostile ]; then extra="-detect_leaks=0"; asan="detect_leaks=0${asan:+:$asan}"; fi
  if ASAN_OPTIONS=$asan cargo fuzz run --fuzz-dir "$FUZZ" --release "$t" "$FUZZ/corpus/$t" -- -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 $extra >"$log" 2>&1; then
    runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
    # libFuzzer's last status line: coverage (cov, ft), corpus, exec/s.
    final=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)
    echo "fuzz: $t ok (${runs:-?} inputs) ${final}"
    passed=$((passed + 1))
  else
    echo "fuzz: $t FAILED; last lines of its log (all of it: tests/fuzz/artifacts/$t/fuzz.log):" >&2
    tail -n 40 "$log" >&2
    mkdir -p "$FUZZ/artifacts/$t" && cp "$log" "$FUZZ/artifacts/$t/fuzz.log"
    failed="$failed $t"
  fi
  rm -f "$log"
done
nfailed=$(echo "$failed" | wc -w)
echo "fuzz: $passed passed, $nfailed failed"
[ -z "$failed" ]
