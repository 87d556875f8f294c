"""A configuration of thousands of jobs is loaded and reloaded without holding the loop.

The engine loads a few hundred jobs per loop iteration; these tests count the
turns other tasks get while it loads, which does not depend on the machine's
speed, and check that nothing was lost by loading in steps.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tuisched.domain.model import Job, Schedule
from tuisched.runtime.control import LocalControl
from tuisched.runtime.engine.firing import LOADS_PER_STEP, SlotFiring
from tuisched.runtime.runtime import Runtime

from ..runtime_fixtures import running, write_config

JOBS = LOADS_PER_STEP * 4


def _many_jobs() -> str:
    return "\n".join(
        f'j{i:05d}: {{command: [/bin/true], schedule: {{cron: "{i % 60} {i % 24} 1 1 *"}}}}'
        for i in range(JOBS)
    )


@asynccontextmanager
async def _loads_between_turns(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[int]]:
    """The jobs loaded between each two loop turns another task gets while the body runs."""
    loaded = [0]
    first_slot = SlotFiring._first_slot  # every job loaded, at start or on a reload, has one

    def counting(self: SlotFiring, job: Job, now: datetime) -> tuple[Schedule, datetime] | None:
        loaded[0] += 1
        return first_slot(self, job, now)

    monkeypatch.setattr(SlotFiring, "_first_slot", counting)
    stretches: list[int] = []

    async def tick() -> None:
        seen = 0
        while True:
            stretches.append(loaded[0] - seen)
            seen = loaded[0]
            await asyncio.sleep(0)

    ticker = asyncio.get_running_loop().create_task(tick())
    await asyncio.sleep(0)
    try:
        yield stretches
    finally:
        await asyncio.sleep(0)
        ticker.cancel()
    assert sum(stretches) == loaded[0]


async def _next_fires(runtime: Runtime) -> dict[str, datetime | None]:
    statuses = await LocalControl(runtime, actor="test").jobs()
    return {status.name: status.next_fire for status in statuses}


async def test_thousands_of_jobs_load_a_few_hundred_per_loop_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(tmp_path, _many_jobs())
    async with _loads_between_turns(monkeypatch) as stretches, running(path) as (runtime, _):
        fires = await _next_fires(runtime)
    assert sum(stretches) == JOBS
    assert max(stretches) <= LOADS_PER_STEP
    assert len(fires) == JOBS
    assert all(fire is not None and fire.month == 1 and fire.day == 1 for fire in fires.values())
    assert fires["j00061"] is not None
    assert (fires["j00061"].minute, fires["j00061"].hour) == (1, 13)


async def test_a_reload_that_changes_every_job_gives_the_loop_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(tmp_path, _many_jobs())
    async with running(path) as (runtime, _):
        path.write_text(path.read_text().replace("timezone: UTC", "timezone: Asia/Tokyo"))
        async with _loads_between_turns(monkeypatch) as stretches:
            assert await runtime.actions.reload()
        fires = await _next_fires(runtime)
    assert sum(stretches) == JOBS
    assert max(stretches) <= LOADS_PER_STEP
    tokyo = ZoneInfo("Asia/Tokyo")
    first = fires["j00000"]
    assert first is not None
    assert first.astimezone(tokyo).replace(tzinfo=None) == datetime(
        first.astimezone(tokyo).year, 1, 1, 0, 0
    )
    assert first.astimezone(UTC).hour == 15  # midnight in Tokyo is 15:00 UTC the day before
