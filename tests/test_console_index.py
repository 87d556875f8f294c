"""The jobs pane over its index, and the palette over its own, driven with Pilot at 80x24."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from textual.command import CommandInput, CommandList, CommandPalette

from tuisched.frontends.tui.app import TuischedApp
from tuisched.frontends.tui.commands import MATCHES
from tuisched.frontends.tui.widgets.jobs import JobsTable

from . import engine_jobs
from .console_fixtures import make_app, on_lane, runtime_of, until
from .runtime_fixtures import write_config
from .snapshots import screen_text

SIZE = (80, 24)
JOBS = """
delta: {command: [/bin/true], schedule: {every: 1 hour, start: 2026-01-01T00:10}}
alpha: {command: [/bin/true], schedule: {every: 1 hour, start: 2026-01-01T00:40}}
blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual}
charlie: {command: [/bin/true], schedule: {every: 1 hour, start: 2026-01-01T00:20}}
"""


@pytest.fixture(autouse=True)
def _reset_gates() -> None:
    engine_jobs.GATES.clear()


def _shown(app: TuischedApp) -> list[str]:
    return [key.value or "" for key in app.query_one(JobsTable).rows]


def _select(app: TuischedApp, job: str) -> None:
    table = app.query_one(JobsTable)
    table.move_cursor(row=table.get_row_index(job))


async def _sort_by(pilot: object, app: TuischedApp, order: str) -> None:
    table = app.query_one(JobsTable)
    for _ in range(5):
        if table.index.order == order:
            return
        await pilot.press("o")  # type: ignore[attr-defined]
    raise AssertionError(f"no order {order!r}")


def _many(folder: Path, n: int) -> Path:
    """`n` manual jobs, each in one of 7 groups."""
    jobs = "\n".join(f"j{i:05d}: {{command: [/bin/true], schedule: manual}}" for i in range(n))
    path = write_config(folder, jobs)
    groups = "".join(
        f"  g{g}: {{jobs: [{', '.join(f'j{i:05d}' for i in range(g, n, 7))}]}}\n" for g in range(7)
    )
    path.write_text(path.read_text() + "groups:\n" + groups)
    return path


async def test_a_job_that_starts_running_moves_to_its_place_and_the_cursor_follows(
    tmp_path: Path,
) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 4)
        await _sort_by(pilot, app, "state")
        assert _shown(app) == ["alpha", "charlie", "delta", "blocker"]  # active, then manual
        _select(app, "blocker")
        await on_lane(app, lambda rt: rt.actions.run_now("blocker"))
        await until(pilot, lambda: _shown(app)[0] == "blocker")  # running comes first
        assert app.query_one(JobsTable).selected_job() == "blocker"
        engine_jobs.GATES["blocker"].set()
        await until(pilot, lambda: _shown(app)[-1] == "blocker")  # manual again
        assert app.query_one(JobsTable).selected_job() == "blocker"


def _by_next_run(app: TuischedApp) -> list[str]:
    """The jobs by their next run (none: last), then by name, as the scheduler says."""
    never = datetime.max.replace(tzinfo=UTC)
    jobs = app.state.jobs.values()
    return [s.name for s in sorted(jobs, key=lambda s: (s.next_fire or never, s.name))]


async def test_pausing_moves_a_job_in_the_next_run_order(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 4)
        await _sort_by(pilot, app, "next run")
        # slots at :10, :20 and :40 past each hour (which is first depends on the clock)
        first = _shown(app)[0]
        assert _shown(app) == _by_next_run(app)
        assert _shown(app)[-1] == "blocker"  # manual: no next run
        await on_lane(app, lambda rt: rt.actions.pause_job(first))
        await until(pilot, lambda: app.state.jobs[first].next_fire is None)
        await until(pilot, lambda: _shown(app) == _by_next_run(app))
        assert _shown(app).index(first) >= 2  # among the jobs without a next run
        assert str(app.query_one(JobsTable).get_cell(first, "state")) == "paused"
        await on_lane(app, lambda rt: rt.actions.pause_job(first, paused=False))
        await until(pilot, lambda: _shown(app)[0] == first)


async def test_a_reload_adds_and_deletes_jobs_in_their_sorted_places(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    app, _runtime = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 4)
        await _sort_by(pilot, app, "name")
        _select(app, "charlie")
        lines = [line for line in path.read_text().splitlines() if "delta:" not in line]
        lines.insert(lines.index("jobs:") + 1, "  bravo: {command: [/bin/true], schedule: manual}")
        lines.append("  zulu: {command: [/bin/true], schedule: manual}")
        path.write_text("\n".join(lines) + "\n")
        assert await on_lane(app, lambda rt: rt.actions.reload())
        await until(pilot, lambda: "zulu" in table.rows)
        assert _shown(app) == ["alpha", "blocker", "bravo", "charlie", "zulu"]
        assert "delta" not in table.rows
        assert table.selected_job() == "charlie"
        await _sort_by(pilot, app, "file order")
        assert _shown(app) == ["bravo", "alpha", "blocker", "charlie", "zulu"]
        assert table.selected_job() == "charlie"


async def test_every_order_keeps_the_cursor_on_its_job(tmp_path: Path) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 4)
        _select(app, "charlie")
        orders = []
        for _ in range(5):  # every order, and back to the file's
            await pilot.press("o")
            orders.append(table.index.order)
            assert table.selected_job() == "charlie"
            assert table.cursor_row == _shown(app).index("charlie")
        assert orders == ["name", "state", "next run", "last result", "file order"]
        assert _shown(app) == ["delta", "alpha", "blocker", "charlie"]


async def test_the_cursor_stays_in_view_on_a_long_list(tmp_path: Path) -> None:
    app, _runtime = make_app(_many(tmp_path, 500))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 500)
        await pilot.press("ctrl+end")
        assert table.selected_job() == "j00499"
        assert table.visible_jobs()[-1] == "j00499"
        await pilot.press("o", "o")  # by name, then by state: all manual, so by name
        assert table.selected_job() == "j00499"
        assert "j00499" in table.visible_jobs()
        await pilot.press("ctrl+home", "pagedown")
        assert table.selected_job() not in (None, "j00000")
        assert table.selected_job() in table.visible_jobs()


async def test_filtering_over_the_index_shows_what_a_filter_of_every_row_did(
    tmp_path: Path,
) -> None:
    app, _runtime = make_app(_many(tmp_path, 300))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 300)
        await on_lane(app, lambda rt: rt.actions.pause_group("g3"))
        await until(pilot, lambda: str(table.get_cell("j00003", "state")) == "paused")
        await pilot.press("o")  # by name
        for text in ("j0001", "G3", "paused", "manual", "command", "g5", "zzz"):
            await pilot.press("slash", *text)
            # the old pane: every row's name, groups, state and kind, in lower case
            expected = sorted(
                name
                for name, status in app.state.jobs.items()
                if any(
                    text.lower() in field.lower()
                    for field in (name, ", ".join(status.groups), status.state.value, status.kind)
                )
            )
            await until(pilot, lambda expected=expected: _shown(app) == expected)
            await pilot.press("enter", "escape")
            await until(pilot, lambda: app.ready and table.row_count == 300)


async def test_the_first_frame_formats_only_the_rows_in_view(tmp_path: Path) -> None:
    app, _runtime = make_app(_many(tmp_path, 3000))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 3000)
        await pilot.pause()
        assert "j00000" in screen_text(app)  # drawn
        assert 0 < table.formatted_rows <= table.size.height
        await pilot.press("ctrl+end")
        await pilot.pause()
        assert table.formatted_rows <= 2 * table.size.height


def _palette_hits(app: TuischedApp) -> list[str]:
    hits = app.screen.query_one(CommandList)
    return [str(hits.get_option_at_index(i).prompt) for i in range(hits.option_count)]


async def _search(pilot: object, app: TuischedApp, text: str) -> list[str]:
    await pilot.press("ctrl+p")  # type: ignore[attr-defined]
    await until(pilot, lambda: isinstance(app.screen, CommandPalette))  # type: ignore[arg-type]
    palette = app.screen
    await pilot.press(*text)  # type: ignore[attr-defined]
    assert palette.query_one(CommandInput).value == text

    def done() -> bool:  # the search is over, and its hits are listed
        searching = any(w.node is palette and not w.is_finished for w in app.workers)
        return not searching and any(text in hit for hit in _palette_hits(app))

    await until(pilot, done)  # type: ignore[arg-type]
    hits = _palette_hits(app)
    await pilot.press("escape")  # type: ignore[attr-defined]
    return hits


async def test_the_palette_finds_a_job_among_thousands_and_follows_a_reload(
    tmp_path: Path,
) -> None:
    path = _many(tmp_path, 3000)
    app, runtime = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 3000)
        hits = await _search(pilot, app, "j02345")
        assert hits[0].startswith("show j02345") or hits[0].startswith("run j02345")
        assert {hit.split("\n")[0] for hit in hits} >= {"show j02345", "run j02345", "pause j02345"}
        hits = await _search(pilot, app, "j0")  # 9,000 commands hold it: the best listed
        assert sum(hit.startswith(("show j", "run j", "pause j")) for hit in hits) == MATCHES
        newcomer = "  newcomer: {command: [/bin/true], schedule: manual}\ngroups:\n"
        path.write_text(path.read_text().replace("groups:\n", newcomer))
        assert await on_lane(app, lambda rt: rt.actions.reload())
        await until(pilot, lambda: "newcomer" in app.state.jobs)
        hits = await _search(pilot, app, "newcomer")
        assert hits[0].split("\n")[0] in {"show newcomer", "run newcomer", "pause newcomer"}
        await on_lane(app, lambda rt: rt.actions.pause_job("newcomer"))
        await until(pilot, lambda: app.state.jobs["newcomer"].paused)
        hits = await _search(pilot, app, "resume newcomer")
        assert hits[0].split("\n")[0] == "resume newcomer"
        assert runtime_of(app) is runtime
