#!/usr/bin/env bash
# The main job: compare the paths to one namespace side by side.
# Without an NVMe device this runs in the emulated test bed (QEMU) and labels
# every figure emulated. Results go to results/<timestamp>/.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${NVB_RESULTS:-results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
cargo build --release --quiet
B=target/release/nvme-bypass
echo "The three-way compare command is not built yet (issue 5)." >&2
echo "Running the simulator path, which is: results in $OUT" >&2
$B bench --backend sim --rw randread --bs 4k --iodepth 64 --runtime 5 | tee "$OUT/sim-randread.txt"
$B bench --backend sim --rw randread --bs 4k --iodepth 64 --runtime 5 --output-format json > "$OUT/sim-randread.json"
echo "results: $OUT"
