"""`tuisched completion bash|zsh|fish`: shell completion generated from the parser.

The scripts come from shtab, which reads the argparse parser itself, so every
command, option and choice added later is completed without touching this
module; the shell does not start Python on each Tab press (as argcomplete's
hooks do). `-c/--config` and `init`'s PATH complete file names.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator

SHELLS = ("bash", "zsh", "fish")
INSTALL = {
    "bash": "tuisched completion bash > ~/.local/share/bash-completion/completions/tuisched",
    "zsh": "tuisched completion zsh > ~/.zfunc/_tuisched  (with fpath+=~/.zfunc before compinit)",
    "fish": "tuisched completion fish > ~/.config/fish/completions/tuisched.fish",
}
_FILE_ARGUMENTS = ("config", "path")
"""Destinations whose values are file names."""


def add_completion(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                   config: argparse.ArgumentParser,
                   parser: Callable[[], argparse.ArgumentParser]) -> None:  # fmt: skip
    """Add `completion` to the command line's subcommands; `parser` builds the whole one."""
    completion = commands.add_parser(
        "completion", parents=[config], help="print a shell completion script",
        description="Print the completion script for a shell, generated from tuisched's own "
        "commands and options. Install it: " + "; ".join(INSTALL.values()),
        epilog="Example: tuisched completion fish > ~/.config/fish/completions/tuisched.fish",
    )  # fmt: skip
    completion.add_argument("shell", choices=SHELLS, help="the shell")
    completion.set_defaults(func=lambda args: _print_script(parser(), args.shell))


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of `parser` for `shell`."""
    import shtab  # noqa: PLC0415  (only this command needs it)

    for action in _actions(parser):
        if action.dest in _FILE_ARGUMENTS:
            action.complete = shtab.FILE  # type: ignore[attr-defined]  # shtab reads this attribute
    return shtab.complete(parser, shell=shell)


def _print_script(parser: argparse.ArgumentParser, shell: str) -> int:
    print(script(parser, shell))
    return 0


def _actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """Every action of `parser` and of its subcommands, however deep."""
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)
