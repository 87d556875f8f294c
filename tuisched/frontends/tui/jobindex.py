"""The jobs pane's index: every job in each order, kept sorted as jobs change.

No widgets here. `JobIndex` holds the last `JobStatus` of every job and, for
each order the pane has shown, the jobs sorted by that order's key. A change
to a few jobs moves only those jobs (a bisect out, a bisect in), so neither a
flood of run events nor `o` re-sorts 100,000 jobs; a reload that changes most
jobs sorts once instead. The rows the pane shows (`shown`) are the current
order filtered by the filter text, derived in one linear pass when asked for
after a change; the pane renders only the few of them in view.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from tuisched.domain.views import JobStatus
from tuisched.frontends.tui.view import result_text, state_text

SORTS = ("file order", "name", "state", "next run", "last result")
"""The jobs pane's orders, in the order `o` cycles through them."""
_STATE_ORDER = {"running": 0, "waiting": 1, "paused": 2, "active": 3, "manual": 4, "finished": 5}
_NEVER = datetime.max.replace(tzinfo=UTC)
_REBUILD_SHARE = 8
"""A change to more than 1/8 of the jobs is applied by sorting again, not job by job:
moving one job costs a shift of the list, and sorting is cheaper than n shifts."""

Key = tuple[Any, ...]
"""A job's place in an order: its key, with the name last (so every key is unique)."""


def haystack(status: JobStatus) -> str:
    """What the filter looks in, lower-cased: the name, groups, state and kind as shown."""
    groups = ", ".join(status.groups) or "-"
    return f"{status.name}\n{groups}\n{state_text(status)}\n{status.kind}".lower()


def _failed(status: JobStatus) -> bool:
    """Whether the job's last run failed (the `last result` order puts those first)."""
    return result_text(status.last).startswith("✘")


def sort_key(order: str, status: JobStatus, position: int) -> Key:
    """`status`'s key in `order` (one of SORTS); `position` is its place in the file."""
    name = status.name
    if order == "name":
        return (name,)
    if order == "state":
        return (_STATE_ORDER.get(status.state.value, 9), name)
    if order == "next run":
        return (status.next_fire or _NEVER, name)
    if order == "last result":
        return (not _failed(status), name)
    return (position, name)


class JobIndex:
    """Every job, sorted in the chosen order and filtered, kept up to date by name."""

    def __init__(self) -> None:
        self._statuses: dict[str, JobStatus] = {}
        self._positions: dict[str, int] = {}
        """Each job's place in the file (new jobs go after the others)."""
        self._haystacks: dict[str, str] = {}
        self._sorted: dict[str, list[Key]] = {}
        """Per order built so far, every job's key, sorted."""
        self._keys: dict[str, dict[str, Key]] = {}
        """Per order built so far, each job's current key (to find it again)."""
        self._order = SORTS[0]
        self._reverse = False
        self._needle = ""
        self._shown: list[str] | None = None
        self._rows: dict[str, int] | None = None
        self._widest: dict[str, int] = {}
        """The longest name, schedule and groups of any job (what the columns could need)."""

    # --- what the pane asks ------------------------------------------------------------

    @property
    def order(self) -> str:
        """The order shown (one of SORTS)."""
        return self._order

    @property
    def reverse(self) -> bool:
        """Whether the order is shown backwards (last first)."""
        return self._reverse

    @property
    def needle(self) -> str:
        """The filter text (empty: every job)."""
        return self._needle

    @property
    def total(self) -> int:
        """How many jobs there are, filtered or not."""
        return len(self._statuses)

    @property
    def widest(self) -> dict[str, int]:
        """The most characters a job's `name`, `trigger` or `groups` takes (never less after a
        job goes, until the next reload)."""
        return self._widest

    def status(self, name: str) -> JobStatus | None:
        """The last status of `name`."""
        return self._statuses.get(name)

    def shown(self) -> list[str]:
        """The names shown, in order: the current order, filtered (do not modify)."""
        if self._shown is None:
            ordered = self._sorted_in(self._order)
            # Backwards is the same sorted list read from its end: nothing is sorted again.
            names = (key[-1] for key in (reversed(ordered) if self._reverse else ordered))
            needle, hay = self._needle, self._haystacks
            self._shown = [n for n in names if needle in hay[n]] if needle else list(names)
        return self._shown

    def row_of(self, name: str) -> int | None:
        """The row (index into `shown`) of `name`, or None when it is not shown."""
        if self._rows is None:
            self._rows = {name: row for row, name in enumerate(self.shown())}
        return self._rows.get(name)

    # --- what changes it -------------------------------------------------------------------

    def set_order(self, order: str) -> None:
        """Show the jobs in `order` (one of SORTS); built on first use, then kept."""
        self._order = order
        self._changed()

    def set_reverse(self, reverse: bool) -> None:
        """Show the order backwards (`reverse`) or forwards."""
        self._reverse = reverse
        self._changed()

    def set_filter(self, text: str) -> None:
        """Show only the jobs whose name, groups, state or kind contain `text`."""
        self._needle = text.lower()
        self._changed()

    def replace(self, statuses: Iterable[JobStatus]) -> None:
        """Every job (at start, after a reload): the jobs not in `statuses` are gone."""
        fresh = {status.name: status for status in statuses}
        gone = self._statuses.keys() - fresh.keys()
        changed = [s for s in fresh.values() if self._statuses.get(s.name) != s]
        if len(gone) + len(changed) > len(fresh) // _REBUILD_SHARE:
            self._rebuild(fresh)
            return
        for name in gone:
            self._remove(name)
        positions = {name: i for i, name in enumerate(fresh)}
        if any(self._positions.get(name) != i for name, i in positions.items()):
            # A job came or went: file positions shift, so that order is built again
            # (from keys nearly in order already, which costs one pass).
            self._sorted.pop(SORTS[0], None)
            self._keys.pop(SORTS[0], None)
            self._changed()
        self._positions = positions
        self.update(changed)

    def update(self, statuses: Iterable[JobStatus]) -> list[str]:
        """Take the new statuses of some jobs (new ones are added); the names changed."""
        changed = []
        for status in statuses:
            if self._statuses.get(status.name) == status:
                continue
            changed.append(status.name)
            self._place(status)
        if changed:
            self._changed()
        return changed

    # --- inside ----------------------------------------------------------------------

    def _changed(self) -> None:
        self._shown = None
        self._rows = None

    def _sorted_in(self, order: str) -> list[Key]:
        if order not in self._sorted:
            keys = {
                name: sort_key(order, status, self._positions[name])
                for name, status in self._statuses.items()
            }
            self._keys[order] = keys
            self._sorted[order] = sorted(keys.values())
        return self._sorted[order]

    def _rebuild(self, fresh: dict[str, JobStatus]) -> None:
        self._statuses = fresh
        self._positions = {name: i for i, name in enumerate(fresh)}
        self._haystacks = {name: haystack(status) for name, status in fresh.items()}
        self._sorted, self._keys = {}, {}
        self._widest = {}
        for status in fresh.values():
            self._widen(status)
        self._changed()

    def _place(self, status: JobStatus) -> None:
        """Put `status` in (or move it within) every order built so far."""
        name = status.name
        self._statuses[name] = status
        self._haystacks[name] = haystack(status)
        self._widen(status)
        position = self._positions.setdefault(name, len(self._positions))
        for order, ordered in self._sorted.items():
            keys = self._keys[order]
            new = sort_key(order, status, position)
            old = keys.get(name)
            if old == new:
                continue
            if old is not None:
                del ordered[bisect_left(ordered, old)]
            insort(ordered, new)
            keys[name] = new

    def _widen(self, status: JobStatus) -> None:
        widest = self._widest
        groups = ", ".join(status.groups)
        for key, text in (("name", status.name), ("trigger", status.trigger), ("groups", groups)):
            if len(text) > widest.get(key, 0):
                widest[key] = len(text)

    def _remove(self, name: str) -> None:
        self._statuses.pop(name, None)
        self._haystacks.pop(name, None)
        for order, ordered in self._sorted.items():
            old = self._keys[order].pop(name, None)
            if old is not None:
                del ordered[bisect_left(ordered, old)]
        self._changed()
