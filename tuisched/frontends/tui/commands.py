"""The command palette's job commands (ctrl+p): run, pause or resume, show a job; pause a group.

Every command goes through the console's own path (a confirmation, then the
control seam), so the palette can do nothing the keys cannot. With `--read-only`
only "show JOB" is offered.

With thousands of jobs there are tens of thousands of commands: scoring each
with Textual's fuzzy matcher on every key stroke took seconds. `CommandIndex`
holds their texts once per change of the jobs (`ConsoleState.commands_version`),
joined in one lower-cased string, where regular expressions find the commands
holding what is typed, then those holding its letters in order (the only ones
the fuzzy matcher can score above zero); only those are scored (at most
`SCORED`), the best `MATCHES` listed, and the commands made for those only.
"""

from __future__ import annotations

import asyncio
import re
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from rich.text import Text
from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from tuisched.frontends.tui.host import ConsoleHost

DISCOVERED = 50
"""Commands listed before anything is typed (a list of 30,000 helps nobody)."""

MATCHES = 100
"""Hits listed for a query, best first: typing more narrows them."""
SCORED = 2000
"""Candidates scored for one query, at most (see `JobCommands.search`)."""
_CHUNK = 500
"""Commands scored between two turns of the loop, so a next key stroke cancels a search."""

Command = tuple[str, str, Callable[[], object]]
"""(what the operator types, help, what it does)."""


class CommandIndex:
    """Every command the palette offers now, jobs first, then groups: their texts at
    once, found by the letters typed; a command itself only when it is listed."""

    def __init__(self, app: ConsoleHost) -> None:
        self._app = app
        state = app.state
        self._jobs = list(state.jobs.values()) if app.started else []
        self._groups = state.groups if app.started and not app.read_only else ()
        self._per_job = 1 if app.read_only else 3
        """show; and run, pause or resume unless read-only."""
        self.texts: list[str] = []
        for status in self._jobs:
            self.texts.append(f"show {status.name}")
            if not app.read_only:
                verb = "resume" if status.paused else "pause"
                self.texts += (f"run {status.name}", f"{verb} {status.name}")
        for group in self._groups:
            self.texts.append(f"{'resume' if group.paused else 'pause'} group {group.name}")
        self._text = "\n".join(self.texts).lower()
        self._starts = array("q", [0])
        """Where each command's text starts in `_text`."""
        for text in self.texts[:-1]:
            self._starts.append(self._starts[-1] + len(text) + 1)

    def candidates(self, query: str) -> Iterator[int]:
        """The commands that can match `query`: those holding it (any case) first, then
        those holding its letters in order (the only others Textual's matcher scores)."""
        query = query.lower()
        seen: set[int] = set()
        for match in re.finditer(re.escape(query), self._text):
            number = self._number(match.start())
            if number not in seen:
                seen.add(number)
                yield number
        letters = "[^\n]*?".join(re.escape(letter) for letter in query)
        for match in re.finditer("^[^\n]*?" + letters, self._text, re.MULTILINE):
            number = self._number(match.start())
            if number not in seen:
                yield number

    def _number(self, offset: int) -> int:
        return bisect_right(self._starts, offset) - 1

    def command(self, number: int) -> Command:
        """The command of text `number`: (text, help, what it does)."""
        app, text = self._app, self.texts[number]
        job, which = divmod(number, self._per_job)
        if job >= len(self._jobs):
            group = self._groups[number - len(self._jobs) * self._per_job]
            verb = "resume" if group.paused else "pause"
            act = partial(
                app.operator.pause_group, group.name, len(group.jobs), paused=group.paused
            )
            return text, f"{verb} every job of the group", act
        name = self._jobs[job].name
        if which == 0:
            return text, "open the job's detail", partial(app.show_job, name)
        if which == 1:
            return text, "run the job now", partial(app.operator.run, name)
        return text, f"{text.split()[0]} the job", partial(app.operator.pause_job, name)


_INDEXES: WeakKeyDictionary[ConsoleHost, tuple[object, CommandIndex]] = WeakKeyDictionary()


def command_index(app: ConsoleHost) -> CommandIndex:
    """The app's command index, built again only when its commands changed."""
    version = (app.state.commands_version, app.state.groups, app.read_only, app.started)
    cached = _INDEXES.get(app)
    if cached is None or cached[0] != version:
        cached = _INDEXES[app] = (version, CommandIndex(app))
    return cached[1]


class JobCommands(Provider):
    """Job and group commands for the command palette."""

    def _app(self) -> ConsoleHost:
        return self.app  # type: ignore[return-value]  # registered on the console app only

    async def search(self, query: str) -> Hits:
        """The best `MATCHES` commands for `query`, best first (the palette sorts by score).

        At most `SCORED` candidates are scored (those holding the query first): a letter
        or two typed among 100,000 jobs matches nearly all of them.
        """
        index, matcher = command_index(self._app()), self.matcher(query)
        scored: list[tuple[float, int]] = []
        for count, number in enumerate(index.candidates(query), start=1):
            score = matcher.match(index.texts[number])
            if score > 0:
                scored.append((-score, number))
            if count >= SCORED:
                break
            if count % _CHUNK == 0:
                await asyncio.sleep(0)
        scored.sort()
        for score, number in scored[:MATCHES]:
            text, help_text, command = index.command(number)
            yield Hit(-score, matcher.highlight(text), command, text=text, help=help_text)

    async def discover(self) -> Hits:
        """The first commands, shown before anything is typed."""
        index = command_index(self._app())
        for number in range(min(DISCOVERED, len(index.texts))):
            text, help_text, command = index.command(number)
            yield DiscoveryHit(Text(text), command, text=text, help=help_text)
