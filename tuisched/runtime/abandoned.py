"""At start: the runs a dead scheduler on this node left open are closed as ABANDONED,
and what they left running is killed."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tuisched.domain.bus import EventBus
from tuisched.domain.errors import HistoryUnavailableError
from tuisched.domain.events import RunAbandoned
from tuisched.domain.runs import RunRecord, RunState
from tuisched.domain.text import counted
from tuisched.runtime.execution import kill_left_behind
from tuisched.runtime.execution.leftovers import carried_run_ids
from tuisched.runtime.store import AsyncHistory
from tuisched.runtime.store.database import abandonable, abandoned
from tuisched.runtime.threads import Lane, in_thread

log = logging.getLogger(__name__)

PROCESSES_RECORD = "processes.json"
"""The processes of runs, in the state directory: a killed scheduler's next start stops them."""
FORK_JOURNALS = "forks"
"""The folder where fork servers record the process of each python run (same purpose)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Leftovers:
    """Where a dead scheduler's runs and processes are found, for one starting runtime."""

    history: AsyncHistory
    bus: EventBus
    node: str
    state_dir: Path | None
    """The state directory this scheduler owns (its records of processes), or None."""
    own_history: bool
    """The history is the state directory's own, which no other scheduler writes (the
    instance lock): a run of this node there is this scheduler's."""

    async def close(self, now: datetime) -> None:
        """Close what a dead scheduler left open, kill what its runs left, and say so."""
        closed = await self._closed_abandoned(now)
        ours = await self._runs_left_carried()
        killed = await self._kill_left_processes([run.run_id for run in closed] + ours)
        if closed:
            log.warning(
                "a dead scheduler left %s running; %s killed",
                counted(len(closed), "run"),
                counted(killed, "leftover process", "leftover processes"),
            )  # fmt: skip
        elif killed:
            log.warning("%s left by the runs of a dead scheduler killed",
                        counted(killed, "process", "processes"))  # fmt: skip
        for run in closed:
            self.bus.publish(RunAbandoned(at=now, run=run))

    async def _closed_abandoned(self, now: datetime) -> list[RunRecord]:
        """Close the runs a dead scheduler on this node left open, as ABANDONED: those of
        the database, and those of the journal that have not landed yet. A database that
        takes no writes now gets the closings as held writes (the journal keeps them)."""
        history, node = self.history, self.node
        kept = {run.run_id: run for run in await history.held_runs()}
        try:
            closed = await history.call(lambda store: store.close_abandoned(node, now))
        except HistoryUnavailableError:
            if not history.journaled:
                raise
            found = await history.call(lambda store: abandonable(store, node, now))
            closed = [run for run in found if run.run_id not in kept]  # judged by what is kept
            history.write_soon([], closed)
        seen = {run.run_id for run in closed}
        held = [
            abandoned(run, now) for run in kept.values()
            if run.state in (RunState.QUEUED, RunState.RUNNING) and run.run_id not in seen
            and (run.node == node or run.node.startswith(f"{node}:"))
        ]  # fmt: skip
        if held:
            history.write_soon([], held)
        return closed + held

    async def _runs_left_carried(self) -> list[str]:
        """The runs of this scheduler whose id a process still carries in its environment,
        however long ago the runs ended (their processes are a dead scheduler's leftovers).

        Only with the state directory's own history (`own_history`): a database shared
        with other schedulers (`history:`, a cluster) may hold the runs of a live one on
        a host of the same name.
        """
        if not self.own_history:
            return []
        carried = sorted(await in_thread(Lane.PROCESSES, carried_run_ids))
        if not carried:
            return []
        node = self.node
        ours = await self.history.call(lambda store: store.runs_of(node, carried))
        ours.update(run.run_id for run in await self.history.held_runs()  # not landed yet
                    if run.run_id in carried and run.node == node)  # fmt: skip
        return sorted(ours)

    async def _kill_left_processes(self, run_ids: list[str]) -> int:
        """Kill what a dead scheduler's runs left: the processes recorded in the state
        directory, the python runs' processes its fork servers journaled, every process
        carrying the id of one of those runs or of `run_ids` (abandoned, or carried),
        and everything under them or in their sessions and groups (`leftovers.py`).
        How many."""
        state_dir = self.state_dir
        return await in_thread(
            Lane.PROCESSES, kill_left_behind,
            state_dir / PROCESSES_RECORD if state_dir is not None else None,
            state_dir / FORK_JOURNALS if state_dir is not None else None, run_ids,
        )  # fmt: skip
