#!/usr/bin/env python3
"""Reads commbench's Parquet output back with DuckDB, a Parquet reader
independent of the one commbench writes with, and checks row counts and
column types per file and per Hive partition:

- `pcap extract --format parquet`: as many rows as the CSV extraction of
  the same capture (and as `pcap gen` wrote packets), the CSV's columns in
  its order, each with the type docs/pcap.md promises;
- `history --export parquet`: per lab=…/host=… partition, as many rows as
  the JSON Lines export of the same store, each column with the type
  docs/history.md promises, metrics readable as JSON;
- the other way: parts DuckDB writes from that export (Snappy and
  Zstandard) import into an empty store with every record.

Usage: parquet-duckdb.py COMMBENCH_BINARY. Exits 1 with what differed.
"""

import csv
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import duckdb

PCAP_TYPES = {
    "number": "BIGINT",
    "ts": "TIMESTAMP_NS WITH TIME ZONE",
    "caplen": "BIGINT",
    "len": "BIGINT",
    "tcp_seq": "BIGINT",
    "tcp_ack": "BIGINT",
    "frag": "BOOLEAN",
    "eth_src": "VARCHAR",
    "eth_dst": "VARCHAR",
    "ethertype": "VARCHAR",
    "ip_src": "VARCHAR",
    "ip_dst": "VARCHAR",
    "tcp_flags": "VARCHAR",
}
# Every other pcap column is a small integer.
PCAP_DEFAULT = "INTEGER"

HISTORY_TYPES = {
    "started_unix": "BIGINT",
    "run_id": "VARCHAR",
    "started_utc": "VARCHAR",
    "git_sha": "VARCHAR",
    "build_profile": "VARCHAR",
    "command_line": "VARCHAR",
    "environment": "VARCHAR",
    "test": "VARCHAR",
    "params": "VARCHAR",
    "metrics": "VARCHAR",
    "match_key": "VARCHAR",
    "lab": "VARCHAR",
    "host": "VARCHAR",
}

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def types_of(con, relation):
    # DuckDB names TIMESTAMPTZ_NS differently across versions; normalise.
    norm = {"TIMESTAMPTZ_NS": "TIMESTAMP_NS WITH TIME ZONE"}
    return {
        name: norm.get(t, t)
        for name, t, *_ in con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
    }


def run(binary, *args, env=None):
    out = subprocess.run(
        [binary, *args], capture_output=True, text=True, env=env, check=False
    )
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)} exited {out.returncode}: {out.stderr}")
    return out


def pcap(binary, tmp, con):
    cap, csv_path, pq = tmp / "gen.pcap", tmp / "gen.csv", tmp / "gen.parquet"
    gen = run(binary, "pcap", "gen", "--size", "2M", "--seed", "7", "-o", str(cap))
    m = re.search(r"gen: (\d+) packets", gen.stderr + gen.stdout)
    packets = int(m.group(1)) if m else None
    run(binary, "pcap", "extract", "-q", "--format", "csv", "-o", str(csv_path), str(cap))
    run(binary, "pcap", "extract", "-q", "--format", "parquet", "-o", str(pq), str(cap))
    with open(csv_path, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    n = con.execute(f"SELECT count(*) FROM read_parquet('{pq}')").fetchone()[0]
    check(n == len(body), f"pcap extract: {n} Parquet rows, {len(body)} CSV rows")
    check(packets is None or n == packets, f"pcap extract: {n} rows, gen wrote {packets} packets")
    types = types_of(con, f"read_parquet('{pq}')")
    check(list(types) == header, f"pcap extract: columns {list(types)} are the CSV's {header}")
    for col, t in types.items():
        want = PCAP_TYPES.get(col, PCAP_DEFAULT)
        check(t == want, f"pcap extract: column {col} is {t} (want {want})")


def history(binary, tmp, con):
    env = dict(os.environ, COMMBENCH_STORE=str(tmp / "store.db"))
    for cmd in (["timer"], ["budget", "--link", "10G", "--size", "64"], ["timer"]):
        run(binary, *cmd, "--format", "jsonl", "-o", str(tmp / "out.jsonl"), env=env)
    pq, js = tmp / "export-parquet", tmp / "export-jsonl"
    run(binary, "history", "--export", "parquet", str(pq), env=env)
    run(binary, "history", "--export", "jsonl", str(js), env=env)
    parts = sorted(p.parent.relative_to(js) for p in js.glob("lab=*/host=*/*.jsonl"))
    check(len(parts) >= 2, f"history export: {len(parts)} partitions (want ≥ 2)")
    for part in parts:
        lines = sum(
            1
            for f in (js / part).glob("*.jsonl")
            for line in f.read_text().splitlines()
            if line.strip()
        )
        n = con.execute(
            f"SELECT count(*) FROM read_parquet('{pq / part}/*.parquet')"
        ).fetchone()[0]
        check(n == lines, f"history export {part}: {n} Parquet rows, {lines} JSON Lines")
    rel = f"read_parquet('{pq}/**/*.parquet', hive_partitioning = true)"
    types = types_of(con, rel)
    check(set(types) == set(HISTORY_TYPES), f"history export: columns {sorted(types)}")
    for col, t in types.items():
        want = HISTORY_TYPES.get(col)
        check(t == want, f"history export: column {col} is {t} (want {want})")
    per = dict(
        con.execute(f"SELECT lab || '/' || host, count(*) FROM {rel} GROUP BY ALL").fetchall()
    )
    check(
        sum(per.values()) == sum(1 for _ in js.glob("**/*.jsonl") for l in _.read_text().splitlines() if l.strip()),
        f"history export: {per} rows per partition in all",
    )
    bad = con.execute(
        f"SELECT count(*) FROM {rel} WHERE json_valid(metrics) IS NOT TRUE OR json_valid(params) IS NOT TRUE"
    ).fetchone()[0]
    check(bad == 0, f"history export: {bad} rows whose metrics or params are not JSON")
    hz = con.execute(
        f"SELECT count(*) FROM {rel} WHERE lab = 'timer' AND test = 'tsc' AND CAST(json_extract(metrics, '$.hz') AS DOUBLE) > 0"
    ).fetchone()[0]
    check(hz == 2, f"history export: {hz} timer/tsc rows with a TSC rate (two timer runs)")
    total = con.execute(f"SELECT count(*) FROM {rel}").fetchone()[0]
    for codec in ("snappy", "zstd"):
        out = tmp / f"duckdb-{codec}"
        con.execute(
            f"COPY (SELECT * FROM {rel}) TO '{out}' "
            f"(FORMAT PARQUET, PARTITION_BY (lab, host), COMPRESSION {codec})"
        )
        env2 = dict(os.environ, COMMBENCH_STORE=str(tmp / f"store-{codec}.db"))
        got = run(binary, "history", "--import", str(out), env=env2)
        m = re.search(r"\((\d+) records\)", got.stderr + got.stdout)
        n = int(m.group(1)) if m else None
        check(n == total, f"history import of DuckDB's {codec} parts: {n} records (want {total})")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    con = duckdb.connect()
    with tempfile.TemporaryDirectory(prefix="commbench-duckdb-") as d:
        tmp = pathlib.Path(d)
        pcap(binary, tmp, con)
        history(binary, tmp, con)
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print(f"DuckDB {duckdb.__version__} read every Parquet file back as written")


if __name__ == "__main__":
    main()
