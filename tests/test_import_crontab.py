"""`tuisched import-crontab`: real-world crontabs (tests/data/crontabs) turned into jobs.

The corpus holds Debian's /etc/crontab and /etc/cron.d/e2scrub_all as shipped,
a typical user crontab (names, steps, nicknames, redirections) and odd ones
(@reboot, %, SHELL, CRON_TZ, RANDOM_DELAY, MAILTO, Quartz rules, broken lines).
Each output must be a configuration tuisched accepts, whose jobs fire at the
crontab's times.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from tuisched.domain.config.crontab import derive_name, read_crontab
from tuisched.domain.model import CommandSpec, Config
from tuisched.runtime.configfiles import parse_config

from . import preloaded

CORPUS = Path(__file__).parent / "data" / "crontabs"
SETTINGS = "settings: {timezone: UTC, state_dir: state}\n"


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return preloaded.run(["import-crontab", *args], input=stdin)


def _accepted(yaml_text: str, tmp_path: Path) -> Config:
    """The imported jobs as tuisched reads them (it refuses what it would not run)."""
    path = tmp_path / "tuisched.yaml"
    path.write_text(SETTINGS + yaml_text)
    return parse_config(path.read_text(), path)


def _shell(config: Config, name: str) -> str | None:
    kind = config.jobs[name].kind
    assert isinstance(kind, CommandSpec)
    return kind.shell


# --- the corpus, end to end ------------------------------------------------------------------


def test_debians_etc_crontab(tmp_path: Path) -> None:
    done = _cli(str(CORPUS / "debian-etc-crontab"), "--system")
    assert done.returncode == 0, done.stderr
    config = _accepted(done.stdout, tmp_path)
    assert list(config.jobs) == [
        "run-parts-cron.hourly",
        "run-parts-cron.daily",
        "run-parts-cron.weekly",
        "run-parts-cron.monthly",
    ]
    daily = config.jobs["run-parts-cron.daily"]
    assert daily.schedule is not None
    assert _shell(config, "run-parts-cron.daily") == (
        "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }"
    )
    assert "entries ran as root under cron" in done.stderr
    assert done.stderr.rstrip().endswith("4 jobs imported, 0 lines not mapped")
    # the stock header's field chart is not taken for a description
    assert all(not job.description for job in config.jobs.values())


def test_a_system_file_is_recognised_when_every_entry_names_root(tmp_path: Path) -> None:
    done = _cli(str(CORPUS / "cron.d-e2scrub_all"))
    assert done.returncode == 0, done.stderr
    config = _accepted(done.stdout, tmp_path)
    assert list(config.jobs) == ["e2scrub_all_cron", "e2scrub_all"]
    assert _shell(config, "e2scrub_all") == (
        "test -e /run/systemd/system || SERVICE_MODE=1 /sbin/e2scrub_all -A -r"
    )


def test_a_typical_user_crontab_from_stdin(tmp_path: Path) -> None:
    done = _cli(stdin=(CORPUS / "user-typical").read_text())
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Imported from stdin by tuisched import-crontab.\n")
    config = _accepted(done.stdout, tmp_path)
    assert list(config.jobs) == [
        "backup", "python-manage", "standup-reminder", "curl-hc-ping.com", "certbot",
        "find-tmp", "logrotate", "python3-poll", "docker-system", "invoice", "echo",
        "echo-2", "backup-2",
    ]  # fmt: skip
    backup = config.jobs["backup"]
    assert backup.description == "nightly database dump"
    assert dict(backup.kind.env) == {"PATH": "/usr/local/bin:/usr/bin:/bin"}  # type: ignore[union-attr]
    assert _shell(config, "backup") == "/usr/local/bin/backup.sh --full >> /var/log/backup.log 2>&1"
    assert "MAILTO" not in done.stderr  # MAILTO="" only turns mail off
    words = {name: job.schedule.expr.text for name, job in config.jobs.items()}  # type: ignore[union-attr]
    assert words["standup-reminder"] == "0 9 * * mon-fri"
    assert words["logrotate"] == "@daily"
    assert words["backup-2"] == "@midnight"


def test_odd_crontab_maps_what_it_can_and_reports_the_rest(tmp_path: Path) -> None:
    done = _cli(str(CORPUS / "odd-ones"))
    assert done.returncode == 0, done.stderr
    config = _accepted(done.stdout, tmp_path)
    tar = config.jobs["tar"]
    # SHELL=/bin/bash: the command runs through bash, \% is a plain %
    assert tar.kind.argv == (  # type: ignore[union-attr]
        "/bin/bash", "-c", "tar czf $BACKUP_DIR/home-$(date +%Y-%m-%d).tgz /home",
    )  # fmt: skip
    assert tar.timezone.key == "America/New_York"  # CRON_TZ
    assert tar.jitter == timedelta(minutes=10)  # RANDOM_DELAY
    assert dict(tar.kind.env) == {"BACKUP_DIR": "/srv/backups"}  # type: ignore[union-attr]
    # the text after an unescaped % is standard input
    mail = config.jobs["mail"].kind.argv[2]  # type: ignore[union-attr,index]
    assert mail == (
        "exec <<'CRONTAB_STDIN'\nHere is the report.\nBye\nCRONTAB_STDIN\n"
        'mail -s "daily report" ops@example.com'
    )
    # Quartz rules come through as written
    schedules = {name: job.schedule.expr.text for name, job in config.jobs.items()}  # type: ignore[union-attr]
    assert schedules["month-end"] == "0 0 L * *"
    assert schedules["payroll"] == "0 8 15W * *"
    assert schedules["last-friday"] == "0 22 * * 5L"
    assert schedules["patch-tuesday"] == "0 10 * * 2#1"
    assert schedules["check-queue"] == "1-59/2 8-18 * * 1-5"
    # the same command twice gets two names
    assert {"rsync-src", "rsync-src-2"} <= set(config.jobs)
    # after an unknown CRON_TZ, the entries below keep the default zone
    assert config.jobs["echo"].timezone.key == "UTC"
    report = done.stderr.splitlines()
    expected = [
        "line 4: not mapped: cron mailed each run's output to it",
        "line 6: not mapped: @reboot runs at boot; tuisched runs jobs on a schedule only",
        "line 14: not mapped: '0 0 30 2 *' never fires",
        "line 15: not mapped: minute field '61': value 61 out of range 0-59",
        "line 16: not mapped: no command after the schedule",
        "line 19: not mapped: unknown time zone 'Not/AZone'",
        "line 21: not mapped: minute field '~': '~' is not a value",
        "note: line 9: the text after '%' is the command's standard input",
    ]
    for start in expected:
        assert any(line.startswith(start) for line in report), start
    assert report[-1] == "10 jobs imported, 7 lines not mapped"


def test_the_imported_jobs_fire_at_the_crontabs_times(tmp_path: Path) -> None:
    done = _cli(str(CORPUS / "debian-etc-crontab"), "--system")
    path = tmp_path / "tuisched.yaml"
    path.write_text(SETTINGS + done.stdout)
    shown = subprocess.run(
        [sys.executable, "-m", "tuisched", "-c", str(path), "next", "run-parts-cron.weekly",
         "-n", "2", "--now", "2026-05-01T00:00"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["2026-05-03T06:47:00+00:00", "2026-05-10T06:47:00+00:00"]


# --- nothing to map, unreadable input ------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["", "# only comments\n\n", "@reboot /usr/bin/start\nMAILTO=root\n", "61 * * * * /x\n"],
)
def test_nothing_mapped_exits_1_with_a_report(text: str) -> None:
    done = _cli("-", stdin=text)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.rstrip().endswith(
        "tuisched: import-crontab: no entry of stdin could be mapped"
    )


def test_an_unreadable_file_is_one_line_and_exit_66(tmp_path: Path) -> None:
    missing = _cli(str(tmp_path / "nope"))
    assert (missing.returncode, missing.stdout) == (66, "")
    assert missing.stderr.strip() == (
        f"tuisched: import-crontab: cannot read {tmp_path / 'nope'}: No such file or directory"
    )
    not_a_file = _cli(str(tmp_path))
    assert not_a_file.returncode == 66
    assert (
        not_a_file.stderr.strip() == f"tuisched: import-crontab: {tmp_path} is not a regular file"
    )
    assert "Traceback" not in missing.stderr + not_a_file.stderr


def test_help_describes_the_command_with_an_example() -> None:
    done = _cli("--help")
    assert done.returncode == 0
    assert "crontab -l | tuisched import-crontab" in " ".join(done.stdout.split())


# --- the reading rules, one by one -------------------------------------------------------------


def test_environment_lines_apply_to_the_entries_below_them() -> None:
    found = read_crontab(
        "0 1 * * * first\nFOO='a b'\n0 2 * * * second\nFOO=\"c\"\nSHELL=/bin/sh\n0 3 * * * third\n"
    )
    env = [dict(job.env) for job in found.jobs]
    assert env == [{}, {"FOO": "a b"}, {"FOO": "c"}]
    assert all(job.shell is None for job in found.jobs)


def test_cron_tz_can_be_unset_again() -> None:
    found = read_crontab("CRON_TZ=Asia/Tokyo\n0 1 * * * a\nCRON_TZ=\n0 1 * * * b\n")
    assert [job.timezone for job in found.jobs] == ["Asia/Tokyo", None]


def test_percent_escapes_and_standard_input() -> None:
    (plain, piped) = read_crontab(
        "0 1 * * * date +\\%s > /tmp/now\n0 2 * * * cat > /tmp/x%line one%line two\n"
    ).jobs
    assert plain.command == "date +%s > /tmp/now"
    assert piped.command == (
        "exec <<'CRONTAB_STDIN'\nline one\nline two\nCRONTAB_STDIN\ncat > /tmp/x"
    )
    assert piped.name == "cat"


def test_a_system_entry_without_a_command_is_reported() -> None:
    found = read_crontab("0 1 * * * root\n", system=True)
    assert found.jobs == ()
    assert found.unmapped[0].reason == "a system crontab entry needs a user and then a command"


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("/usr/local/bin/backup.sh --full", "backup"),
        ("cd / && run-parts --report /etc/cron.daily", "run-parts-cron.daily"),
        ("FOO=1 nice -n 10 python3 /srv/job.py", "python3-job"),
        ("timeout 30m flock -n /tmp/l.lock rsync -a /a /b", "rsync-a"),
        ("sudo -u www-data php /var/www/artisan schedule:run", "php-artisan"),
        ("curl -s https://example.com/ping", "curl-example.com"),
        ("[ -x /usr/bin/thing ] && /usr/bin/thing", "thing"),
        ("test -x /x || exit 0", "exit"),
        ("echo 'unbalanced", "echo"),
        ("$HOME/bin/über-job", "uber-job"),
        ("cd /", "job"),
        ("self", "job"),
    ],
)
def test_names_come_from_the_program(command: str, name: str) -> None:
    assert derive_name(command) == name


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "crontab"
    os.mkfifo(fifo)
    done = _cli(str(fifo))
    assert done.returncode == 66
    assert done.stderr.strip() == f"tuisched: import-crontab: {fifo} is not a regular file"


def test_nicknames_in_a_system_crontab_keep_their_user_apart() -> None:
    (job,) = read_crontab("@daily root /usr/sbin/logrotate /etc/logrotate.conf\n").jobs
    assert (job.cron, job.command, job.name) == (
        "@daily", "/usr/sbin/logrotate /etc/logrotate.conf", "logrotate",
    )  # fmt: skip


def test_many_entries_of_one_command_get_numbered_names_each_once() -> None:
    # A name that an entry of its own already takes ("backup-3") is skipped in the count.
    text = "0 1 * * * /opt/backup-3\n" + "*/5 * * * * /usr/bin/backup --x\n" * 5_000
    names = [job.name for job in read_crontab(text).jobs]
    assert names[:4] == ["backup-3", "backup", "backup-2", "backup-4"]
    assert len(set(names)) == len(names) == 5_001
    assert names[-1] == "backup-5001"


def test_control_characters_are_reported_and_never_reach_the_yaml(tmp_path: Path) -> None:
    text = (
        "# colours \x1b[31mhere\n"
        '*/5 * * * * echo "a\x1b[31mred"\n'
        "*/5 * * * * echo b\x00c\n"
        "0 * * * * echo ok\n"
    )
    found = read_crontab(text)
    assert [job.command for job in found.jobs] == ["echo ok"]
    assert [(line.line, line.reason) for line in found.unmapped] == [
        (2, "control character U+001B in the line: not imported"),
        (3, "control character U+0000 in the line: not imported"),
    ]
    done = _cli(stdin=text)
    assert done.returncode == 0, done.stderr
    assert "control character U+0000" in done.stderr
    config = _accepted(done.stdout, tmp_path)
    assert list(config.jobs) == ["echo"]
