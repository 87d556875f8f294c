"""The console's edit path with 1,000, 10,000 and 100,000 jobs (issue 14).

Measures, on the real app driven headless by Pilot (80x24), for a job in the
middle of a file whose jobs carry comments (so the comment-keeping write is the
real one), with `after` dependants, `requires` and groups:
- open the edit form: from `e` on the job's row to the form shown with its
  fields filled from the file;
- check: from `ctrl+s` on the form (one field changed: the cron) to the
  confirmation asked (the whole check of the edit done);
- save: from `y` on the confirmation to the file written, the live schedule
  updated (the job's next fire time moved) and the console showing the job's
  new schedule;
- open the definition tab: from `enter` on the job's row to the detail view's
  definition tab showing the job's YAML;
- the longest event-loop stall seen during each of these (a 5 ms sleep's excess).

Waits are on the real conditions, each bounded by `--limit` seconds.

    .venv/bin/python -m benchmarks.bench_edit [--sizes 1000,10000] [--limit 120]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._common import StallMonitor, machine


def _job(i: int) -> list[str]:
    """The lines of job `i`: a comment above, block style, a comment at a line's end."""
    name = f"j{i:06d}"
    lines = [f"  # {name}: generated for the edit benchmark", f"  {name}:"]
    lines.append("    command: [/bin/true]")
    if i % 10 == 1:  # an `after` dependant of the job before it
        lines.append(f"    after: {{job: j{i - 1:06d}, on: success}}")
    else:
        lines.append(f'    schedule: {{cron: "{i % 60} {i % 24} 1 1 *"}}  # on 1 January')
    if i % 10 == 5:
        lines.append(f"    requires: [j{i - 1:06d}]")
    lines.append(f"    description: 'job number {i}'")
    return lines


def _config(folder: Path, n: int) -> Path:
    lines = [
        "# The edit benchmark's configuration: comments everywhere, kept by every write.",
        "settings:",
        "  timezone: UTC",
        "  state_dir: state",
        "  max_workers: 8",
        "",
        "jobs:",
    ]
    for i in range(n):
        lines += _job(i)
    lines += ["", "# one group per hundred jobs", "groups:"]
    for start in range(0, n, 100):
        members = ", ".join(f"j{i:06d}" for i in range(start, min(start + 100, n)))
        lines += [f"  g{start // 100:04d}:", f"    jobs: [{members}]"]
    path = folder / "tuisched.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class _Timer:
    """Times one operation and the longest loop stall during it."""

    stalls: StallMonitor
    limit: float

    async def until(self, pilot: Any, condition: Callable[[], object], what: str) -> None:
        deadline = time.perf_counter() + self.limit
        while not condition():
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{what}: not within {self.limit} s")
            await pilot.pause(0.005)

    async def measure(
        self, pilot: Any, act: Callable[[], Any], condition: Callable[[], object], what: str
    ) -> tuple[float, float]:
        """(seconds from `act` to `condition`, longest stall meanwhile)."""
        self.stalls.reset()
        start = time.perf_counter()
        await act()
        await self.until(pilot, condition, what)
        return time.perf_counter() - start, self.stalls.stall


async def _measure(n: int, limit: float) -> dict[str, float]:
    from textual.widgets import Input, Static

    from tuisched.frontends.tui.app import TuischedApp
    from tuisched.frontends.tui.screens.detail import JobDetailScreen
    from tuisched.frontends.tui.screens.dialogs import ConfirmScreen
    from tuisched.frontends.tui.screens.form import JobFormScreen
    from tuisched.frontends.tui.widgets.jobs import JobsTable
    from tuisched.runtime.configfiles import load_config
    from tuisched.runtime.control import LocalScheduler
    from tuisched.runtime.runtime import Runtime

    index = (n // 2) // 10 * 10  # a cron job in the middle, with an `after` dependant
    name, new_cron = f"j{index:06d}", "7 3 2 1 *"
    with tempfile.TemporaryDirectory(prefix="tuisched-edit-") as tmp:
        path = _config(Path(tmp), n)
        runtime = Runtime(load_config(path))
        scheduler = LocalScheduler(runtime)
        app = TuischedApp(scheduler.control("bench (console)"), scheduler=scheduler)
        stalls = StallMonitor()
        timer = _Timer(stalls, limit)
        async with app.run_test(size=(80, 24)) as pilot:
            table = app.query_one(JobsTable)
            await timer.until(pilot, lambda: table.row_count >= n, "the jobs table")
            await pilot.pause(1.0)
            stalls.start()

            def select() -> None:
                table.focus()
                table.move_cursor(row=table.get_row_index(name))

            def form_filled() -> bool:
                screen = app.screen
                return isinstance(screen, JobFormScreen) and bool(
                    screen.query("#form-cron")
                    and screen.query_one("#form-cron", Input).value
                    == f"{index % 60} {index % 24} 1 1 *"
                )

            async def press_e() -> None:
                select()
                await pilot.press("e")

            form = await timer.measure(pilot, press_e, form_filled, "the form")

            async def save() -> None:
                app.screen.query_one("#form-cron", Input).value = new_cron
                await pilot.press("ctrl+s")

            asked = lambda: isinstance(app.screen, ConfirmScreen)  # noqa: E731
            check = await timer.measure(pilot, save, asked, "the check")
            old_fire, old_mtime = runtime.engine.next_fire(name), path.stat().st_mtime_ns

            def applied() -> bool:
                fire, shown = runtime.engine.next_fire(name), app.state.jobs[name].trigger
                if fire is None or fire == old_fire or new_cron not in shown:
                    return False
                if path.stat().st_mtime_ns == old_mtime:
                    return False
                return new_cron in path.read_text()  # read once everything else changed

            written = await timer.measure(pilot, lambda: pilot.press("y"), applied, "the save")
            await timer.until(pilot, lambda: not app.screen.is_modal, "the form closed")
            await pilot.pause(0.5)

            async def press_enter() -> None:
                select()
                await pilot.press("enter")

            def definition_shown() -> bool:
                screen = app.screen
                if not isinstance(screen, JobDetailScreen) or not screen.query(
                    "#detail-definition"
                ):
                    return False
                shown = screen.query_one("#detail-definition", Static).content
                return f"job number {index}" in str(shown)

            tab = await timer.measure(pilot, press_enter, definition_shown, "the definition")
            await stalls.stop()
        return {
            "form_s": form[0], "form_stall": form[1], "check_s": check[0],
            "check_stall": check[1], "save_s": written[0], "save_stall": written[1],
            "tab_s": tab[0], "tab_stall": tab[1],
        }  # fmt: skip


def _cell(seconds: float, stall: float) -> str:
    return f"{seconds * 1000:,.0f} ms (stall {stall * 1000:,.0f} ms)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds per wait at most")
    args = parser.parse_args()
    print(machine())
    print(
        "| jobs | open the edit form (goal < 200 ms) | check + save (goal < 1 s together) "
        "| definition tab (goal < 200 ms) |"
    )
    print("|---|---|---|---|")
    for n in (int(size) for size in args.sizes.split(",")):
        r = asyncio.run(_measure(n, args.limit))
        both = r["check_s"] + r["save_s"]
        print(
            f"| {n:,} | {_cell(r['form_s'], r['form_stall'])} "
            f"| {both * 1000:,.0f} ms = {_cell(r['check_s'], r['check_stall'])} check "
            f"+ {_cell(r['save_s'], r['save_stall'])} save "
            f"| {_cell(r['tab_s'], r['tab_stall'])} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
