#!/bin/bash
# nvme-bypass test bed: our driver on controllers shaped unlike QEMU's
# default, all in one boot (see scripts/testbed/README.md "Geometries").
#
# usage: scripts/testbed/geometry.sh [--bin PATH] [--results DIR] [--quiet]
#
# One QEMU guest gets one controller per geometry below (run.sh --ctrl/--ns),
# each namespace an image of its own that this script prefills: random
# sentinels just before and just after the benchmark range, zeroes
# elsewhere. tests/testbed/geometry.sh runs `info` and verified vfio runs
# on each. Afterwards every image is checked here, outside the guest: a run
# that worked may have changed only the benchmark range, a refusal nothing
# at all (it came before any I/O), and the sentinels are intact either way.
#
# A case passes when our driver either works (exit 0, verify 0 mismatches)
# or, where the case allows it, refuses before any I/O (exit 2) with a
# message naming the feature (EXPECT below). Hangs, crashes, mismatches,
# refusals that do not name the feature, and any change outside the range
# fail it. Writes RESULTS/geometry.md (the table for docs/reliability.md)
# and RESULTS/geometry.json; exit 0 when every case passed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=; RESULTS=; QUIET=--quiet
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --results) RESULTS=$2; shift 2 ;;
    --verbose) QUIET=; shift ;;
    --quiet) QUIET=--quiet; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "geometry.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
RESULTS=${RESULTS:-$REPO/target/testbed/results/geometry-$(date +%Y%m%d-%H%M%S)}

# The benchmark range in every namespace, and the sentinels around it.
OFF_K=1024; SIZE_K=4096; SENT_K=512; IMG=16M

# Controllers: NAME|-device nvme options|namespaces (';' between, nvme-ns
# options; none = one plain namespace, nsid 1).
CTRLS=(
  "mqes1|mqes=1|nsid=1;nsid=2"
  "mdts1|mdts=1|nsid=1;nsid=2"
  "msix2|msix_qsize=2,max_ioqpairs=4|nsid=1;nsid=2"
  "qp1|max_ioqpairs=1|"
  "nsids||nsid=2;nsid=5,logical_block_size=4096;nsid=7,detached=on"
  "meta||nsid=1,ms=8,mset=1;nsid=2,ms=16,mset=0;nsid=3,ms=8,mset=0;nsid=4,ms=16,mset=1"
  "pi||nsid=1,ms=8,pi=1;nsid=2,ms=16,mset=1,pi=3,pil=1"
  "zoned||nsid=1,zoned=on,zoned.zone_size=4M"
  "cmb|cmb_size_mb=16|"
)
# Cases: GEOMETRY|CONTROLLER|NSID|bench arguments|EXPECT: `work` (must
# work), or the word a refusal must name (working is fine too). Each case
# has a namespace of its own (or none), so its image tells what it wrote.
CASES=(
  "mqes=1 (2-entry queues), QD 1|mqes1|1|--iodepth 1|work"
  "mqes=1 (2-entry queues), QD 4|mqes1|2|--iodepth 4|MQES"
  "mdts=1 (8 KiB transfers), 4 KiB I/O, QD 8|mdts1|1|--bs 4k --iodepth 8|work"
  "mdts=1 (8 KiB transfers), 64 KiB I/O|mdts1|2|--bs 64k --iodepth 2|MDTS"
  "msix_qsize=2 (2 vectors), --interrupts, 1 job|msix2|1|--interrupts --iodepth 8|work"
  "msix_qsize=2 (2 vectors), --interrupts, 2 jobs|msix2|2|--interrupts --numjobs 2 --iodepth 8|vector"
  "max_ioqpairs=1, --numjobs 2|qp1|1|--numjobs 2 --iodepth 4|queue"
  "namespaces 2, 5, 7 (detached): nsid 2|nsids|2|--iodepth 8|work"
  "namespaces 2, 5, 7 (detached): nsid 5, 4 KiB LBAs|nsids|5|--iodepth 8|work"
  "namespaces 2, 5, 7 (detached): nsid 1 (none)|nsids|1||not active"
  "namespaces 2, 5, 7 (detached): nsid 7 (detached)|nsids|7||not active"
  "ms=8, extended (mset=1)|meta|1||metadata"
  "ms=16, separate (mset=0)|meta|2||metadata"
  "ms=8, separate (mset=0)|meta|3||metadata"
  "ms=16, extended (mset=1)|meta|4||metadata"
  "protection information Type 1 (ms=8)|pi|1||protection information"
  "protection information Type 3 (ms=16, mset=1, first bytes)|pi|2||protection information"
  "zoned namespace (4 MiB zones)|zoned|1||zoned"
  "controller memory buffer (cmb_size_mb=16)|cmb|1|--iodepth 16|work"
)

mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
WORK=$RESULTS/images
mkdir -p "$WORK"
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

# run.sh arguments: one --ctrl per controller, one --ns per namespace with
# its prefilled image.
RUN=(); EXPECT_NS=(); declare -A CIDX
python_fill=$(cat <<'PY'
import sys, random
path, lbs, off_k, size_k, sent_k, seed = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:])
r = random.Random(seed)
with open(path, "r+b") as f:
    for start in (off_k - sent_k, off_k + size_k):
        f.seek(start * 1024)
        f.write(bytes(r.getrandbits(8) for _ in range(sent_k * 1024)))
PY
)
i=0
for c in "${CTRLS[@]}"; do
  IFS='|' read -r name copts nss <<< "$c"
  CIDX[$name]=$i
  RUN+=(--ctrl "$copts")
  IFS=';' read -r -a nslist <<< "${nss:-nsid=1}"
  attached=
  for ns in "${nslist[@]}"; do
    nsid=$(sed -n 's/.*nsid=\([0-9]*\).*/\1/p' <<< "$ns")
    case "$ns" in *detached=on*) ;; *) attached+="${attached:+, }$nsid" ;; esac
    img=$WORK/c${i}n$nsid.img
    truncate -s "$IMG" "$img"
    python3 -c "$python_fill" "$img" 0 $OFF_K $SIZE_K $SENT_K $((i * 100 + nsid))
    cp --sparse=always "$img" "$img.orig"
    RUN+=(--ns "$ns,file=$img")
  done
  EXPECT_NS+=("$i:$attached")       # what info must list for controller i
  i=$((i + 1))
done
GARGS=()
for k in "${CASES[@]}"; do
  IFS='|' read -r label ctrl nsid args expect <<< "$k"
  GARGS+=("$label|${CIDX[$ctrl]}|$nsid|$args|$expect")
done

echo "geometry: ${#CTRLS[@]} controllers, ${#CASES[@]} cases, one boot; results in $RESULTS"
T0=$SECONDS
rc=0
# (run.sh retries a boot that hit a QEMU fault only with fresh images, so
# this script does it itself: the images must be prefilled again.)
for attempt in 1 2; do
  rc=0
  "$HERE/run.sh" $QUIET ${BIN:+--bin "$BIN"} --retries 0 --results "$RESULTS/boot-$attempt" \
    --extra-append "nvb.ns=0" --timeout 900 "${RUN[@]}" "$REPO/tests/testbed/geometry.sh" "${GARGS[@]}" || rc=$?
  fault=$(grep -o '"qemu_fault": [a-z]*' "$RESULTS/boot-$attempt/run.json" 2>/dev/null | sed 's/.*: //')
  [ "$fault" = true ] && [ "$attempt" = 1 ] || break
  echo "geometry: RETRY: the boot hit a QEMU fault ($(sed -n 's/.*"message": "\([^"]*\)".*/\1/p' "$RESULTS/boot-1/run.json")); booting once more" >&2
  for o in "$WORK"/*.orig; do cp --sparse=always "$o" "${o%.orig}"; done
done
BOOT=$RESULTS/boot-$attempt
RETRIES=$((attempt - 1))
echo "geometry: boot exit $rc after $((SECONDS - T0)) s${RETRIES:+ ($RETRIES retries)}"

# The verdicts: the guest's outcome per case, the images' state, EXPECT.
GEOMETRY_CTRL_NAMES=$(for n in "${!CIDX[@]}"; do printf '%s:%s;' "${CIDX[$n]}" "$n"; done) \
python3 - "$BOOT/results/geometry/cases.tsv" "$WORK" "$RESULTS" "$OFF_K" "$SIZE_K" "$SENT_K" "$RETRIES" "$(IFS=';'; echo "${EXPECT_NS[*]}")" "${GARGS[@]}" <<'PY'
import json, os, re, sys
tsv, work, results, off_k, size_k, sent_k, retries = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:8])
expect_ns = dict(x.split(":", 1) for x in sys.argv[8].split(";"))
ctrl_name = dict(x.split(":", 1) for x in os.environ.get("GEOMETRY_CTRL_NAMES", "").split(";") if ":" in x)
cases = [a.split("|") for a in sys.argv[9:]]
rows = {}
info = []
try:
    for line in open(tsv):
        label, ctrl, nsid, rc, outcome, msg = (line.rstrip("\n").split("\t") + [""] * 6)[:6]
        if label in ("info", "bind", "unbind"):
            info.append((label, ctrl, rc, outcome, msg))
        else:
            rows[(label, ctrl, nsid)] = (rc, outcome, msg)
except FileNotFoundError:
    pass

def image_state(ctrl, nsid):
    """What changed in the namespace image: 'untouched', 'range only', or a complaint."""
    p = os.path.join(work, f"c{ctrl}n{nsid}.img")
    if not os.path.exists(p):
        return "no image"
    a, b = open(p + ".orig", "rb").read(), open(p, "rb").read()
    K = 1024
    lo, hi = off_k * K, (off_k + size_k) * K
    bad = []
    if a[: lo - sent_k * K] != b[: lo - sent_k * K] or a[hi + sent_k * K:] != b[hi + sent_k * K:]:
        bad.append("data outside the range and its sentinels changed")
    if a[lo - sent_k * K: lo] != b[lo - sent_k * K: lo]:
        bad.append("the sentinel before the range changed")
    if a[hi: hi + sent_k * K] != b[hi: hi + sent_k * K]:
        bad.append("the sentinel after the range changed")
    if bad:
        return "; ".join(bad)
    return "untouched" if a[lo:hi] == b[lo:hi] else "range only"

out, ok_all = [], True
for label, ctrl, nsid, args, expect in cases:
    rc, outcome, msg = rows.get((label, ctrl, nsid), ("", "not run", "the guest never got to this case"))
    img = image_state(ctrl, nsid)
    ok = False
    if outcome == "works":
        ok = img in ("range only", "untouched")
        did = "works"
    elif outcome == "refused":
        named = expect != "work" and expect.lower() in msg.lower()
        ok = named and img in ("untouched", "no image")  # no image: the NSID has no namespace
        did = "refuses before I/O" if img in ("untouched", "no image") else "refuses, AFTER I/O"
        if not named:
            did += " (message does not name " + ("the case: it must work" if expect == "work" else f"'{expect}'") + ")"
    else:
        did = outcome
    if img not in ("range only", "untouched", "no image"):
        did += f"; image: {img}"
    ok_all &= ok
    out.append({"geometry": label, "controller": int(ctrl), "nsid": int(nsid), "arguments": args, "expect": expect,
                "exit": rc, "outcome": outcome, "did": did, "image": img, "message": msg, "pass": ok})

def cell(s):
    return s.replace("|", "\\|").replace("\n", " ")

md = ["| geometry | what our driver did | message or verify result |", "|---|---|---|"]
for r in out:
    md.append(f"| {cell(r['geometry'])}{' `' + cell(r['arguments']) + '`' if r['arguments'] else ''} | {cell(r['did'])}{'' if r['pass'] else ' **FAIL**'} | {cell(r['message'])} |")
for label, ctrl, rc, outcome, msg in info:
    if label == "info":
        want = expect_ns.get(ctrl, "")
        listed = msg.startswith(f"namespaces: {want};")
        ok_all &= outcome == "info" and listed
        did = f"lists namespaces {want}" if outcome == "info" and listed else f"{outcome}, expected namespaces {want} **FAIL**"
        md.append(f"| controller {ctrl} ({cell(ctrl_name.get(ctrl, ''))}): `info --backend vfio` | {did} | {cell(msg)} |")
    else:
        md.append(f"| controller {ctrl}: {label} | {outcome} **FAIL** | {cell(msg)} |")
        ok_all = False
open(os.path.join(results, "geometry.md"), "w").write("\n".join(md) + "\n")
json.dump({"cases": out, "controller_steps": info, "retries": retries, "pass": ok_all}, open(os.path.join(results, "geometry.json"), "w"), indent=1)
print("\n".join(md))
print(f"geometry: {sum(r['pass'] for r in out)} of {len(out)} cases passed{'' if ok_all else ' - FAILED'}; retries {retries}")
sys.exit(0 if ok_all else 1)
PY
