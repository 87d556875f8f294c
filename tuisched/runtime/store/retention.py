"""History retention: forgetting old runs and their output files, in the background.

`settings.history_retention` says what to keep. The history's writer thread
deletes a bounded batch of rows at a time (so run writes queued meanwhile go
in between batches), and the FILES lane removes the output files of the runs
forgotten. It runs at start and then every `PRUNE_EVERY_SECONDS`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from tuisched.domain.errors import HistoryError, TuischedError
from tuisched.domain.model import Retention
from tuisched.domain.text import counted
from tuisched.runtime.clock import Clock
from tuisched.runtime.store.writer import AsyncHistory
from tuisched.runtime.threads import Lane, in_thread

log = logging.getLogger(__name__)

PRUNE_BATCH = 500
"""Runs forgotten per transaction of the writer thread."""
PRUNE_EVERY_SECONDS = 3600.0
"""How often retention looks again after the first pass at start."""


def remove_output_files(output_dir: Path, runs: Sequence[tuple[str, str]]) -> int:
    """Remove `output_dir/JOB/RUN_ID.log` of each (job, run_id); how many were there."""
    removed = 0
    for job, run_id in runs:
        try:
            (output_dir / job / f"{run_id}.log").unlink()
        except FileNotFoundError:  # the run printed nothing, or its file was pruned already
            continue
        except OSError as error:  # the row is gone: a file left behind is only disk space
            log.warning("could not remove the output of run %s: %s", run_id, error)
            continue
        removed += 1
    return removed


async def prune_history(
    history: AsyncHistory, retention: Retention, now: datetime, output_dir: Path,
    *, batch: int = PRUNE_BATCH,
) -> int:  # fmt: skip
    """Forget every run `retention` lets go as of `now`, a batch at a time, with its
    output file; the number of runs forgotten."""
    total = 0
    while True:
        gone = await history.call(lambda store: store.prune(now, retention, batch=batch))
        if gone:
            await in_thread(Lane.FILES, remove_output_files, output_dir, gone)
        total += len(gone)
        if len(gone) < batch:
            return total


SharedPrune = Callable[[datetime | None, int | None], Awaitable[list[tuple[str, str]] | None]]
"""Forget one batch of the cluster's shared table (`ClusterStore.prune` with its batch):
given the cut-off instant and the runs kept per job; None when another node prunes now."""


async def prune_shared(
    prune: SharedPrune, retention: Retention, now: datetime, output_dir: Path,
    *, batch: int = PRUNE_BATCH,
) -> int:  # fmt: skip
    """Forget what `retention` lets go of the cluster's shared table, a batch at a time,
    unless another node is at it (an advisory lock: one node at a time). The output files
    this node holds of the runs forgotten go too; the other nodes' go with their own
    histories' rows."""
    before = now - timedelta(days=retention.days) if retention.days is not None else None
    total = 0
    while True:
        gone = await prune(before, retention.runs_per_job)
        if gone is None:  # another node prunes now: its pass covers this one
            return total
        if gone:
            await in_thread(Lane.FILES, remove_output_files, output_dir, gone)
        total += len(gone)
        if len(gone) < batch:
            return total


async def keep_pruning(
    history: AsyncHistory, retention: Callable[[], Retention | None], clock: Clock,
    output_dir: Path, *, passed: Callable[[int], object] | None = None,
    shared: SharedPrune | None = None,
) -> None:  # fmt: skip
    """Prune now, then every `PRUNE_EVERY_SECONDS`, until cancelled. `retention` is read
    each time, so a reload that changes it counts from the next pass. `passed` is told
    how many runs each pass forgot (0 when retention is off or the history is away).
    In cluster mode `shared` prunes the cluster's table too."""
    while True:
        forgotten = 0
        wanted = retention()
        if wanted is not None:
            try:
                forgotten = await prune_history(history, wanted, clock.now(), output_dir)
            except HistoryError as error:  # an outage: the next pass tries again
                log.warning("history retention skipped this pass: %s", error)
            except Exception:  # a bug must not end retention for the scheduler's life
                log.exception("history retention failed this pass")
            if shared is not None:
                forgotten += await _prune_cluster(shared, wanted, clock.now(), output_dir)
            if forgotten:
                log.info("history retention forgot %s and their output", counted(forgotten, "run"))
        if passed is not None:
            passed(forgotten)
        await clock.sleep(PRUNE_EVERY_SECONDS)


async def _prune_cluster(
    shared: SharedPrune, retention: Retention, now: datetime, output_dir: Path
) -> int:
    try:
        return await prune_shared(shared, retention, now, output_dir)
    except (TuischedError, OSError) as error:  # the database is away: the next pass tries
        log.warning("cluster history retention skipped this pass: %s", error)
        return 0
