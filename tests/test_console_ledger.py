"""The downtime ledger in the console (SPEC R25): the banner at start, the `m` screen, a
choice per job and one for every job, each confirmed; at 80x24 on a real runtime."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from tuisched.domain.runs import RunState, Trigger
from tuisched.domain.views import HistoryQuery, MissedSlots
from tuisched.frontends.tui.app import TuischedApp
from tuisched.frontends.tui.screens.dialogs import ConfirmScreen
from tuisched.frontends.tui.screens.ledger import LedgerScreen
from tuisched.frontends.tui.widgets.banner import Banner

from .console_fixtures import make_app, on_lane, runtime_of, until
from .runtime_fixtures import write_config
from .test_ledger import JOBS, down_for_an_hour

SIZE = (80, 24)


def app_of(pilot: Pilot[int]) -> TuischedApp:
    assert isinstance(pilot.app, TuischedApp)
    return pilot.app


def banner_text(app: TuischedApp) -> str:
    banner = app.main.query_one(Banner)
    return str(banner.render()) if banner.display else ""


def ledger_of(app: TuischedApp) -> LedgerScreen:
    screen = app.screen
    assert isinstance(screen, LedgerScreen)
    return screen


def entry(app: TuischedApp, job: str) -> MissedSlots:
    return next(e for e in ledger_of(app).entries if e.job == job)


async def open_ledger(pilot: Pilot[int]) -> LedgerScreen:
    app = app_of(pilot)
    await until(pilot, lambda: app.ready and "m to decide" in banner_text(app))
    await pilot.press("m")
    await until(pilot, lambda: isinstance(app.screen, LedgerScreen) and app.screen.entries)
    return ledger_of(app)


async def test_the_banner_names_the_key_when_missed_slots_wait(tmp_path: Path) -> None:
    app, _ = make_app(down_for_an_hour(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "m to decide" in banner_text(app))
        text = banner_text(app)
        await pilot.pause(1.3)  # a tick of the panes (each second) leaves the note standing
        still = banner_text(app)
        await pilot.press("escape")
        await pilot.pause(1.3)
        dismissed = banner_text(app)
    assert text == "2 jobs missed 12 slots while the scheduler was down or paused: m to decide"
    assert still == text
    assert dismissed == ""


async def test_no_banner_when_nothing_was_missed(tmp_path: Path) -> None:
    app, _ = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready)
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, LedgerScreen))
        await until(pilot, lambda: "no job missed" in note_of(app))
        await app.workers.wait_for_complete()  # the banner's look at the ledger too
        shown = banner_text(app)
    assert shown == ""


def note_of(app: TuischedApp) -> str:
    return str(app.screen.query_one("#ledger-note", Static).render())


async def test_the_ledger_lists_each_job_and_decides_the_selected_one(tmp_path: Path) -> None:
    app, _runtime = make_app(down_for_an_hour(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_ledger(pilot)
        table = screen.query_one(DataTable)
        rows = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert rows == ["ten", "other", "once"]
        assert str(table.get_row_at(0)[1]) == "6"
        assert str(table.get_row_at(0)[4]) == "pending"
        assert "made up by run" in str(table.get_row_at(2)[4])  # misfire: once
        await pilot.press("l")  # on `ten`, the first row
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: not entry(app, "ten").pending)
        decided = entry(app, "ten").decided
        await pilot.press("l")  # again: refused before asking
        await pilot.pause(0.1)
        asked_again = isinstance(app.screen, ConfirmScreen)
        query = HistoryQuery(job="ten", triggers=(Trigger.CATCHUP,))
        catch_ups = await on_lane(app, lambda rt: rt.history.call(lambda store: store.page(query)))
    assert decided.startswith("ran the latest of 6 missed slots (run ")
    assert not asked_again
    assert len(catch_ups) == 1


async def test_a_choice_for_every_job_is_one_confirmation(tmp_path: Path) -> None:
    app, _runtime = make_app(down_for_an_hour(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await open_ledger(pilot)
        await pilot.press("S")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        question = str(app.screen.query_one(".question", Static).render())
        await pilot.press("y")
        await until(pilot, lambda: not any(e.pending for e in ledger_of(app).entries))
        query = HistoryQuery(states=(RunState.MISSED,), limit=100)
        rows = await on_lane(app, lambda rt: rt.history.call(lambda store: store.page(query)))
    assert question == "Every job (2): skip the missed slots?"
    skipped = [row for row in rows if row.status.startswith("skipped by tester@test (console)")]
    assert {row.job for row in skipped} == {"ten", "other"}
    assert len(skipped) == 12
    log = (tmp_path / "state" / "actions.log").read_text()
    assert "missed slots: skip | job ten: skipped by" in log
    assert "missed slots: skip | job other: skipped by" in log


async def test_cancel_decides_nothing_and_read_only_offers_no_choice(tmp_path: Path) -> None:
    app, _ = make_app(down_for_an_hour(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await open_ledger(pilot)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, LedgerScreen))
        await pilot.pause(0.2)
        assert entry(app, "ten").pending
    viewer, _ = make_app(tmp_path / "tuisched.yaml", read_only=True)
    runtime_of(viewer)  # a fresh runtime on the same state: the slots wait still
    async with viewer.run_test(size=SIZE) as pilot:
        await open_ledger(pilot)
        await pilot.press("s")
        await pilot.pause(0.2)
        assert isinstance(viewer.screen, LedgerScreen)  # no question: no choice read-only
        assert entry(viewer, "ten").pending


async def test_j_and_k_move_the_ledgers_cursor(tmp_path: Path) -> None:
    app, _runtime = make_app(down_for_an_hour(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_ledger(pilot)
        table = screen.query_one(DataTable)
        assert table.cursor_row == 0
        await pilot.press("j", "j")
        assert table.cursor_row == 2
        await pilot.press("k")
        assert table.cursor_row == 1
        selected = screen.selected()
        assert selected is not None
        assert selected.job == "other"  # the row the choices then act on
