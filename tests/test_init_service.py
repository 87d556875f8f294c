"""Setting tuisched up on a machine: config lookup, `init`, the systemd unit and its
notifications, shell completion and the Dockerfile (issue 16, item 6)."""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tuisched.frontends.cli import _parser
from tuisched.frontends.notify import Notifier, _watchdog_period
from tuisched.frontends.service import default_unit_name, unit_text

from .conftest import REPO

TUISCHED = Path(sys.executable).with_name("tuisched")
MANUAL = "jobs:\n  a: {command: [/bin/true], schedule: manual}\n"


def tuisched(
    *argv: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the installed `tuisched` script for real, with the config lookup's variables
    cleared and the user's configuration folder inside the test's folder."""
    clean = {k: v for k, v in os.environ.items() if k not in ("TUISCHED_CONFIG", "NOTIFY_SOCKET")}
    clean["XDG_CONFIG_HOME"] = str(cwd / "xdg")
    done = subprocess.run(
        [str(TUISCHED), *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=30,
        check=False,
        env={**clean, **(env or {})},
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


# --- where the configuration is found ---------------------------------------------------


def test_without_a_configuration_the_error_says_where_it_looked(tmp_path: Path) -> None:
    done = tuisched("jobs", cwd=tmp_path)
    assert done.returncode == 78
    assert (
        f"looked in {tmp_path}/tuisched.yaml and {tmp_path}/xdg/tuisched/tuisched.yaml"
        in done.stderr
    )
    assert "tuisched init writes a starter" in done.stderr


def test_lookup_order_is_option_variable_folder_then_user_config(tmp_path: Path) -> None:
    user = tmp_path / "xdg" / "tuisched" / "tuisched.yaml"
    user.parent.mkdir(parents=True)
    user.write_text(MANUAL)
    assert tuisched("validate", cwd=tmp_path).stdout == "OK: 1 job, 0 groups\n"
    (tmp_path / "tuisched.yaml").write_text(MANUAL.replace("a:", "here-a:") + "  b: " + "{}\n")
    assert "job 'b'" in tuisched("validate", cwd=tmp_path).stdout  # ./tuisched.yaml wins
    named = tmp_path / "named.yaml"
    named.write_text(MANUAL + "  c: {command: [/bin/true], schedule: manual}\n")
    from_env = tuisched("validate", cwd=tmp_path, env={"TUISCHED_CONFIG": str(named)})
    assert from_env.stdout == "OK: 2 jobs, 0 groups\n"
    from_option = tuisched(
        "validate", "-c", str(user), cwd=tmp_path, env={"TUISCHED_CONFIG": str(named)}
    )
    assert from_option.stdout == "OK: 1 job, 0 groups\n"


def test_a_named_file_that_is_missing_is_named_not_replaced(tmp_path: Path) -> None:
    user = tmp_path / "xdg" / "tuisched" / "tuisched.yaml"
    user.parent.mkdir(parents=True)
    user.write_text(MANUAL)
    done = tuisched("jobs", cwd=tmp_path, env={"TUISCHED_CONFIG": str(tmp_path / "gone.yaml")})
    assert done.returncode == 78
    assert f"{tmp_path}/gone.yaml:1: cannot read the file" in done.stderr


# --- init --------------------------------------------------------------------------------


def test_init_writes_a_starter_that_validates_and_never_overwrites(tmp_path: Path) -> None:
    done = tuisched("init", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written = tmp_path / "tuisched.yaml"
    assert f"wrote {written}" in done.stdout
    text = written.read_text()
    assert text.startswith("# tuisched configuration")
    assert f"tuisched validate -c {written}" in text
    assert tuisched("validate", cwd=tmp_path).stdout == "OK: 4 jobs, 0 groups\n"
    assert tuisched("next", "hello", "-n", "1", cwd=tmp_path).returncode == 0

    written.write_text(MANUAL)
    again = tuisched("init", cwd=tmp_path)
    assert again.returncode == 1
    assert again.stderr == f"tuisched: {written} exists; init never overwrites a file " \
        "(name another PATH)\n"  # fmt: skip
    assert written.read_text() == MANUAL


def test_init_path_and_config_option_and_a_new_folder(tmp_path: Path) -> None:
    nested = tmp_path / "a" / "b" / "jobs.yaml"
    assert tuisched("init", str(nested), cwd=tmp_path).returncode == 0
    assert tuisched("validate", "-c", str(nested), cwd=tmp_path).returncode == 0
    other = tmp_path / "other.yaml"
    assert tuisched("init", "-c", str(other), cwd=tmp_path).returncode == 0
    assert other.exists()
    blocked = tmp_path / "file"
    blocked.write_text("")
    refused = tuisched("init", str(blocked / "x.yaml"), cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"tuisched: cannot write {blocked}/x.yaml: ")


# --- service install ---------------------------------------------------------------------


def _unit_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_service_install_dry_run_prints_a_notify_unit_with_absolute_paths(tmp_path: Path) -> None:
    (tmp_path / "tuisched.yaml").write_text(MANUAL + "settings: {shutdown_grace: 50s}\n")
    done = tuisched("service", "install", "--user", "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    target = tmp_path / "xdg" / "systemd" / "user" / default_unit_name(tmp_path / "tuisched.yaml")
    assert done.stdout.startswith(f"# {target}\n")
    lines = _unit_lines(done.stdout)
    assert f"ExecStart={TUISCHED} --no-ui -c {tmp_path}/tuisched.yaml" in lines
    for expected in ("Type=notify", "Restart=on-failure", "WatchdogSec=30s", "KillMode=mixed",
                     "TimeoutStopSec=80s", "ExecReload=/bin/kill -HUP $MAINPID",
                     "WantedBy=default.target"):  # fmt: skip
        assert expected in lines
    assert not any(line.startswith("User=") for line in lines)
    assert not target.exists()


def test_service_install_writes_the_user_unit_once(tmp_path: Path) -> None:
    (tmp_path / "tuisched.yaml").write_text(MANUAL)
    done = tuisched("service", "install", "--user", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    target = tmp_path / "xdg" / "systemd" / "user" / default_unit_name(tmp_path / "tuisched.yaml")
    assert f"wrote {target}" in done.stdout
    assert "systemctl --user daemon-reload && systemctl --user enable --now" in done.stdout
    assert "Type=notify" in target.read_text()
    target.write_text("mine\n")
    again = tuisched("service", "install", "--user", cwd=tmp_path)
    assert (again.returncode, again.stderr) == (1, f"tuisched: {target} exists; --force "
                                                   "replaces it\n")  # fmt: skip
    assert target.read_text() == "mine\n"
    assert tuisched("service", "install", "--user", "--force", cwd=tmp_path).returncode == 0
    assert "Type=notify" in target.read_text()


@pytest.mark.parametrize(
    ("config", "unit"),
    [
        ("/home/ops/jobs/tuisched.yaml", "tuisched-jobs.service"),
        ("/home/ops/.config/tuisched/tuisched.yaml", "tuisched.service"),
        ("/etc/tuisched/tuisched.yaml", "tuisched.service"),
        ("/srv/etl/prod.yaml", "tuisched-etl-prod.service"),
        ("/srv/my jobs/.hidden/Nightly Jobs.yml", "tuisched-hidden-Nightly-Jobs.service"),
        ("/tuisched.yaml", "tuisched.service"),
    ],
)
def test_the_default_unit_name_comes_from_the_configuration(config: str, unit: str) -> None:
    assert default_unit_name(Path(config)) == unit


def test_two_configurations_get_two_units_and_none_is_replaced_silently(tmp_path: Path) -> None:
    """Issue 27: a second configuration's unit never overwrites the first's."""
    for folder in ("a", "b", "other/a"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "tuisched.yaml").write_text(MANUAL)
    units = tmp_path / "xdg" / "systemd" / "user"
    for folder in ("a", "b"):
        done = tuisched("service", "install", "--user", "-c", f"{folder}/tuisched.yaml",
                        cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"enable --now tuisched-{folder}.service" in done.stdout
        assert f"journalctl --user -u tuisched-{folder}.service" in done.stdout
    first = (units / "tuisched-a.service").read_text()
    assert f"-c {tmp_path}/a/tuisched.yaml" in first
    assert f"-c {tmp_path}/b/tuisched.yaml" in (units / "tuisched-b.service").read_text()
    # Another folder called `a`: same name, another file: refused, naming both.
    clash = tuisched("service", "install", "--user", "-c", "other/a/tuisched.yaml", cwd=tmp_path)
    assert (clash.returncode, clash.stdout) == (1, "")
    assert clash.stderr == (
        f"tuisched: {units}/tuisched-a.service runs {tmp_path}/a/tuisched.yaml, not "
        f"{tmp_path}/other/a/tuisched.yaml: name this one's unit with --name NAME "
        "(or --force replaces it)\n"
    )
    assert (units / "tuisched-a.service").read_text() == first
    named = tuisched("service", "install", "--user", "-c", "other/a/tuisched.yaml",
                     "--name", "etl-a", cwd=tmp_path)  # fmt: skip
    assert named.returncode == 0, named.stderr
    assert f"-c {tmp_path}/other/a/tuisched.yaml" in (units / "etl-a.service").read_text()
    # Installing a configuration again finds its unit, whatever its name.
    again = tuisched("service", "install", "--user", "-c", "other/a/tuisched.yaml", cwd=tmp_path)
    assert (again.returncode, again.stderr) == (
        1, f"tuisched: {units}/etl-a.service exists; --force replaces it\n"
    )  # fmt: skip
    second = tuisched("service", "install", "--user", "-c", "a/tuisched.yaml", "--name", "x",
                      cwd=tmp_path)  # fmt: skip
    assert second.returncode == 1
    assert "tuisched-a.service already runs" in second.stderr
    assert sorted(unit.name for unit in units.iterdir()) == [
        "etl-a.service", "tuisched-a.service", "tuisched-b.service",
    ]  # fmt: skip
    bad = tuisched("service", "install", "--user", "--name", "../escape", cwd=tmp_path)
    assert bad.returncode == 2
    assert "not a unit name: '../escape'" in bad.stderr


def test_service_install_refuses_a_bad_configuration(tmp_path: Path) -> None:
    (tmp_path / "tuisched.yaml").write_text("jobs:\n  a: {command: [/bin/true]}\n")
    done = tuisched("service", "install", "--user", cwd=tmp_path)
    assert done.returncode == 78
    assert "job 'a': a job needs a trigger source" in done.stderr
    assert not (tmp_path / "xdg" / "systemd").exists()


def test_a_system_unit_runs_as_the_configuration_owner_after_the_network() -> None:
    text = unit_text(executable=["/usr/bin/tuisched"], config=Path("/etc/tuisched.yaml"),
                     user=False, run_as="sched", shutdown_grace=timedelta(seconds=10))  # fmt: skip
    lines = _unit_lines(text)
    assert "User=sched" in lines
    assert "After=network-online.target" in lines
    assert "WantedBy=multi-user.target" in lines
    assert "TimeoutStopSec=40s" in lines


def test_paths_with_spaces_and_percent_signs_are_quoted_for_systemd() -> None:
    text = unit_text(executable=["/opt/my tools/tuisched"], config=Path("/srv/100% jobs.yaml"),
                     user=True, run_as=None, shutdown_grace=timedelta(0))  # fmt: skip
    assert 'ExecStart="/opt/my tools/tuisched" --no-ui -c "/srv/100%% jobs.yaml"' in text


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
@pytest.mark.parametrize("user", [True, False])
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path, user: bool) -> None:
    config = tmp_path / "my jobs" / "100% tuisched.yaml"
    config.parent.mkdir()
    text = unit_text(executable=[str(TUISCHED)], config=config, user=user, run_as=None,
                     shutdown_grace=timedelta(seconds=10))  # fmt: skip
    unit = tmp_path / "tuisched.service"
    unit.write_text(text)
    assert _verify(unit) == ""
    # The check itself sees mistakes: a misspelt type is reported on stderr.
    unit.write_text(text.replace("Type=notify", "Type=notifyy"))
    assert "notifyy" in _verify(unit)


def _verify(unit: Path) -> str:
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    problems = "\n".join(line for line in done.stderr.splitlines() if unit.name in line)
    assert done.returncode == 0 or problems, done.stderr
    return problems


# --- the notifications a Type=notify unit receives -----------------------------------------


@pytest.fixture
def notify_socket() -> Iterator[tuple[socket.socket, str]]:
    """A bound Unix datagram socket, as systemd's $NOTIFY_SOCKET (a short path: sun_path
    holds 108 bytes)."""
    folder = tempfile.mkdtemp(prefix="tsn-", dir="/tmp")
    path = f"{folder}/notify"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(path)
    receiver.settimeout(20)
    yield receiver, path
    receiver.close()
    shutil.rmtree(folder)


PEEK = """
settings: {state_dir: STATE}
jobs:
  peek:
    command: 'echo "notify=${NOTIFY_SOCKET-unset} watchdog=${WATCHDOG_USEC-unset}"'
    schedule: {every: 1 second, start: 2026-01-01T00:00}
"""


def test_headless_tells_systemd_ready_status_watchdog_and_stopping(
    tmp_path: Path, notify_socket: tuple[socket.socket, str]
) -> None:
    receiver, path = notify_socket
    config = tmp_path / "tuisched.yaml"
    config.write_text(PEEK.replace("STATE", str(tmp_path / "state")))
    process = subprocess.Popen(
        [str(TUISCHED), "--no-ui", "-c", str(config)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000"},
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in process.stderr or ()],
                              daemon=True)  # fmt: skip
    reader.start()
    try:
        ready = receiver.recv(4096).decode().split("\n")
        assert ready[0] == "READY=1"
        assert re.fullmatch(r"STATUS=running: 1 job, [01] running, 0 queued, 0 waiting", ready[1])
        assert f"MAINPID={process.pid}" in ready
        for _ in range(2):  # keep-alives every 0.1 s (half the watchdog period)
            beat = receiver.recv(4096).decode().split("\n")
            assert beat[0] == "WATCHDOG=1"
            assert beat[1].startswith("STATUS=running: 1 job, ")
        # Jobs do not inherit the socket (nor speak for the scheduler on it).
        while "SUCCESS" not in (line := lines.get(timeout=20)):
            pass
        assert line.endswith("exit 0: notify=unset watchdog=unset\n")
        process.send_signal(signal.SIGTERM)
        while (message := receiver.recv(4096).decode()).startswith("WATCHDOG=1"):
            pass
        assert message.split("\n") == ["STOPPING=1", "STATUS=draining: no new runs"]
        assert process.wait(20) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(20)
        reader.join(20)
        assert process.stderr is not None
        process.stderr.close()
    assert not [line for line in list(lines.queue) if "Traceback" in line]


def test_without_notify_socket_nothing_is_sent(tmp_path: Path) -> None:
    assert Notifier.from_environment({}) is None
    assert Notifier.from_environment({"NOTIFY_SOCKET": "vsock:2:1234"}) is None


def test_the_watchdog_period_is_for_this_process_only() -> None:
    mine = str(os.getpid())
    assert _watchdog_period({"WATCHDOG_USEC": "30000000"}) == 30.0
    assert _watchdog_period({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": mine}) == 30.0
    assert _watchdog_period({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}) is None
    assert _watchdog_period({"WATCHDOG_USEC": "0"}) is None
    assert _watchdog_period({"WATCHDOG_USEC": "٣"}) is None


def test_abstract_socket_and_a_reader_that_never_reads_never_block() -> None:
    name = f"tuisched-test-{os.getpid()}"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind("\0" + name)
    try:
        notifier = Notifier.from_environment({"NOTIFY_SOCKET": "@" + name})
        assert notifier is not None
        notifier.send("READY=1")
        receiver.settimeout(5)
        assert receiver.recv(100) == b"READY=1"
        for _ in range(10_000):  # far more than the socket queue holds: dropped, not blocked
            notifier.send("STATUS=" + "x" * 1000)
        notifier.close()
    finally:
        receiver.close()


# --- shell completion ---------------------------------------------------------------------


def _command_names() -> set[str]:
    names: set[str] = set()
    pending = [_parser()]
    while pending:
        parser = pending.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                names.update(action.choices)
                pending.extend(action.choices.values())
    return names


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_name_every_command(tmp_path: Path, shell: str) -> None:
    done = tuisched("completion", shell, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names = _command_names()
    assert {"init", "service", "install", "completion", "validate", "decide"} <= names
    for name in names:
        assert name in done.stdout, f"{shell}: no {name}"
    if shell != "bash" and shutil.which(shell):
        loaded = subprocess.run([shell, "-n", "-c", done.stdout], capture_output=True,
                                text=True, timeout=30, check=False)  # fmt: skip
        assert loaded.returncode == 0, loaded.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_loads_the_script_and_completes_commands(tmp_path: Path) -> None:
    script = tmp_path / "tuisched.bash"
    script.write_text(tuisched("completion", "bash", cwd=tmp_path).stdout)
    probe = f"""
    source {script} || exit 3
    function=$(complete -p tuisched | sed 's/.* -F \\([^ ]*\\) .*/\\1/')
    COMP_WORDS=(tuisched se); COMP_CWORD=1; COMP_LINE="tuisched se"; COMP_POINT=11
    $function tuisched se tuisched; echo "1:${{COMPREPLY[*]}}"
    COMP_WORDS=(tuisched service ""); COMP_CWORD=2; COMP_LINE="tuisched service "; COMP_POINT=17
    $function tuisched "" service; echo "2:${{COMPREPLY[*]}}"
    COMP_WORDS=(tuisched completion ""); COMP_CWORD=2
    $function tuisched "" completion; echo "3:${{COMPREPLY[*]}}"
    """
    done = subprocess.run(["bash", "--norc", "-c", probe], capture_output=True, text=True,
                          timeout=30, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines() == ["1:service", "2:install", "3:bash zsh fish"]


JOBS = """
jobs:
  hello: {command: [/bin/true], schedule: manual}
  heavy-report: {command: [/bin/true], schedule: manual}
  other: {command: [/bin/true], schedule: manual}
"""


def _completing(tmp_path: Path, shell: str) -> tuple[Path, dict[str, str]]:
    """The `shell` script written out, and an environment whose PATH has this tuisched (the
    script runs `tuisched jobs --names` on each Tab), in a folder of two configurations."""
    (tmp_path / "jobs.yaml").write_text(JOBS)
    (tmp_path / "tuisched.yaml").write_text(MANUAL)  # the default one: job `a`
    script = tmp_path / f"tuisched.{shell}"
    script.write_text(tuisched("completion", shell, cwd=tmp_path).stdout)
    env = {k: v for k, v in os.environ.items() if k != "TUISCHED_CONFIG"}
    env["PATH"] = f"{TUISCHED.parent}:{env['PATH']}"
    return script, env


JOB_LINES = [  # (the line up to the cursor, the job names it completes)
    ("tuisched trigger -c jobs.yaml h", ["hello", "heavy-report"]),
    ("tuisched -c jobs.yaml logs ", ["hello", "heavy-report", "other"]),
    ("tuisched missed decide --config jobs.yaml o", ["other"]),
    ("tuisched stop -c jobs.yaml he", ["hello", "heavy-report"]),
    ("tuisched simulate -c jobs.yaml hello ", ["hello", "heavy-report", "other"]),
    ("tuisched next ", ["a"]),  # no -c: the configuration every command finds
    ("tuisched run -c nosuch.yaml ", []),  # an error says nothing
]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completes_job_names_from_the_configuration_on_the_line(tmp_path: Path) -> None:
    script, env = _completing(tmp_path, "bash")
    probe = [f"source {script} || exit 3",
             "function=$(complete -p tuisched | sed 's/.* -F \\([^ ]*\\) .*/\\1/')"]  # fmt: skip
    for line, _ in JOB_LINES:
        words = " ".join(f'"{word}"' for word in line.split(" "))
        probe += [
            f"COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); COMPREPLY=()",
            f'COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}',
            '$function tuisched "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"',
            'echo "${COMPREPLY[*]}"',
        ]
    done = subprocess.run(["bash", "--norc", "-c", "\n".join(probe)], capture_output=True,
                          text=True, timeout=60, check=False, cwd=tmp_path, env=env)  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [" ".join(names) for _, names in JOB_LINES]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="no zsh")
def test_zsh_completes_job_names_from_the_configuration_on_the_line(tmp_path: Path) -> None:
    """A real interactive zsh (on a pseudo-terminal, through zsh/zpty) presses Tab."""
    script, env = _completing(tmp_path, "zsh")
    functions = tmp_path / "zfunc"
    functions.mkdir()
    script.rename(functions / "_tuisched")  # as docs/service.md installs it
    unique = [(line, names[0]) for line, names in JOB_LINES if len(names) == 1]
    probe = [
        "zmodload zsh/zpty",
        "zpty z 'PS1=\"> \" zsh -f -i'",
        f'zpty -w z "fpath=({functions} \\$fpath); autoload -U compinit && compinit -u -D"',
        "zpty -w z 'tuisched() { print -r -- \"LINE: $*\" }'",  # what Enter runs: the line
        *[f"zpty -w -n z $'{line}\\t\\n'" for line, _ in unique],
        "zpty -w z 'print END'",
        "out=''; while zpty -r z chunk; do out+=$chunk; [[ $chunk == END* ]] && break; done",
        "print -rl -- ${(M)${(f)out//$'\\r'/}:#LINE:*}",
        "zpty -d z",
    ]
    done = subprocess.run(["zsh", "-f", "-c", "\n".join(probe)], capture_output=True,
                          text=True, timeout=60, check=False, cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = [line.removeprefix("LINE: ").strip() for line in done.stdout.splitlines()]
    assert shown == [f"{line.removeprefix('tuisched ')}{name[len(line.split(' ')[-1]):]}"
                     for line, name in unique], done.stdout  # fmt: skip


@pytest.mark.skipif(shutil.which("fish") is None, reason="no fish")
def test_fish_completes_job_names_from_the_configuration_on_the_line(tmp_path: Path) -> None:
    script, env = _completing(tmp_path, "fish")
    lines = [*JOB_LINES, ("tuisched logs --config=jobs.yaml ot", ["other"])]
    probe = [f"source {script}"]
    for line, _ in lines:
        probe += [f"complete -C'{line}' | string replace -r '\\t.*' ''", "echo ."]
    done = subprocess.run(["fish", "--no-config", "-c", "\n".join(probe)], capture_output=True,
                          text=True, timeout=60, check=False, cwd=tmp_path, env=env)  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    answers = [block.split() for block in done.stdout.split(".\n")[:-1]]
    assert answers == [names for _, names in lines]


def test_jobs_names_reads_only_the_file_and_loads_only_pyyaml(tmp_path: Path) -> None:
    """What a Tab runs: the names, in the file's order, from a file not even validated."""
    (tmp_path / "jobs.yaml").write_text(JOBS + "  broken: {command: [/bin/true]}\n")
    done = tuisched("jobs", "--names", "-c", "jobs.yaml", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "hello\nheavy-report\nother\nbroken\n")
    loaded = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tuisched", "jobs", "--names", "-c",
         "jobs.yaml"], capture_output=True, text=True, timeout=30, check=False, cwd=tmp_path,
    )  # fmt: skip
    modules = {line.split("|")[-1].strip() for line in loaded.stderr.splitlines()}
    heavy = {"asyncio", "sqlalchemy", "textual", "jinja2", "apscheduler", "aiohttp",
             "tuisched.domain.config", "tuisched.runtime", "shtab"}  # fmt: skip
    assert not {m for m in modules if m in heavy or m.split(".")[0] in heavy - {"tuisched"}}
    assert "yaml" in modules
    missing = tuisched("jobs", "--names", "-c", "nosuch.yaml", cwd=tmp_path)
    assert (missing.returncode, missing.stdout) == (78, "")
    assert missing.stderr == "tuisched: cannot read nosuch.yaml: No such file or directory\n"
    (tmp_path / "bad.yaml").write_text("jobs: [\n")
    bad = tuisched("jobs", "--names", "-c", "bad.yaml", cwd=tmp_path)
    assert (bad.returncode, bad.stderr) == (78, "tuisched: bad.yaml:2: not valid YAML: "
                                                "did not find expected node content\n")  # fmt: skip


def test_completion_refuses_an_unknown_shell(tmp_path: Path) -> None:
    done = tuisched("completion", "tcsh", cwd=tmp_path)
    assert done.returncode == 2
    assert "invalid choice: 'tcsh'" in done.stderr


# --- the container ------------------------------------------------------------------------


def _dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, (KEYWORD, arguments), continuation lines joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in (REPO / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, rest = (pending + line).partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        pending = ""
    return instructions


def test_the_dockerfile_runs_headless_as_a_non_root_user_with_state_in_a_volume() -> None:
    instructions = _dockerfile()
    keywords = [keyword for keyword, _ in instructions]
    users = [rest for keyword, rest in instructions if keyword == "USER"]
    assert users
    assert users[-1] not in ("root", "0")
    assert keywords.index("USER") < keywords.index("ENTRYPOINT")
    entrypoint = json.loads(dict(instructions)["ENTRYPOINT"])
    command = json.loads(dict(instructions)["CMD"])
    assert [*entrypoint, *command] == ["tuisched", "--no-ui"]
    volumes = json.loads(dict(instructions)["VOLUME"])
    env = dict(instructions)["ENV"]
    # The default state_dir is platformdirs' $XDG_STATE_HOME/tuisched: the volume.
    assert "XDG_STATE_HOME=/var/lib" in env.split()
    assert volumes == ["/var/lib/tuisched"]
    for keyword, rest in instructions:
        if keyword == "COPY":
            for source in rest.split()[:-1]:
                assert (REPO / source).exists(), source
