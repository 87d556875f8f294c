"""`tuisched service install [--user] [--dry-run] [--force]`: a systemd unit for headless mode.

The unit runs `tuisched --no-ui -c CONFIG` with absolute paths (this very
executable, the configuration found as every command finds it) as
`Type=notify`: the scheduler says READY once it fires, STATUS lines, and
WATCHDOG keep-alives from its event loop, so `WatchdogSec=` restarts one
whose loop stalled (see `tuisched.frontends.notify`). `KillMode=mixed`
sends SIGTERM to the scheduler alone, so it drains its runs itself (their
grace, then their process groups), and `TimeoutStopSec` leaves it the
configuration's `shutdown_grace` and more before systemd kills what is left.

`--user` writes `~/.config/systemd/user/tuisched.service` (run by the user's
own service manager); without it `/etc/systemd/system/tuisched.service`,
run as the owner of the configuration file. The configuration must validate
first (exit 78 otherwise); an existing unit is kept unless `--force` (exit 1).
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import sys
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from tuisched.frontends.lookup import config_path

UNIT_NAME = "tuisched.service"
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
        help=f"write ~/.config/systemd/user/{UNIT_NAME} (default: /etc/systemd/system)",
    )  # fmt: skip
    install.add_argument(
        "--dry-run", action="store_true", help="print the unit and where it would go; write nothing"
    )
    install.add_argument("--force", action="store_true", help="replace an existing unit")
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


def unit_path(*, user: bool, environ: Mapping[str, str]) -> Path:
    """Where the unit goes: the user's systemd folder, or the system's."""
    if not user:
        return Path("/etc/systemd/system") / UNIT_NAME
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user" / UNIT_NAME


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
    target = unit_path(user=args.user, environ=os.environ)
    if args.dry_run:
        print(f"# {target}")
        print(text, end="")
        return 0
    if target.exists() and not args.force:
        print(f"tuisched: {target} exists; --force replaces it", file=sys.stderr)
        return 1
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


def _print_next_steps(target: Path, *, user: bool) -> None:
    ctl = "systemctl --user" if user else "systemctl"
    print(f"wrote {target}")
    print(f"start it: {ctl} daemon-reload && {ctl} enable --now {UNIT_NAME}")
    print(f"see it:   {ctl} status {UNIT_NAME}; journalctl {'--user ' if user else ''}-u tuisched")
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
