"""The command palette's job commands (ctrl+p): run, pause or resume, show a job; pause a group.

Every command goes through the console's own path (a confirmation, then the
control seam), so the palette can do nothing the keys cannot. With `--read-only`
only "show JOB" is offered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING

from rich.text import Text
from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from tuisched.frontends.tui.app import TuischedApp

DISCOVERED = 50
"""Commands listed before anything is typed (a list of 30,000 helps nobody)."""

Command = tuple[str, str, Callable[[], object]]
"""(what the operator types, help, what it does)."""


def job_commands(app: TuischedApp) -> Iterator[Command]:
    """Every command the palette offers now, jobs first, then groups."""
    if not app.started:
        return
    operator, state = app.operator, app.state
    for name, status in state.jobs.items():
        yield f"show {name}", "open the job's detail", partial(app.show_job, name)
        if app.read_only:
            continue
        yield f"run {name}", "run the job now", partial(operator.run, name)
        verb = "resume" if status.paused else "pause"
        yield f"{verb} {name}", f"{verb} the job", partial(operator.pause_job, name)
    if app.read_only:
        return
    for group in state.groups:
        verb = "resume" if group.paused else "pause"
        yield (
            f"{verb} group {group.name}",
            f"{verb} every job of the group",
            partial(operator.pause_group, group.name, len(group.jobs), paused=group.paused),
        )


class JobCommands(Provider):
    """Job and group commands for the command palette."""

    def _app(self) -> TuischedApp:
        return self.app  # type: ignore[return-value]  # registered on TuischedApp only

    async def search(self, query: str) -> Hits:
        """Commands matching `query`, best first (the palette sorts by score)."""
        matcher = self.matcher(query)
        for text, help_text, command in job_commands(self._app()):
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), command, text=text, help=help_text)

    async def discover(self) -> Hits:
        """The first commands, shown before anything is typed."""
        for count, (text, help_text, command) in enumerate(job_commands(self._app())):
            if count >= DISCOVERED:
                return
            yield DiscoveryHit(Text(text), command, text=text, help=help_text)
