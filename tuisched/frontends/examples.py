"""A description and an example in every command's `--help`.

Commands added with only a one-line `help` get it as their description too,
and the example below as their epilog; a command that wrote its own keeps
them. `tests/test_packaging.py` checks that every command has both.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

EXAMPLES = {
    "": "tuisched -c ~/jobs/tuisched.yaml        (the console; --no-ui runs headless)",
    "validate": "tuisched validate -c /etc/tuisched.yaml",
    "next": "tuisched next backup -n 3 --now 2026-03-29T00:00",
    "upstream": "tuisched upstream daily-report --at 2026-05-07T06:00",
    "jobs": "tuisched jobs --json",
    "history": "tuisched history backup --since 7d --state failed",
    "run": "tuisched run backup --fire-events",
    "attach": "tuisched attach --read-only",
    "status": "tuisched status --json",
    "pause": "tuisched pause --group nightly",
    "resume": "tuisched resume backup",
    "trigger": "tuisched trigger backup --wait",
    "stop": "tuisched stop backup --kill",
    "reload": "tuisched reload --json",
    "logs": "tuisched logs backup -f",
    "missed": "tuisched missed --json",
    "missed decide": "tuisched missed decide backup latest",
}


def describe_commands(parser: argparse.ArgumentParser) -> None:
    """Give `parser` and each of its commands a description and an example epilog
    where they have none (the description is the command's one-line help)."""
    for path, command, summary in _commands(parser, ""):
        if command.description is None and summary:
            command.description = summary[0].upper() + summary[1:] + "."
        if command.epilog is None and path in EXAMPLES:
            command.epilog = f"Example: {EXAMPLES[path]}"


def _commands(
    parser: argparse.ArgumentParser, path: str, summary: str | None = None
) -> Iterator[tuple[str, argparse.ArgumentParser, str | None]]:
    """(command path, its parser, its one-line help) for `parser` and every command below."""
    yield path, parser, summary
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help for choice in action._choices_actions}
        for name, sub in action.choices.items():
            yield from _commands(sub, f"{path} {name}".strip(), helps.get(name))
