"""Benchmark: the floor under `tilescope kernels FILE --format parquet -o OUT`.

Runs, as a subprocess of its own (start-up included, like the command), only the two stages no
kernel tool can skip: the typed parse of the CSV on --parsers threads (the same options and byte
ranges as `tilescope.io.kernel_stream`) overlapped with the Parquet write of the raw parsed columns (same
writer settings) — no normalisation, no derived metrics, no chip, no CLI. Compare its time with the
command's in `bench_kernels.py`: the difference is what normalisation costs on top of the floor.

    .venv/bin/python benchmarks/bench_parquet_floor.py --csv bench-data/kernel_details_1000000.csv
    .venv/bin/python benchmarks/bench_parquet_floor.py --csv bench-data/kernel_details_1000000.csv --parsers 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import sys, threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tilescope.columns import canonical_header
from tilescope.io import kernel_stream as ks
from tilescope.io.tables import csv_options, numeric_columns, read_header, typed_column_types

threading.Thread(target=__import__, args=("pandas",), daemon=True).start()  # as the command does
src, out, parsers = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
header = read_header(src)
names = [f"c{i}" for i in range(len(header))]
types = typed_column_types(names, numeric_columns(canonical_header(header)))
options = csv_options(names, types, True, ks.BLOCK_SIZE, skip_rows=0, use_threads=False)
buf = pa.memory_map(str(src)).read_buffer()
_, header_end = next(ks._chunks(buf, 0, 1))
ranges = ks._chunks(buf, header_end, ks.GROUP_BYTES)
pool = ThreadPoolExecutor(parsers)
pending = deque()

def parse_next():
    r = next(ranges, None)
    if r is not None:
        pending.append(pool.submit(ks._parse, buf, r[0], r[1], options))

for _ in range(max(ks.AHEAD, parsers)):
    parse_next()
writer = None
while pending:
    table = pending.popleft().result()
    parse_next()
    if writer is None:
        text = [f.name for f in table.schema if pa.types.is_dictionary(f.type)]
        writer = pq.ParquetWriter(out, table.schema, compression="lz4", use_dictionary=text,
                                  store_schema=False, write_batch_size=1 << 16)
    writer.write_table(table, row_group_size=1 << 17)
writer.close()
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--parsers", type=int, default=1, help="parser threads (the command uses 1 for files)")
    args = ap.parse_args()
    out = args.csv.with_name("floor.parquet")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}  # as analyzer/cli.py sets it
    walls = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        cmd = [sys.executable, "-c", CHILD, str(args.csv), str(out), str(args.parsers)]
        subprocess.run(cmd, check=True, env=env)
        walls.append(time.perf_counter() - t)
    print(
        f"parse ({args.parsers} thread(s)) overlapped with the Parquet write of the raw columns: "
        f"{min(walls):.2f} s best, {max(walls):.2f} s worst of {len(walls)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
