#!/usr/bin/env bash
# Seeds each fuzz target's corpus from the captured client frames (protocol-tests/fixtures).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fixtures=$here/../protocol-tests/fixtures
mkdir -p "$here/corpus/decode_request" "$here/corpus/frame_check" "$here/corpus/validate_records" \
  "$here/corpus/stored_batch"
for f in $(find "$fixtures" -name '*.bin' ! -name '*.resp.bin'); do
  name=$(echo "${f#$fixtures/}" | tr '/' '_')
  cp "$f" "$here/corpus/decode_request/$name"
  # frame_check sees the size prefix too.
  python3 -c 'import sys,struct; d=open(sys.argv[1],"rb").read(); sys.stdout.buffer.write(struct.pack(">i",len(d))+d)' \
    "$f" >"$here/corpus/frame_check/$name"
done
# validate_records wants bare record batches: the ones inside the produce fixtures.
python3 - "$fixtures" "$here/corpus/validate_records" <<'PY'
import os, struct, sys
src, dst = sys.argv[1:]
n = 0
for root, _, files in os.walk(src):
    for name in files:
        if not name.startswith("Produce-") or name.endswith(".resp.bin"):
            continue
        data = open(os.path.join(root, name), "rb").read()
        # A v2 batch starts with base offset 0 and has magic 2 at byte 16: find them by shape.
        i = 0
        while i + 61 <= len(data):
            if data[i:i + 8] == b"\0" * 8 and data[i + 16] == 2:
                (length,) = struct.unpack(">i", data[i + 8:i + 12])
                if 49 <= length <= len(data) - i - 12:
                    open(os.path.join(dst, f"batch-{n}"), "wb").write(data[i:i + 12 + length])
                    n += 1
                    i += 12 + length
                    continue
            i += 1
print(f"{n} record batches", file=sys.stderr)
PY
# stored_batch reads the same batches as they come back from a segment.
cp "$here/corpus/validate_records/"* "$here/corpus/stored_batch/"
# offsets_records wants a u16 key length, a __consumer_offsets key, then its value: one
# record of the common types (an offset commit v3 and its tombstone, group metadata v3,
# a KIP-848 group epoch).
mkdir -p "$here/corpus/offsets_records"
python3 - "$here/corpus/offsets_records" <<'PY'
import os, struct, sys
dst = sys.argv[1]
def s(x): return struct.pack(">h", len(x)) + x
offset_key = struct.pack(">h", 1) + s(b"group") + s(b"orders") + struct.pack(">i", 3)
offset_v3 = struct.pack(">hqi", 3, 42, 5) + s(b"meta") + struct.pack(">q", 1700000000000)
group_key = struct.pack(">h", 2) + s(b"group")
group_v3 = (struct.pack(">h", 3) + s(b"consumer") + struct.pack(">i", 4) + s(b"range") + s(b"m1")
            + struct.pack(">qi", 123, 1) + s(b"m1") + struct.pack(">h", -1) + s(b"c") + s(b"/127.0.0.1")
            + struct.pack(">ii", 300000, 45000) + struct.pack(">i", 3) + b"sub" + struct.pack(">i", 2) + b"as")
epoch_key = struct.pack(">h", 3) + s(b"group")
epoch_v0 = struct.pack(">hi", 0, 7) + b"\0"
seeds = {"offset": (offset_key, offset_v3), "offset-tombstone": (offset_key, b""),
         "group": (group_key, group_v3), "consumer-epoch": (epoch_key, epoch_v0)}
for name, (k, v) in seeds.items():
    open(os.path.join(dst, name), "wb").write(struct.pack(">H", len(k)) + k + v)
PY
