"""Nothing typed is lost (issue 28): the job form asks before it discards, keeps what was
typed when a save is refused (with the reason on it), closes without writing when nothing
changed; and undo names the change it takes back. The real console, driven by keys."""

from __future__ import annotations

import re
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Input, Static

from tuisched.frontends.tui.app import TuischedApp
from tuisched.frontends.tui.screens.dialogs import ConfirmScreen
from tuisched.frontends.tui.screens.form import JobFormScreen
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.runtime.configsource import backup_path

from .console_fixtures import make_app, on_lane, runtime_of, until
from .runtime_fixtures import write_config
from .test_console_form import _edit as open_form

SIZE = (80, 24)
JOBS = """
backup:
  command: [/bin/echo, copying]
  schedule: {every: 1 hour, start: 2026-01-01T00:00}
  description: nightly copy
"""


def _question(app: TuischedApp) -> str:
    assert isinstance(app.screen, ConfirmScreen)
    return app.screen.question


def _said(app: TuischedApp) -> list[str]:
    return [notification.message for notification in app._notifications]


def _box(form: JobFormScreen) -> str:
    return str(form.query_one("#form-problems", Static).content)


async def _asked(pilot: Pilot[int], *keys: str) -> str:
    """Press `keys`, then the question the confirmation that opens asks."""
    await pilot.press(*keys)
    await until(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen))
    assert isinstance(pilot.app, TuischedApp)
    return _question(pilot.app)


async def test_escape_asks_before_it_discards_and_keeps_what_was_typed(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    original = path.read_text()
    app, _ = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        await open_form(pilot, "backup")
        await pilot.press("escape")  # nothing changed: it closes at once
        await until(pilot, lambda: not app.screen.is_modal)
        form = await open_form(pilot, "backup")
        form.query_one("#form-every", Input).value = "2 hours"
        form.query_one("#form-description", Input).focus()
        await pilot.press("end", "comma", "space", "v", "2")
        question = await _asked(pilot, "escape")
        assert question == "Discard your changes to backup?\nChanged: Every, Description"
        await pilot.press("escape")  # keeps the form, and everything typed
        await until(pilot, lambda: app.screen is form)
        assert form.query_one("#form-every", Input).value == "2 hours"
        description = form.query_one("#form-description", Input)
        assert description.value == "nightly copy, v2"
        assert form.focused is description
        await _asked(pilot, "escape")
        await pilot.press("n")  # no: the same
        await until(pilot, lambda: app.screen is form)
        await pilot.press("3")  # the focus came back where the typing was
        assert description.value == "nightly copy, v23"
        await _asked(pilot, "escape")
        await pilot.press("y")  # yes: discarded
        await until(pilot, lambda: not app.screen.is_modal)
    assert path.read_text() == original


async def test_a_refused_save_keeps_the_form_with_the_reason_and_saves_once_fixed(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, JOBS)
    original = path.read_text()
    app, runtime = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot, "backup")
        description = form.query_one("#form-description", Input)
        description.focus()
        await pilot.press("end", "comma", "space", "v", "2")
        by_hand = original.replace("nightly copy", "nightly copy (by hand)")
        path.write_text(by_hand)  # a hand edit, not reloaded
        question = await _asked(pilot, "ctrl+s")
        assert question == "Save the changes to backup in tuisched.yaml?"
        await pilot.press("y")
        await until(pilot, lambda: "Not saved" in _box(form))
        assert app.screen is form
        assert description.value == "nightly copy, v2"
        assert f"{path} was changed on disk since it was loaded" in _box(form)
        assert "Everything typed is kept" in _box(form)
        assert path.read_text() == by_hand  # the hand edit is not overwritten
        await pilot.press("3")  # typing on: the reason stays, it is not about a field
        assert "Not saved" in _box(form)
        path.write_text(original)  # the operator takes the hand edit back, and saves again
        await _asked(pilot, "ctrl+s")
        assert "Not saved" not in _box(form)
        await pilot.press("y")
        await until(pilot, lambda: not app.screen.is_modal)
        assert runtime.config.job("backup").description == "nightly copy, v23"
        # Told by the form's dismiss callback, which runs after the form has gone.
        await until(pilot, lambda: "backup saved" in _said(app))


async def test_a_save_that_changes_nothing_closes_and_writes_nothing(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    original, written = path.read_text(), path.stat().st_mtime_ns
    app, runtime = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot, "backup")
        form.query_one("#form-every", Input).focus()
        await pilot.press("end", "space", "space")  # spaces only: the job reads the same
        await pilot.press("ctrl+s")
        await until(pilot, lambda: not app.screen.is_modal)  # closed, nothing asked
        await until(pilot, lambda: "backup: nothing changed" in _said(app))  # told after
        assert not await on_lane(app, lambda rt: rt.source is not None and rt.source.can_undo)
        await pilot.press("u")  # nothing to undo either
        await until(pilot, lambda: "nothing to undo" in _said(app))
        assert not app.screen.is_modal
    assert (path.read_text(), path.stat().st_mtime_ns) == (original, written)
    assert not backup_path(path).exists()
    assert not (tmp_path / "state" / "actions.log").exists()
    assert runtime.config.job("backup").description == "nightly copy"


async def test_undo_names_the_change_and_takes_back_that_one_only(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    original = path.read_text()
    app, _ = make_app(path)
    edited = {
        "command": ["/bin/echo", "copying"], "description": "nightly copy",
        "schedule": {"every": "2 hours", "start": "2026-01-01T00:00"},
    }  # fmt: skip
    another = {"command": ["/bin/true"], "schedule": "manual"}
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and "backup" in table.rows)
        await on_lane(app, lambda rt: rt.actions.replace_job("backup", edited))
        table.focus()
        question = await _asked(pilot, "u")
        head, *lines = question.splitlines()
        when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"  # the change was not made on the console's day
        assert re.fullmatch(f"Undo the edit of job backup at {when}\\?", head)
        assert lines[0] == (
            "  schedule: every hour from 2026-01-01 00:00 -> every 2 hours from 2026-01-01 00:00"
        )
        # meanwhile another console adds a job: yes must not take that one back unseen
        await on_lane(app, lambda rt: rt.actions.add_job("tidy", another))
        await pilot.press("y")
        await until(pilot, lambda: any("another change was made since" in m for m in _said(app)))
        assert "tidy" in runtime_of(app).config.jobs
        assert "every: 2 hours" in path.read_text()
        question = await _asked(pilot, "u")
        assert question.startswith("Undo the addition of job tidy at ")
        await pilot.press("y")
        await until(pilot, lambda: "undone: the addition of job tidy" in _said(app))
        await _asked(pilot, "u")
        await pilot.press("y")
        await until(pilot, lambda: "undone: the edit of job backup" in _said(app))
    assert path.read_text() == original


async def test_a_save_the_scheduler_refuses_keeps_the_new_job_typed(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    app, runtime = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, JobFormScreen))
        form = app.screen
        assert isinstance(form, JobFormScreen)
        await pilot.press(*"tidy")
        form.query_one("#form-target", Input).value = "[/bin/true]"
        form.query_one("#form-cron", Input).value = "*/5 * * * *"
        assert await _asked(pilot, "ctrl+s") == "Add job tidy to tuisched.yaml?"
        # meanwhile another console adds a job by that name
        theirs = {"command": ["/bin/false"], "schedule": "manual"}
        await on_lane(app, lambda rt: rt.actions.add_job("tidy", theirs))
        await pilot.press("y")
        await until(pilot, lambda: "Not saved" in _box(form))
        assert "tidy" in _box(form)
        assert app.screen is form
        assert form.query_one("#form-name", Input).value == "tidy"
        assert form.query_one("#form-cron", Input).value == "*/5 * * * *"
        question = await _asked(pilot, "escape")
        assert question == "Discard the new job tidy?\nChanged: Name, Value, Cron"
    assert runtime.config.job("tidy").kind.argv == ("/bin/false",)  # type: ignore[union-attr]
