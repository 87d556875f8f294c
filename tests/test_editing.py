"""Live edits through the runtime (R16) and offline edits of the file (R17)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuisched.domain.errors import ConfigError, JobActionError, UnknownJobError
from tuisched.domain.events import (
    ConfigChangedOnDisk,
    ConfigLoaded,
    ConfigRejected,
    RunFinished,
    RunStarted,
)
from tuisched.runtime.configsource import backup_path

from . import engine_jobs
from .runtime_fixtures import running, write_config

JOBS = """
# the operator's comment about tick
tick:
  python: "tests.engine_jobs:noop"   # end-of-line comment
  schedule: {every: 1 hour, start: 2026-01-01T00:00}
blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual}
"""
NEW_JOB = {"command": ["/bin/echo", "hi"], "schedule": {"cron": "*/5 * * * *"}, "retries": 2}


def _save_like_an_editor(path: Path, text: str) -> None:
    """Write a new file beside it and rename it over the old one, as editors do."""
    temporary = path.with_name(f".{path.name}.swp")
    temporary.write_text(text)
    temporary.replace(path)


@pytest.fixture(autouse=True)
def _reset_gates() -> None:
    engine_jobs.GATES.clear()


async def test_an_api_change_is_written_keeping_comments_then_scheduled(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    before = path.read_text()
    async with running(path) as (runtime, events):
        await runtime.actions.add_job("report", NEW_JOB)
        (loaded,) = await events.wait_for(ConfigLoaded)
        assert loaded.origin == "edit"
        assert loaded.diff is not None
        assert loaded.diff.added == ("report",)
        assert runtime.engine.next_fire("report") is not None
        assert runtime.config.job("report").retries == 2
    text = path.read_text()
    assert text.startswith(before)  # every byte of the operator's file is still there
    assert "*/5 * * * *" in text
    assert (tmp_path / "tuisched.yaml.bak").read_text() == before


async def test_job_action_errors(tmp_path: Path) -> None:
    async with running(write_config(tmp_path, JOBS)) as (runtime, _):
        with pytest.raises(JobActionError, match="tick"):
            await runtime.actions.add_job("tick", NEW_JOB)
        with pytest.raises(UnknownJobError):
            await runtime.actions.replace_job("nope", NEW_JOB)
        with pytest.raises(UnknownJobError):
            await runtime.actions.delete_job("nope")
        with pytest.raises(JobActionError):
            await runtime.actions.delete_group("nope")


async def test_an_invalid_change_writes_nothing_and_keeps_the_schedule(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    before = path.read_text()
    async with running(path) as (runtime, _):
        bad = {**NEW_JOB, "schedule": {"cron": "61 * * * *"}}
        with pytest.raises(ConfigError, match=r"job 'report': schedule\.cron"):
            await runtime.actions.add_job("report", bad)
        assert "report" not in runtime.config.jobs
        assert runtime.engine.next_fire("tick") is not None
    assert path.read_text() == before
    assert not (tmp_path / "tuisched.yaml.bak").exists()


async def test_own_writes_are_not_offline_edits_but_an_editors_save_is(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    async with running(path) as (runtime, events):
        await runtime.actions.add_job("report", NEW_JOB)
        _save_like_an_editor(path, path.read_text().replace("retries: 2", "retries: 5"))
        (changed,) = await events.wait_for(ConfigChangedOnDisk, within=10)
        # Had our own write counted, its event would have come first.
        assert changed.diff is not None
        (change,) = changed.diff.changed
        assert (change.name, change.fields[0].field) == ("report", "retries")
        assert runtime.config.job("report").retries == 2  # nothing applied yet
        with pytest.raises(JobActionError, match="changed on disk"):
            await runtime.actions.delete_job("tick")  # nothing typed by hand is overwritten
        assert await runtime.actions.reload()
        assert runtime.config.job("report").retries == 5


async def test_a_bad_offline_edit_is_reported_and_changes_nothing(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    async with running(path) as (runtime, events):
        _save_like_an_editor(path, path.read_text() + "  broken: {command: [/bin/true]}\n")
        (changed,) = await events.wait_for(ConfigChangedOnDisk, within=10)
        assert changed.diff is None
        assert "job 'broken': a job needs a trigger source" in str(changed.problems[0])
        assert not await runtime.actions.reload()
        (rejected,) = await events.wait_for(ConfigRejected)
        assert rejected.problems == changed.problems
        assert "broken" not in runtime.config.jobs
        assert runtime.engine.next_fire("tick") is not None


async def test_auto_reload_applies_an_offline_edit_at_once(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS, settings="auto_reload: true")
    async with running(path) as (runtime, events):
        _save_like_an_editor(path, path.read_text().replace("every: 1 hour", "every: 2 hours"))
        (loaded,) = await events.wait_for(ConfigLoaded, within=10)
    assert loaded.origin == "reload"
    assert runtime.config.job("tick").schedule.step == 2  # type: ignore[union-attr]


async def test_deleting_a_running_job_leaves_its_run_running(tmp_path: Path) -> None:
    async with running(write_config(tmp_path, JOBS)) as (runtime, events):
        run = runtime.actions.run_now("blocker")
        await events.wait_for(RunStarted)
        await runtime.actions.delete_job("blocker")
        assert "blocker" not in runtime.config.jobs
        assert [r.run_id for r in runtime.engine.running()] == [run.run_id]
        engine_jobs.GATES["blocker"].set()
        (finished,) = await events.wait_for(RunFinished)
    assert (finished.run.run_id, finished.run.state.value) == (run.run_id, "SUCCESS")


async def test_a_stop_moved_into_the_future_loads_the_job(tmp_path: Path) -> None:
    ended = {
        "python": "tests.engine_jobs:noop",
        "schedule": {"every": "1 hour", "start": "2026-01-01T00:00", "stop": "2026-01-02T00:00"},
    }
    async with running(write_config(tmp_path, JOBS)) as (runtime, _):
        await runtime.actions.add_job("window", ended)
        assert runtime.engine.next_fire("window") is None  # its stop is past: not loaded
        reopened = {**ended, "schedule": {**ended["schedule"], "stop": "2099-01-01T00:00"}}
        await runtime.actions.replace_job("window", reopened)
        assert runtime.engine.next_fire("window") is not None


async def test_undo_restores_the_file_and_the_schedule(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    original = path.read_text()
    async with running(path) as (runtime, events):
        await runtime.actions.add_job("report", NEW_JOB)
        await runtime.actions.delete_job("tick")
        await runtime.actions.undo()
        assert "tick" in runtime.config.jobs
        assert runtime.engine.next_fire("tick") is not None
        await runtime.actions.undo()
        assert "report" not in runtime.config.jobs
        with pytest.raises(JobActionError, match="no change to undo"):
            await runtime.actions.undo()
        origins = [e.origin for e in await events.wait_for(ConfigLoaded, count=4)]
    assert path.read_text() == original
    assert origins == ["edit", "edit", "undo", "undo"]


async def test_a_job_saved_as_it_was_writes_nothing_and_leaves_nothing_to_undo(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, JOBS)
    original = path.read_text()
    async with running(path) as (runtime, _):
        assert runtime.source is not None
        definition = await runtime.source.job_definition("tick")
        assert definition is not None
        before = path.stat().st_mtime_ns
        await runtime.actions.replace_job("tick", definition)
        assert path.stat().st_mtime_ns == before
        assert not runtime.source.can_undo
        assert runtime.actions.last_change() is None
        assert not backup_path(path).exists()
    assert path.read_text() == original
    assert not (tmp_path / "state" / "actions.log").exists()


async def test_the_last_change_is_named_and_undone_only_while_it_is_the_last(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, JOBS)
    async with running(path) as (runtime, _):
        edited = {"python": "tests.engine_jobs:noop", "schedule": {"every": "2 hours",
                  "start": "2026-01-01T00:00"}}  # fmt: skip
        await runtime.actions.replace_job("tick", edited)
        change = runtime.actions.last_change()
        assert change is not None
        assert (change.action, change.subject) == ("replace", "job tick")
        assert change.lines[0] == "~ tick"
        assert "every hour from 2026-01-01 00:00 -> every 2 hours" in change.lines[1]
        await runtime.actions.add_job("report", NEW_JOB)
        with pytest.raises(JobActionError, match="another change was made since"):
            await runtime.actions.undo(change=change.number)  # the one asked about is not last
        assert "report" in runtime.config.jobs
        added = runtime.actions.last_change()
        assert added is not None
        assert (added.action, added.subject) == ("add", "job report")
        await runtime.actions.undo(change=added.number)
        assert "report" not in runtime.config.jobs
        assert runtime.actions.last_change() == change  # the one before is next
    actions = (tmp_path / "state" / "actions.log").read_text().splitlines()
    assert [line.split(" | ", 2)[2] for line in actions] == [
        "edit | job tick", "add | job report", "undo | add job report",
    ]  # fmt: skip
