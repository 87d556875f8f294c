"""`tuisched completion bash|zsh|fish`: shell completion generated from the parser.

The scripts come from shtab, which reads the argparse parser itself, so every
command, option and choice added later is completed without touching this
module; the shell does not start Python for them (as argcomplete's hooks do).
`-c/--config` and `init`'s PATH complete file names.

A JOB (the argument of `trigger`, `run`, `logs`, `next`, `history`, `missed
decide`... every one whose metavar is `JOB`) completes the job names of the
configuration the command line being completed names with `-c` (else the one
every command finds): the script runs `tuisched jobs --names`, which loads
only PyYAML and answers in a few tens of milliseconds, with its errors sent
to /dev/null so a Tab never prints anything.
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
_JOB_METAVARS = ("JOB", "RUN_ID|JOB")
"""Arguments whose values are job names."""

_BASH_JOBS = r"""
# The job names of the configuration named by -c/--config on the line (else the default).
_tuisched_job_names() {
  local i word config=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="${COMP_WORDS[i]}"
    case "$word" in
      -c|--config)
        word="${COMP_WORDS[i+1]}"
        [[ $word == "=" ]] && word="${COMP_WORDS[i+2]}"
        config=(-c "${word/#\~/$HOME}") ;;
      --config=?*) config=(-c "${word#--config=}") ;;
    esac
  done
  command "${COMP_WORDS[0]}" jobs --names ${config[@]+"${config[@]}"} 2>/dev/null </dev/null |
    while IFS= read -r word; do [[ $word == "$1"* ]] && printf '%s
' "$word"; done
}
"""
_ZSH_JOBS = r"""
# The job names of the configuration named by -c/--config on the line (else the default).
# The line is read from LBUFFER: _arguments has shifted $words to the subcommand.
_tuisched_job_names() {
  local i
  local -a line config names
  line=(${(z)LBUFFER})
  for ((i = 2; i < ${#line}; i++)); do
    case ${(Q)line[i]} in
      (-c|--config) config=(-c ${~${(Q)line[i+1]}}) ;;
      (--config=?*) config=(-c ${~${(Q)line[i]#--config=}}) ;;
    esac
  done
  names=(${(f)"$(command ${(Q)line[1]} jobs --names $config 2>/dev/null </dev/null)"})
  compadd -a names
}
"""
_FISH_JOBS = r"""
# The job names of the configuration named by -c/--config on the line (else the default).
function _tuisched_job_names
    set -l tokens (commandline -opc)
    set -l config
    for i in (seq 2 (count $tokens))
        switch $tokens[$i]
            case -c --config
                set -l next (math $i + 1)
                if test $next -le (count $tokens)
                    set config -c (string replace -r '^~' $HOME -- $tokens[$next])
                end
            case '--config=?*'
                set config -c (string replace -r '^--config=~?' '' -- $tokens[$i])
        end
    end
    command $tokens[1] jobs --names $config 2>/dev/null </dev/null
end
"""
JOB_NAMES = {
    "bash": "_tuisched_job_names",
    "zsh": "_tuisched_job_names",
    "fish": "(_tuisched_job_names)",
    "preamble": {"bash": _BASH_JOBS, "zsh": _ZSH_JOBS, "fish": _FISH_JOBS},
}
"""shtab's completion of a JOB: a function of each shell's, defined in the script."""


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
        elif action.metavar in _JOB_METAVARS:
            action.complete = JOB_NAMES  # type: ignore[attr-defined]
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
