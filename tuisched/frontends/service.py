"""`tuisched service install [--user] [--name NAME] [--dry-run] [--force]`: a systemd unit.

The unit runs `tuisched --no-ui -c CONFIG` with absolute paths (this very
executable, the configuration found as every command finds it) as
`Type=notify`: the scheduler says READY once it fires, STATUS lines, and
WATCHDOG keep-alives from its event loop, so `WatchdogSec=` restarts one
whose loop stalled (see `tuisched.frontends.notify`). `KillMode=mixed`
sends SIGTERM to the scheduler alone, so it drains its runs itself (their
grace, then their process groups), and `TimeoutStopSec` leaves it the
configuration's `shutdown_grace` and more before systemd kills what is left.

`--user` writes into `~/.config/systemd/user/` (run by the user's own service
manager); without it into `/etc/systemd/system/`, run as the owner of the
configuration file. The configuration must validate first (exit 78 otherwise).

One unit per configuration: the unit's name is `--name`, else the name of a
unit already there that runs this configuration, else one made from the
file's folder and name (`~/jobs/tuisched.yaml` gives `tuisched-jobs.service`;
`~/.config/tuisched/tuisched.yaml` keeps `tuisched.service`). A unit of that
name that runs another configuration is never replaced silently: the command
names both files and asks for `--name` (or `--force`), exit 1; so is an
existing unit of this configuration (`--force` replaces it).
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import shlex
import sys
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path

from tuisched.frontends.lookup import config_path

UNIT_NAME = "tuisched.service"
"""The unit of a configuration at the usual places (`~/.config/tuisched/tuisched.yaml`)."""
_UNIT_WORD = re.compile(r"[^A-Za-z0-9_.-]+")
_UNIT_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
MAX_UNIT_BYTES = 64 * 1024
"""Unit files larger than this are not read when looking for this configuration's unit."""
WATCHDOG = timedelta(seconds=30)
"""`WatchdogSec=`: the loop pings twice as often; a loop stalled this long is restarted."""
STOP_MARGIN = timedelta(seconds=30)
"""Beyond `shutdown_grace`: the SIGKILL grace of the runs, and recording their ends."""


def add_service(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                config: argparse.ArgumentParser) -> None:  # fmt: skip
    """Add `service install` to the command line's subcommands."""
    service = commands.add_parser(
        "service", parents=[config], help="run tuisched as a systemd service",
        description="Set tuisched up as a systemd service running headless (--no-ui).",
        epilog="Example: tuisched service install --user -c ~/jobs/tuisched.yaml",
    )  # fmt: skip
    actions = service.add_subparsers(title="actions", metavar="ACTION", required=True)
    install = actions.add_parser(
        "install", parents=[config], help="write a Type=notify systemd unit",
        description="Write a systemd unit (Type=notify, watchdog, restart on failure) that "
        "runs this tuisched headless on the configuration, with absolute paths. The "
        "configuration must validate. --user: a unit of your own service manager.",
        epilog="Example: tuisched service install --user --dry-run",
    )  # fmt: skip
    install.add_argument(
        "--user", action="store_true",
        help="write into ~/.config/systemd/user/ (default: /etc/systemd/system/)",
    )  # fmt: skip
    install.add_argument(
        "--name", type=_unit_name, metavar="NAME",
        help="the unit's name (default: the unit already running this configuration, else "
        "one made from its folder and file name, e.g. tuisched-jobs.service)",
    )  # fmt: skip
    install.add_argument(
        "--dry-run", action="store_true", help="print the unit and where it would go; write nothing"
    )
    install.add_argument(
        "--force", action="store_true",
        help="replace an existing unit of that name (even one running another configuration)",
    )  # fmt: skip
    install.set_defaults(func=_install)


def unit_text(*, executable: list[str], config: Path, user: bool, run_as: str | None,
              shutdown_grace: timedelta) -> str:  # fmt: skip
    """The unit file: `executable` is the argv that starts tuisched (absolute)."""
    command = " ".join(_quoted(part) for part in [*executable, "--no-ui", "-c", str(config)])
    stop = int((shutdown_grace + STOP_MARGIN).total_seconds())
    lines = [
        "[Unit]",
        f"Description=tuisched job scheduler ({_escaped(str(config))})",
    ]
    if not user:  # a user manager has no network-online target of its own
        lines += ["Wants=network-online.target", "After=network-online.target"]
    lines += [
        "",
        "[Service]",
        "Type=notify",
        f"ExecStart={command}",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "Restart=on-failure",
        "RestartSec=5s",
        f"WatchdogSec={int(WATCHDOG.total_seconds())}s",
        "KillMode=mixed",
        f"TimeoutStopSec={stop}s",
        # A bad configuration (78) or an unusable state directory (73) will not fix
        # itself by restarting: stop trying, and let `systemctl status` say why.
        "RestartPreventExitStatus=73 78",
    ]
    if run_as is not None:
        lines.append(f"User={run_as}")
    lines += ["", "[Install]", f"WantedBy={'default.target' if user else 'multi-user.target'}"]
    return "\n".join(lines) + "\n"


def unit_folder(*, user: bool, environ: Mapping[str, str]) -> Path:
    """Where units go: the user's systemd folder, or the system's."""
    if not user:
        return Path("/etc/systemd/system")
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def default_unit_name(config: Path) -> str:
    """A unit name made from the configuration's folder and file name.

    `tuisched-FOLDER-STEM.service`, leaving out a part named `tuisched` (and
    the leading dots of a hidden folder): `~/jobs/tuisched.yaml` gives
    `tuisched-jobs.service`, `/srv/etl/prod.yaml` `tuisched-etl-prod.service`,
    and `~/.config/tuisched/tuisched.yaml` plain `tuisched.service`.
    """
    words = [_UNIT_WORD.sub("-", part.lstrip(".")).strip("-.") for part in
             (config.absolute().parent.name, config.stem)]  # fmt: skip
    kept = [word for word in dict.fromkeys(words) if word and word.lower() != "tuisched"]
    return "-".join(["tuisched", *kept])[:200] + ".service"


def unit_config(unit: Path) -> Path | None:
    """The configuration a unit written by `service install` runs (its `-c`), or None.

    None too for a unit that is not a regular file, is too large or cannot be read.
    """
    try:
        if not unit.is_file() or unit.stat().st_size > MAX_UNIT_BYTES:
            return None
        text = unit.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("ExecStart="):
            try:
                words = shlex.split(line.removeprefix("ExecStart="))
            except ValueError:
                return None
            if "--no-ui" in words and "-c" in words[:-1]:
                return Path(words[words.index("-c") + 1].replace("%%", "%"))
    return None


def _units_of(config: Path, folder: Path) -> Iterator[Path]:
    """The units in `folder` that run `config` (blocking: reads the folder's units)."""
    try:
        units = sorted(folder.glob("*.service"))
    except OSError:
        return
    for unit in units:
        found = unit_config(unit)
        if found is not None and _same_file(found, config):
            yield unit


def _same_file(one: Path, other: Path) -> bool:
    return os.path.realpath(one) == os.path.realpath(other)


def _unit_name(text: str) -> str:
    """`--name`: a unit name, `.service` added when it is not there."""
    name = text.removesuffix(".service")
    if not _UNIT_NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(
            f"not a unit name: '{text}' (letters, digits and _ . : - only)"
        )
    return name + ".service"


def tuisched_command() -> list[str]:
    """The absolute argv that starts this tuisched: its script, else `python -m tuisched`."""
    script = Path(sys.argv[0])
    if script.name == "tuisched" and script.is_file():
        return [str(script.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "tuisched"]


def _install(args: argparse.Namespace) -> int:
    from tuisched.runtime.control import read_config, require_driver  # noqa: PLC0415  (see cli)

    config_file = config_path(args).absolute()
    config = read_config(config_file)[1]  # a ConfigError exits 78 with its problems
    require_driver(config)  # a unit that could only exit 78 at each start helps nobody
    text = unit_text(
        executable=tuisched_command(), config=config_file, user=args.user,
        run_as=None if args.user else _owner(config_file),
        shutdown_grace=config.settings.shutdown_grace,
    )  # fmt: skip
    folder = unit_folder(user=args.user, environ=os.environ)
    ours = list(_units_of(config_file, folder))
    target = folder / (args.name or (ours[0].name if ours else default_unit_name(config_file)))
    refusal = None if args.force else _refusal(target, config_file, ours)
    if refusal is not None:
        print(f"tuisched: {refusal}", file=sys.stderr)
        return 1
    if args.dry_run:
        print(f"# {target}")
        print(text, end="")
        return 0
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as error:
        hint = " (a system unit needs root: sudo, or --user)" if not args.user else ""
        print(f"tuisched: cannot write {target}: {error.strerror or error}{hint}",
              file=sys.stderr)  # fmt: skip
        return 1
    _print_next_steps(target, user=args.user)
    return 0


def _refusal(target: Path, config: Path, ours: list[Path]) -> str | None:
    """Why writing `target` would hurt (None: it would not); `ours` run `config` already."""
    others = [unit for unit in ours if unit != target]
    if others:
        return (f"{others[0]} already runs {config}: a second unit would start a second "
                "scheduler on it (--force writes it anyway)")  # fmt: skip
    if not (target.exists() or target.is_symlink()):
        return None
    runs = unit_config(target)
    if runs is None or _same_file(runs, config):
        return f"{target} exists; --force replaces it"
    return (f"{target} runs {runs}, not {config}: name this one's unit with --name NAME "
            "(or --force replaces it)")  # fmt: skip


def _print_next_steps(target: Path, *, user: bool) -> None:
    ctl = "systemctl --user" if user else "systemctl"
    name = target.name
    print(f"wrote {target}")
    print(f"start it: {ctl} daemon-reload && {ctl} enable --now {name}")
    print(f"see it:   {ctl} status {name}; journalctl {'--user ' if user else ''}-u {name}")
    if user:
        print("keep it running after you log out: loginctl enable-linger")


def _owner(path: Path) -> str | None:
    """The owner of `path`, who runs a system unit (None for root: no User= line)."""
    uid = path.stat().st_uid
    if uid == 0:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


_NEEDS_QUOTES = re.compile(r"""[\s"'\\;]""")


def _quoted(word: str) -> str:
    """One ExecStart word: `%` doubled (systemd's specifiers), quoted when it must be."""
    word = _escaped(word)
    if not word or _NEEDS_QUOTES.search(word):
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return word


def _escaped(text: str) -> str:
    return text.replace("%", "%%")
