"""The command line's stable contract (SPEC R20): output formats and exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from tuisched.frontends.cli import main
from tuisched.frontends.exits import EX_CONFIG

from . import preloaded
from .conftest import REPO, SAMPLE

Write = Callable[[str], Path]


def run(*argv: str) -> tuple[int, str, str]:
    """Run `python -m tuisched` for real; return (status, stdout, stderr)."""
    done = preloaded.run(argv, cwd=REPO, timeout=30)
    return done.returncode, done.stdout, done.stderr


HEAVY = (
    "sqlalchemy", "aiohttp", "apscheduler", "textual", "jinja2", "ruamel", "watchfiles",
    "psycopg", "asyncio", "tuisched.domain.events", "tuisched.domain.config.config",
    "tuisched.runtime.configfiles", "tuisched.runtime.runtime", "tuisched.runtime.engine",
    "tuisched.runtime.store", "tuisched.runtime.control.remote", "tuisched.runtime.control.local",
    "tuisched.domain.config.hints",
)  # fmt: skip
"""What no verb against a running scheduler needs: the scheduler's parts, its HTTP library,
an event loop, the configuration's validation, the hints for a file that does not read."""

LOADED = """
import json, sys
from tuisched.frontends.cli import main
try:
    status = main(sys.argv[1:])
except SystemExit as exit:
    status = exit.code
print(json.dumps([status, sorted(sys.modules)]))
"""


def loaded_by(*argv: str) -> set[str]:
    """The modules a fresh interpreter holds after `tuisched ARGV`, which must exit 0."""
    done = subprocess.run(
        [sys.executable, "-c", LOADED, *argv], cwd=REPO, capture_output=True, text=True,
        timeout=30, check=False,
    )  # fmt: skip
    status, modules = json.loads(done.stdout.splitlines()[-1])
    assert status == 0, done.stderr
    return set(modules)


def heavy(modules: set[str], names: Sequence[str] = HEAVY) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def call(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the command line in-process; return (status, stdout, stderr)."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_validate_sample_prints_ok_with_counts() -> None:
    status, out, _ = run("validate", "-c", str(SAMPLE))
    assert (status, out) == (0, "OK: 16 jobs, 2 groups\n")


def test_validate_prints_one_located_line_per_problem(write_config: Write) -> None:
    path = write_config(
        """
        jobs:
          a:
            command: [/bin/true]
            shedule: manual
          b:
            command: [/bin/true]
            schedule: {cron: "0 5 * *"}
        """
    )
    status, out, err = run("validate", "-c", str(path))
    assert status == 1
    assert err == ""
    lines = out.splitlines()
    assert lines, "no problem printed"
    pattern = re.compile(rf"{re.escape(str(path))}:\d+: job '(a|b)': .+")
    assert all(pattern.fullmatch(line) for line in lines), out
    assert any(line.startswith(f"{path}:4: job 'a': unknown key 'shedule'") for line in lines)
    assert any(line.startswith(f"{path}:7: job 'b': schedule.cron") for line in lines)


def test_next_lists_slots_with_offsets_in_the_jobs_zone(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = call(
        capsys, "next", "month-end", "-n", "4", "--now", "2026-01-31T07:00", "-c", str(SAMPLE)
    )
    assert status == 0
    assert out.splitlines() == [
        "2026-02-28T06:00:00+01:00",
        "2026-03-31T06:00:00+02:00",
        "2026-04-30T06:00:00+02:00",
        "2026-05-31T06:00:00+02:00",
    ]


def test_next_accepts_an_offset_and_defaults_to_five(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = call(
        capsys, "-c", str(SAMPLE), "next", "heartbeat", "--now", "2026-05-07T07:10:30+00:00"
    )
    assert status == 0
    assert out.splitlines() == [f"2026-05-07T09:{m}:00+02:00" for m in (11, 12, 13, 14, 15)]


def test_next_prints_nothing_for_jobs_without_future_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for job, now in (("compress", "2026-05-07T00:00"), ("migrate-archive", "2027-01-01T00:00")):
        status, out, _ = call(capsys, "next", job, "--now", now, "-c", str(SAMPLE))
        assert (status, out) == (0, ""), job


def test_unknown_job_is_a_clear_error_without_traceback() -> None:
    status, out, err = run("next", "heartbeet", "-c", str(SAMPLE))
    assert status == 1
    assert out == ""
    assert "no job named 'heartbeet'" in err
    assert "did you mean 'heartbeat'?" in err
    assert "Traceback" not in err


def test_bad_now_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["next", "heartbeat", "--now", "yesterday", "-c", str(SAMPLE)])
    assert exited.value.code == 2
    assert "--now: bad date-time 'yesterday'" in capsys.readouterr().err


def test_upstream_prints_the_required_slots(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = call(
        capsys, "upstream", "daily-report", "--at", "2026-05-07T06:00", "-c", str(SAMPLE)
    )
    assert (status, out) == (0, "export 2026-05-07T01:30:00+02:00\n")
    status, out, _ = call(
        capsys, "upstream", "hourly-rollup", "--at", "2026-05-07T10:05", "-c", str(SAMPLE)
    )
    assert (status, out) == (0, "hourly-rollup 2026-05-07T09:05:00+02:00\n")


def test_jobs_json_lists_every_job(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = call(capsys, "jobs", "--json", "-c", str(SAMPLE))
    assert status == 0
    rows = {row["name"]: row for row in json.loads(out)}
    assert len(rows) == 16
    assert rows["legacy-sync"]["state"] == "disabled"
    assert rows["legacy-sync"]["next_run"] is None
    assert rows["compress"]["schedule"] == "after 'export' succeeds (+10s)"
    assert rows["heartbeat"]["kind"] == "command"
    assert rows["rebuild-index"]["kind"] == "python"
    assert rows["wait-for-drop"]["kind"] == "wait_for"
    assert rows["heartbeat"]["next_run"] is not None
    assert set(rows["export"]) >= {"name", "kind", "schedule", "next_run", "state", "groups"}


def test_jobs_table_has_a_header_and_a_row_per_job_each_with_its_why(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    whys = {row["name"]: row["why"] for row in json.loads(call(capsys, "jobs", "--json",
                                                               "-c", str(SAMPLE))[1])}  # fmt: skip
    status, out, _ = call(capsys, "jobs", "-c", str(SAMPLE))
    lines = out.splitlines()
    assert status == 0
    assert lines[0].split()[:4] == ["NAME", "KIND", "STATE", "NEXT"]
    rows = [i for i, line in enumerate(lines) if not line.startswith(" ")][1:]
    assert [lines[i].split()[0] for i in rows] == list(whys)  # a row per job, in order
    for row, end in zip(rows, [*rows[1:], len(lines)], strict=True):
        said = lines[row + 1 : end]  # the job's why: indented, wrapped at 80 columns
        assert said[0].startswith("  why: ")
        assert all(len(line) <= 80 for line in said)
        assert " ".join(line.strip() for line in said) == f"why: {whys[lines[row].split()[0]]}"


def test_a_bad_config_exits_78_for_commands_other_than_validate(write_config: Write) -> None:
    path = write_config("jobs:\n  a: {command: [/bin/true]}\n")
    status, out, err = run("jobs", "-c", str(path))
    assert status == EX_CONFIG
    assert out == ""
    assert f"{path}:2: job 'a': a job needs a trigger source" in err
    assert "Traceback" not in err


def test_config_comes_from_the_environment_then_the_working_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUISCHED_CONFIG", str(SAMPLE))
    assert call(capsys, "validate")[1] == "OK: 16 jobs, 2 groups\n"
    monkeypatch.delenv("TUISCHED_CONFIG")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tuisched.yaml").write_text(
        "jobs:\n  a: {command: [/bin/true], schedule: manual}\n"
    )
    assert call(capsys, "validate")[1] == "OK: 1 job, 0 groups\n"


@pytest.mark.parametrize(
    "command", [[], ["validate"], ["next"], ["upstream"], ["jobs"], ["history"], ["run"]]
)
def test_every_command_has_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    assert exited.value.code == 0
    assert "-c PATH, --config PATH" in capsys.readouterr().out


def test_the_command_line_never_imports_textual() -> None:
    # The headless runtime and every non-console command in a fresh interpreter.
    script = f"""
import sys
import tuisched.frontends.headless, tuisched.runtime.runtime, tuisched.frontends.foreground
from tuisched.frontends.cli import main
for argv in (["validate"], ["jobs", "--json"], ["next", "heartbeat"], ["history"],
             ["upstream", "daily-report", "--at", "2026-05-07T06:00"]):
    main([*argv, "-c", {str(SAMPLE)!r}])
loaded = sorted(m for m in sys.modules if m == "textual" or m.startswith("textual."))
assert not loaded, loaded
print("clean")
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("clean\n")


def test_run_streams_output_records_history_and_exits_with_the_outcome(
    tmp_path: Path,
) -> None:
    from .runtime_fixtures import write_config

    config = write_config(
        tmp_path,
        """
        hello: {command: "echo hello; echo '[bold]plain[/bold]'", schedule: manual}
        failing: {command: "echo bad >&2; exit 3", schedule: manual}
        missing: {command: [/nonexistent/program], schedule: manual}
        """,
    )
    status, out, err = run("run", "hello", "-c", str(config))
    assert (status, out) == (0, "hello\n[bold]plain[/bold]\n")
    assert "hello#" in err
    assert "SUCCESS" in err
    status, out, _ = run("run", "failing", "-c", str(config))
    assert (status, out) == (3, "bad\n")
    status, _, err = run("run", "missing", "-c", str(config))
    assert status == 127
    assert "/nonexistent/program" in err
    status, out, _ = run("history", "--json", "-n", "2", "-c", str(config))
    assert status == 0
    runs = json.loads(out)
    assert [r["job"] for r in runs] == ["missing", "failing"]
    assert (runs[0]["state"], runs[0]["result"]) == ("NOT_STARTED", "launch_failed")
    assert (runs[1]["state"], runs[1]["exit_code"], runs[1]["trigger"]) == ("FAILED", 3, "manual")
    needed = {"run_id", "job", "slot", "trigger", "state", "result", "status", "exit_code"}
    assert needed | {"queued_at", "started_at", "ended_at"} <= set(runs[1])
    assert runs[1]["slot"] is None
    assert runs[1]["started_at"].endswith("+00:00")
    status, out, _ = run("history", "hello", "-c", str(config))
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["RUN", "ID", "JOB"]
    assert len(lines) == 2
    assert " hello " in lines[1]
    audit = (tmp_path / "state" / "audit.log").read_text().splitlines()
    assert len(audit) == 3
    assert audit[0].startswith("hello | ")
    assert audit[0].split(" | ")[3:] == ["completed", "exit 0: [bold]plain[/bold]"]


def test_run_prints_every_line_of_a_run_that_prints_fast(tmp_path: Path) -> None:
    """An output event carries the newest lines of a burst only; `run` prints them all
    (it printed the last ~2,000 of 200,000 lines), a thread's output too."""
    from .runtime_fixtures import write_config

    (tmp_path / "counting.py").write_text(
        "def main():\n    print('\\n'.join(str(i) for i in range(1, 50001)))\n"
    )
    config = write_config(
        tmp_path,
        """
        many: {command: "seq 1 200000", schedule: manual}
        counting: {python: "counting:main", isolation: thread, schedule: manual}
        """,
    )
    status, out, err = run("run", "many", "-c", str(config))
    assert status == 0, err
    assert out == "".join(f"{i}\n" for i in range(1, 200001))
    status, out, err = run("run", "counting", "-c", str(config))
    assert status == 0, err
    assert out == "".join(f"{i}\n" for i in range(1, 50001))


def test_history_and_stats_print_durations_in_one_style(tmp_path: Path) -> None:
    """A run of a few milliseconds reads `4.2ms`, never `0.0042s` (issue 27)."""
    from datetime import timedelta

    from tuisched.domain.schedule.duration import format_elapsed

    from .runtime_fixtures import write_config

    job = "quick: {command: [sleep, '0.02'], schedule: manual}"  # the job sleeps, not the test
    config = str(write_config(tmp_path, job))
    assert run("run", "quick", "-c", config)[0] == 0
    seconds = json.loads(run("history", "--json", "-c", config)[1])[0]["duration"]
    assert isinstance(seconds, float)  # JSON keeps the number
    took = format_elapsed(timedelta(seconds=seconds))
    assert re.fullmatch(r"[1-9]\d*(\.\d)?(µs|ms|s)", took), took
    row = run("history", "-c", config)[1].splitlines()[1].split()
    assert row[6] == took  # RUN ID, JOB, SLOT (-), TRIGGER, STATE, RESULT, TOOK
    stats = run("stats", "-c", config)[1].splitlines()  # the history's times hold milliseconds
    for cell in stats[2].split()[5:8]:  # P50, P95, SLOWEST
        assert re.fullmatch(r"[1-9]\d*(\.\d)?ms", cell), stats


def test_history_before_anything_ran_is_empty(tmp_path: Path) -> None:
    from .runtime_fixtures import write_config

    config = write_config(tmp_path, "idle: {command: [/bin/true], schedule: manual}")
    assert run("history", "--json", "-c", str(config))[:2] == (0, "[]\n")
    assert not (tmp_path / "state" / "history.db").exists()


async def test_jobs_shows_pauses_from_the_history(tmp_path: Path) -> None:
    from .runtime_fixtures import running, write_config

    config = write_config(
        tmp_path,
        """
        tick: {command: [/bin/true], schedule: {every: 1 hour, start: 2026-01-01T00:00}}
        tock: {command: [/bin/true], schedule: {every: 1 hour, start: 2026-01-01T00:00}}
        """,
    )
    async with running(config) as (runtime, _):
        await runtime.actions.pause_job("tick")
    status, out, _ = run("jobs", "--json", "-c", str(config))
    assert status == 0
    rows = {row["name"]: row for row in json.loads(out)}
    assert (rows["tick"]["state"], rows["tick"]["next_run"]) == ("paused", None)
    assert rows["tock"]["state"] == "active"


def test_the_console_without_a_terminal_says_so_and_starts_nothing(tmp_path: Path) -> None:
    from .runtime_fixtures import listening, write_config

    config = write_config(tmp_path, "idle: {command: [/bin/true], schedule: manual}")
    needs = "tuisched: the console needs a terminal, and {} not one; run it in a terminal"
    hosting = needs + ", or `tuisched --no-ui` to run the scheduler headless\n"
    attaching = needs + " (the scheduler runs on: `tuisched status`, `jobs` and `logs` need none)\n"
    everything = "stdin, stdout and stderr are"
    assert run("-c", str(config)) == (2, "", hosting.format(everything))
    assert not (tmp_path / "state" / "tuisched.lock").exists()  # no scheduler was started
    said = subprocess.run(
        [sys.executable, "-c", LOADED, "-c", str(config)], cwd=REPO, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    status, modules = json.loads(said.stdout.splitlines()[-1])
    assert status == 2
    assert heavy(set(modules), ["textual"]) == []  # said at once, without loading the screens
    assert _on_a_terminal(config, stdin=False) == (2, hosting.format("stdin is"), "")
    assert _on_a_terminal(config, stdout=False) == (2, hosting.format("stdout is"), "")
    assert not (tmp_path / "state" / "tuisched.lock").exists()
    with listening(config):  # attaching needs a terminal as much
        assert run("attach", "-c", str(config)) == (2, "", attaching.format(everything))
        said = _on_a_terminal(config, "attach", stdout=False)
        assert said == (2, attaching.format("stdout is"), "")
        said = _on_a_terminal(config, stdout=False)  # the console finds it and would attach
        assert said == (2, attaching.format("stdout is"), "")


def _on_a_terminal(
    config: Path, *argv: str, stdin: bool = True, stdout: bool = True
) -> tuple[int, str, str]:
    """`tuisched ARGV` with stderr on a terminal, and stdin and stdout too unless told:
    (status, what the terminal shows, what went to the file that stood for stdout)."""
    far, near = os.openpty()
    out = config.parent / "out"
    with out.open("w") as file, subprocess.Popen(
        [sys.executable, "-m", "tuisched", *argv, "-c", str(config)], cwd=REPO,
        stdin=near if stdin else subprocess.DEVNULL, stdout=near if stdout else file,
        stderr=near,
    ) as console:  # fmt: skip
        os.close(near)
        status = console.wait(timeout=30)
    said = os.read(far, 4096).replace(b"\r\n", b"\n").decode()
    os.close(far)
    return status, said, out.read_text()


def test_the_version_and_the_help_load_only_the_grammar() -> None:
    for argv in (["--version"], ["--help"], ["status", "--help"]):
        modules = loaded_by(*argv)
        assert "argparse" in modules
        work = [*HEAVY, "yaml", "http", "tuisched.runtime", "tuisched.domain.views",
                "tuisched.domain.runs", "tuisched.domain.errors"]  # fmt: skip
        loaded = heavy(modules, work)
        assert loaded == [], argv


def test_commands_that_read_the_file_load_no_scheduler(tmp_path: Path) -> None:
    from .runtime_fixtures import write_config

    no_scheduler = ["sqlalchemy", "aiohttp", "apscheduler", "textual", "ruamel", "http",
                    "tuisched.runtime.runtime", "tuisched.runtime.engine", "tuisched.runtime.store",
                    "tuisched.runtime.configsource", "tuisched.domain.events"]  # fmt: skip
    for argv in (["validate"], ["next", "heartbeat"],
                 ["simulate", "--from", "2026-05-07", "--to", "2026-05-08"],
                 ["upstream", "daily-report", "--at", "2026-05-07T06:00"]):  # fmt: skip
        modules = loaded_by(*argv, "-c", str(SAMPLE))
        assert "tuisched.domain.config.config" in modules, argv  # it did read the file
        assert heavy(modules, no_scheduler) == [], argv
    config = write_config(tmp_path, "idle: {command: [/bin/true], schedule: manual}")
    modules = loaded_by("jobs", "-c", str(config))  # no scheduler runs: what it left
    assert "tuisched.runtime.control.offline" in modules
    engine = ["aiohttp", "apscheduler", "textual", "ruamel", "tuisched.runtime.runtime",
              "tuisched.runtime.engine"]  # fmt: skip
    assert heavy(modules, engine) == []  # the history's SQLAlchemy, not the engine


def test_a_run_and_the_offline_verbs_load_only_what_they_use(tmp_path: Path) -> None:
    """`run` of a command job needs the engine, but no webhook client, metrics, mail,
    control server or screen; `history`, `logs` and `jobs` with no scheduler read the
    files: SQLAlchemy, but no engine, runner, history writer, HTTP library or screen."""
    from .runtime_fixtures import write_config

    config = write_config(tmp_path, "hello: {command: [echo, hello], schedule: manual}")
    modules = loaded_by("run", "hello", "-c", str(config))
    assert "tuisched.runtime.engine.engine" in modules  # it did run the job itself
    unused = ["aiohttp", "prometheus_client", "smtplib", "textual",
              "tuisched.runtime.control.server", "tuisched.runtime.metrics"]  # fmt: skip
    assert heavy(modules, unused) == []
    offline = ["apscheduler", "aiohttp", "textual", "watchfiles", "tuisched.runtime.engine",
               "tuisched.runtime.runtime", "tuisched.runtime.control.local",
               "tuisched.runtime.execution.command", "tuisched.runtime.execution.forking",
               "tuisched.runtime.store.writer"]  # fmt: skip
    for argv in (["history", "hello", "--json"], ["logs", "hello"], ["jobs"]):
        modules = loaded_by(*argv, "-c", str(config))
        assert "tuisched.runtime.control.offline" in modules, argv  # it read the files
        assert heavy(modules, offline) == [], argv


def test_the_grammar_names_what_the_work_knows() -> None:
    """Choices the parser lists without loading the modules that define them."""
    from tuisched.domain.views import MissedChoice
    from tuisched.frontends import operations
    from tuisched.frontends.cli import STATS_SORTS, _parser
    from tuisched.frontends.stats import SORTS
    from tuisched.frontends.verbs import MISSED_CHOICES

    assert tuple(SORTS) == STATS_SORTS
    commands = [action for action in _parser()._actions if action.dest == "==SUPPRESS=="]
    funcs = [parser.get_default("func") for parser in commands[0].choices.values()]
    verbs = [f for f in funcs if getattr(f, "__module__", "") == "tuisched.frontends.verbs"]
    assert len(verbs) >= 9
    for verb in verbs:
        assert callable(getattr(operations, verb.__name__)), verb.__name__
    assert tuple(choice.value for choice in MissedChoice) == MISSED_CHOICES
