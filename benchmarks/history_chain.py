"""What the history's hash chain (DESIGN.md §11) costs a charge: reserve + answered on one ledger
file, one thread, with the chain and with its appends left out (the reference), alternating, in
one run; and `verify` of the whole chain at that history's size.

    python -m benchmarks history-chain [--charges 200] [--rounds 3] [--ledger postgresql://…]

With --ledger, the ledger is that (empty) PostgreSQL database instead of a ledger file.

The reference leaves out only the chain's statements (`history_chain_steps.record`): the
outcome stays a transaction, as it is with the chain (before it, an outcome was one UPDATE
committed on its own), so the ratio is that of the chain's statements per event (three on PostgreSQL, two on
the file, whose rows and head are kept in process: `ledger.duckdb_chain_memory`). The
ledger then stops matching its chain; the run uses it for nothing else. A third sample leaves
out the reservations' lease (its keeping thread and renewals) to time what it costs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings


def main(argv: list[str] | None = None) -> None:
    import duckdb

    from pcor_sql.core.accounting import OcdpCost
    from pcor_sql.ledger import history_chain_steps
    from pcor_sql.ledger.store import ChargeItem, Ledger, new_release_id

    parser = argparse.ArgumentParser(prog="python -m benchmarks history-chain", description=__doc__.split("\n\n")[0])
    parser.add_argument("--charges", type=int, default=200, help="timed charges per sample")
    parser.add_argument("--rounds", type=int, default=3, help="samples of each, alternating")
    parser.add_argument("--ledger", default=None, help="a PostgreSQL ledger's URL (default: a ledger file)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.ledger:
        from pcor_sql.ledger.postgres_store import PostgresStore

        ledger = Ledger(store=PostgresStore(args.ledger))
    else:
        ledger = Ledger(duckdb.connect(os.path.join(tempfile.mkdtemp(prefix="pcor-history-chain-"), "ledger.duckdb")))
    ledger.set_limit("t", 1e12)
    real = history_chain_steps.record

    def per_charge(chained: bool) -> float:
        history_chain_steps.record = real if chained else (lambda *a, **k: None)  # type: ignore[assignment]
        try:
            start = time.perf_counter()
            for _ in range(args.charges):
                ledger.reserve("t", [ChargeItem(new_release_id(), OcdpCost(0.001), "bfs")]).answered()
            return (time.perf_counter() - start) / args.charges * 1000
        finally:
            history_chain_steps.record = real  # type: ignore[assignment]

    def unleased() -> float:
        # The lease's part (DESIGN.md §11 "Dead hosts": its thread and renewals) left out.
        keeper = ledger.lease
        keeper.before_reserve, keeper.ended = (lambda: None), (lambda: None)  # type: ignore[method-assign]
        try:
            return per_charge(True)
        finally:
            del keeper.before_reserve, keeper.ended

    per_charge(True)  # warm up
    samples: dict[bool, list[float]] = {True: [], False: []}
    bare: list[float] = []
    for _ in range(args.rounds):
        for chained in (False, True):
            samples[chained].append(per_charge(chained))
        bare.append(unleased())
    start = time.perf_counter()
    ledger.verify()
    verify_s = time.perf_counter() - start
    rows = ledger.read_with(lambda ops: ops.raw("SELECT count(*) FROM pcor.history"))[0][0]
    without, with_chain = statistics.median(samples[False]), statistics.median(samples[True])
    print(f"reserve + answered, without the chain's appends: {without:.2f} ms (median of {args.rounds})")
    print(f"reserve + answered, with the chain:             {with_chain:.2f} ms  ratio {with_chain / without:.2f}")
    print(f"reserve + answered, with the chain, no lease:   {statistics.median(bare):.2f} ms"
          f"  (the lease's ratio {with_chain / statistics.median(bare):.2f})")
    print(f"verify of {rows} history rows and their chain:  {verify_s:.2f} s  ({ledger.kind} store)")

