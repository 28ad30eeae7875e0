"""Signed checkpoints at scale: a checkpoint over 1,000,000 events, an inclusion proof, and what
checkpointing costs a STRICT caller.

Run from the repository root::

    .venv/bin/python bench/bench_checkpoint.py                  # 1,000,000 events (a few minutes)
    .venv/bin/python bench/bench_checkpoint.py --events 100000  # for development

A measurement script, not a test: it asserts nothing about time. The garbage collector stays
on; each timing is the median of ``--repeat`` repeats.

Sections:

1. A SQLite store filled with ``--events`` events (appended in batches of 10,000), then: the
   first checkpoint (sequencing every event, the root over every leaf hash, the signature), a
   checkpoint after 1,000 more events, an inclusion proof of a random event (the JSON document
   ``toolbox audit prove`` prints), its check (no database), and ``verify_log`` of the whole
   store against the witnessed checkpoints.
2. One STRICT caller (``gateway.invoke`` of a trivial tool on `SqliteSink`, as in
   bench_audit_scale's section 1) without checkpoints, and with a thread checkpointing the same
   store every second: rounds interleaved, the ratio is the median of each round's ratio.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_audit_scale import fmt, interleaved_rounds, one_caller, round_ratio

from toolbox.audit import AuditEvent, AuditQuery, EventType, SqliteSink
from toolbox.audit._log import MerkleLog
from toolbox.audit._log_verify import WitnessedNote, verify_log
from toolbox.audit._note import KeyFileSigner, generate_key
from toolbox.audit._proofs import check_proof, inclusion_document
from toolbox.audit._witness import DirectoryWitness, Witness

ORIGIN = "bench.example.com/audit"
BATCH = 10_000


def median_time(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fill(sink: SqliteSink, count: int) -> None:
    for start in range(0, count, BATCH):
        sink.append(
            [
                AuditEvent(
                    EventType.INVOCATION_REQUEST,
                    trace_id=f"t{(start + i) // 4}",
                    name="calc.add",
                    tool="calc",
                )
                for i in range(min(BATCH, count - start))
            ]
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200, help="STRICT calls per round (section 2)")
    parser.add_argument("--rounds", type=int, default=9, help="rounds of section 2")
    args = parser.parse_args()
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="toolbox-bench-checkpoint-")))
        pem, key = generate_key("bench")
        (tmp / "key.pem").write_bytes(pem)
        (tmp / "key.pem").chmod(0o600)
        signer = KeyFileSigner(tmp / "key.pem", name="bench")
        witness = Witness(DirectoryWitness(tmp / "witness"), [key])

        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
        print(f"== 1. a checkpoint over {args.events:,} events (SQLite)")
        sink = SqliteSink(tmp / "audit.db")
        stack.callback(sink.close)
        start = time.perf_counter()
        fill(sink, args.events)
        print(f"  fill ({args.events:,} events, batches of {BATCH:,})  {time.perf_counter() - start:8.2f} s")
        log = MerkleLog(sink)
        start = time.perf_counter()
        note = log.checkpoint(signer, ORIGIN)
        first = time.perf_counter() - start
        log.publish(note, [witness])
        print(f"  first checkpoint (sequence + root + sign)     {first:8.2f} s")
        fill(sink, 1000)
        start = time.perf_counter()
        note = log.checkpoint(signer, ORIGIN)
        print(f"  checkpoint after 1,000 more events            {time.perf_counter() - start:8.2f} s")
        start = time.perf_counter()
        log.publish(note, [witness])
        print(f"  hand it to a witness (with consistency proof) {time.perf_counter() - start:8.2f} s")
        entries = log.entries()
        chosen = [random.choice(entries).event_id for _ in range(args.repeat)]
        documents = []
        proof_time = median_time(
            lambda: documents.append(inclusion_document(sink, chosen[len(documents)])), args.repeat
        )
        print(f"  inclusion proof of one event (prove)          {fmt(proof_time)}")
        check_time = median_time(lambda: check_proof(documents[0], [key]), args.repeat)
        print(f"  its check, without the database (check-proof) {fmt(check_time)}")
        records = sink.query(AuditQuery(limit=2**31 - 1))
        notes = [WitnessedNote(witness.name, n) for n in witness.notes()]
        start = time.perf_counter()
        problems = verify_log(records, entries, notes, [key], origin=ORIGIN, grace=timedelta(days=1))
        print(f"  verify_log of the whole store                 {time.perf_counter() - start:8.2f} s")
        assert problems == [], problems[:3]

        print(f"\n== 2. one STRICT caller, with and without checkpoints every second ({args.rounds} rounds)")
        plain_sink = SqliteSink(tmp / "plain.db")
        busy_sink = SqliteSink(tmp / "busy.db")
        stack.callback(plain_sink.close)
        stack.callback(busy_sink.close)
        stop = threading.Event()
        busy_log = MerkleLog(busy_sink)

        def checkpoints() -> None:
            while not stop.wait(1.0):
                busy_log.checkpoint(signer, ORIGIN)

        thread = threading.Thread(target=checkpoints, daemon=True)
        thread.start()
        rows = {"no checkpoints": one_caller(plain_sink), "checkpoint every second": one_caller(busy_sink)}
        times = interleaved_rounds(rows, dict.fromkeys(rows, args.calls), args.rounds)
        stop.set()
        thread.join()
        for name, values in times.items():
            print(f"  {name:<28} {fmt(statistics.median(values))} per call")
        ratio = round_ratio(times, "checkpoint every second", "no checkpoints")
        print(f"  ratio (with / without)       {ratio:8.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
