"""A few snapshots pin the console's look at 80x24 (clock fixed, Textual pinned)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuisched.frontends.tui.widgets.jobs import JobsTable

from .console_fixtures import make_app, until
from .runtime_fixtures import write_config
from .snapshots import assert_snapshot, screen_text

# Jobs whose rows do not depend on the real date: manual, after, disabled, finished.
JOBS = """
backup: {command: [/usr/local/bin/backup], schedule: manual, description: nightly backup}
compress: {command: [gzip, dump], after: {job: backup, delay: 10s}}
legacy: {command: [/bin/false], schedule: {cron: "@hourly"}, enabled: false}
report:
  python: "tests.engine_jobs:noop"
  schedule: {every: 1 day, start: 2020-01-01T06:00, stop: 2020-02-01T06:00}
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the status line shows the path relative to here
    # A busy test machine can stall the loop past the watchdog's threshold, and the
    # status line would show the lag: the look must not depend on the machine.
    monkeypatch.setattr("tuisched.runtime.watchdog.THRESHOLD", 3600.0)
    path = write_config(tmp_path, JOBS)
    path.write_text(path.read_text() + "groups:\n  nightly: {jobs: [backup, compress]}\n")
    return path


async def test_main_screen(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.query_one(JobsTable).row_count == 4)
        await pilot.pause()
        assert_snapshot("main_80x24", screen_text(app))


async def test_confirmation_dialog(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.query_one(JobsTable).row_count == 4)
        await pilot.press("d")
        await pilot.pause()
        assert_snapshot("confirm_delete_80x24", screen_text(app))


async def test_help_screen(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.query_one(JobsTable).row_count == 4)
        await pilot.press("question_mark")
        await pilot.pause()
        assert_snapshot("help_80x24", screen_text(app))
