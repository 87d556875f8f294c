"""Per-job jitter: a delay added to each slot, the same for a slot wherever it is computed.

`jitter: 30s` on a job spreads the runs of many jobs that share a slot (every
job at 00:00) over the next 30 seconds. The delay of a slot is derived from a
hash of the job's name and the slot's instant, never from a random generator,
so every node of a cluster, every restart and `tuisched next` agree on it. It
never reaches the next slot: a run started for one slot is always started
before the following slot falls due, so slots keep their order and identity.

The slot stays the run's identity (history, `requires`, the missed ledger);
jitter only moves when the run starts.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from tuisched.domain.model import Schedule
from tuisched.domain.schedule.slots import next_slot

__all__ = ["fire_time", "jitter_delay"]

_MILLISECOND = timedelta(milliseconds=1)


def jitter_delay(
    name: str, slot: datetime, jitter: timedelta, following: datetime | None
) -> timedelta:
    """The delay of `slot` of job `name`: from 0 up to (not including) the smaller of
    `jitter` and the time to the `following` slot, in whole milliseconds.

    Args:
        name: The job's name (jobs sharing a slot get different delays).
        slot: The slot (aware; its instant counts, not its zone).
        jitter: The job's `jitter`; zero gives no delay.
        following: The slot after `slot`, or None when there is none.
    """
    bound = jitter if following is None else min(jitter, following - slot)
    steps = bound // _MILLISECOND
    if steps <= 0:
        return timedelta(0)
    return _fraction(name, slot) * steps // 2**64 * _MILLISECOND


def fire_time(schedule: Schedule, name: str, jitter: timedelta, slot: datetime) -> datetime:
    """When the run for `slot` of job `name` starts: the slot plus its jitter delay."""
    if not jitter:
        return slot
    return slot + jitter_delay(name, slot, jitter, next_slot(schedule, slot))


def _fraction(name: str, slot: datetime) -> int:
    """A 64-bit number from the job's name and the slot's instant (in UTC, so every zone
    and node computes the same one)."""
    key = f"{name}\0{slot.astimezone(UTC).isoformat()}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")
