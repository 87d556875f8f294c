"""ConfigDocument edits only what it is asked to, and atomic_write never leaves a torn file."""

from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path

import pytest

from tuisched.domain.errors import JobActionError, TuischedError, UnknownJobError
from tuisched.domain.model import CommandSpec, CronSchedule, Outcome
from tuisched.runtime.configfiles import parse_config
from tuisched.runtime.document import ConfigDocument, atomic_write, guess_indent

SAMPLE = Path(__file__).parent.parent / "sample_config" / "tuisched.yaml"

# Four-space mappings, sequences indented by two under their key, comments everywhere.
FOUR_SPACES = """\
# Hand-written: four spaces, indented sequences.

settings:
    timezone: Europe/Paris      # the zone
    state_dir: state

x-defaults: &defaults
    priority: 3
    retries: 1

groups:
    ops:
        jobs:
          - backup              # the nightly one
          - 'prune'

jobs:
    # Before the first job.
    backup:
        <<: *defaults
        command:
          - /bin/sh
          - "-c"
          - 'echo "it''s done"'
        env: {MODE: 0755, FLAG: yes, AT: "12:30"}
        schedule:
            cron: '*/15 * * * *'   # quarter hours
            start: 2026-01-01T00:00
            stop: "2027-01-01T00:00"

    # Between jobs.
    prune:
        command: rm -rf /tmp/old   # a shell string
        after: {job: backup, on: failure}
        timeout: 10m


    # After two blank lines.
    report:
        python: tuisched.examples:sleep_briefly
        schedule: manual
        enabled: false   # kept off
# The very end.
"""

# Two-space mappings, sequences not indented under their key.
FLUSH_SEQUENCES = """\
jobs:
  build:
    command:
    - /usr/bin/make
    - all
    schedule:
      every: 1 hour   # hourly
      start: 2026-01-01T00:00
    success_codes:
    - 0
    - 2

  test:
    command: [make, test]
    after: build
"""


def _doc(text: str) -> ConfigDocument:
    return ConfigDocument(text, Path("/etc/tuisched/tuisched.yaml"))


def _changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """The lines removed from `before` and added in `after` (difflib's view)."""
    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    removed = [line[2:] for line in diff if line.startswith("- ")]
    added = [line[2:] for line in diff if line.startswith("+ ")]
    return removed, added


# --- byte equality ---------------------------------------------------------------


@pytest.mark.parametrize("text", [SAMPLE.read_text(), FOUR_SPACES, FLUSH_SEQUENCES])
def test_round_trip_without_edit_is_byte_equal(text: str) -> None:
    assert _doc(text).text() == text


@pytest.mark.parametrize("text", [SAMPLE.read_text(), FOUR_SPACES, FLUSH_SEQUENCES])
def test_replacing_every_job_with_itself_changes_nothing(text: str) -> None:
    doc = _doc(text)
    for name in list(parse_config(text, SAMPLE).jobs):
        definition = doc.job(name)
        assert definition is not None
        doc.replace_job(name, definition)
    assert doc.text() == text


def test_replace_job_changes_only_its_changed_lines_in_the_sample() -> None:
    text = SAMPLE.read_text()
    doc = _doc(text)
    export = doc.job("export")
    assert export is not None
    doc.replace_job("export", {**export, "retries": 3, "priority": 11})

    removed, added = _changed_lines(text, doc.text())

    assert removed == [
        "    retries: 2",
        "    priority: 10                 # higher leaves the queue first",
    ]
    assert added == [
        "    retries: 3",
        "    priority: 11                 # higher leaves the queue first",
    ]
    assert parse_config(doc.text(), SAMPLE).jobs["export"].priority == 11


def test_replace_job_in_a_four_space_file_keeps_every_other_byte() -> None:
    doc = _doc(FOUR_SPACES)
    backup = doc.job("backup")
    assert backup is not None
    schedule = backup["schedule"]
    assert isinstance(schedule, dict)
    env = backup["env"]
    assert isinstance(env, dict)
    doc.replace_job(
        "backup",
        {
            **backup,
            "schedule": {**schedule, "cron": "0 * * * *", "stop": "2028-01-01T00:00"},
            "env": {**env, "FLAG": "no"},
        },
    )

    removed, added = _changed_lines(FOUR_SPACES, doc.text())

    assert removed == [
        '        env: {MODE: 0755, FLAG: yes, AT: "12:30"}',
        "            cron: '*/15 * * * *'   # quarter hours",
        '            stop: "2027-01-01T00:00"',
    ]
    assert added == [
        '        env: {MODE: 0755, FLAG: no, AT: "12:30"}',
        "            cron: '0 * * * *'      # quarter hours",  # the comment keeps its column
        '            stop: "2028-01-01T00:00"',
    ]


def test_replace_job_in_a_flush_sequence_file_keeps_every_other_byte() -> None:
    doc = _doc(FLUSH_SEQUENCES)
    build = doc.job("build")
    assert build is not None
    doc.replace_job("build", {**build, "command": ["/usr/bin/make", "-j4", "all"]})

    removed, added = _changed_lines(FLUSH_SEQUENCES, doc.text())

    assert removed == []
    assert added == ["    - -j4"]


def test_job_reads_text_values_with_merged_keys() -> None:
    backup = _doc(FOUR_SPACES).job("backup")

    assert backup is not None
    assert backup["env"] == {"MODE": "0755", "FLAG": "yes", "AT": "12:30"}
    assert backup["priority"] == "3"  # from `<<: *defaults`
    assert backup["command"] == ["/bin/sh", "-c", 'echo "it\'s done"']
    assert _doc(FOUR_SPACES).job("missing") is None


def test_replace_job_overriding_a_merged_key_keeps_the_merge_line() -> None:
    doc = _doc(FOUR_SPACES)
    backup = doc.job("backup")
    assert backup is not None
    doc.replace_job("backup", {**backup, "priority": 9})

    removed, added = _changed_lines(FOUR_SPACES, doc.text())

    assert removed == []
    assert added == ["        priority: 9"]
    assert "        <<: *defaults" in doc.text()
    assert parse_config(doc.text(), SAMPLE).jobs["backup"].priority == 9


def test_replace_job_cannot_drop_a_merged_key() -> None:
    doc = _doc(FOUR_SPACES)
    backup = doc.job("backup")
    assert backup is not None
    del backup["retries"]

    with pytest.raises(JobActionError, match="'retries' comes from a '<<' merge"):
        doc.replace_job("backup", backup)


def test_removing_the_last_key_keeps_the_next_jobs_comment() -> None:
    doc = _doc(FOUR_SPACES)
    prune = doc.job("prune")
    assert prune is not None
    del prune["timeout"]
    doc.replace_job("prune", {**prune, "description": "Prunes"})

    removed, added = _changed_lines(FOUR_SPACES, doc.text())

    assert removed == ["        timeout: 10m"]
    assert added == ["        description: Prunes"]


# --- adding and deleting jobs ------------------------------------------------------


NEW_JOB = {
    "description": "Sends the report: daily",
    "command": ["/bin/echo", "a b", "it's"],
    "env": {"VERBOSE": "yes", "UMASK": "0755", "COUNT": 3, "DRY_RUN": False},
    "schedule": {"cron": "*/15 * * * *", "start": "2026-01-01T00:00"},
    "retries": 2,
    "enabled": True,
}


def test_add_job_is_read_back_as_the_intended_job() -> None:
    doc = _doc(SAMPLE.read_text())
    doc.add_job("send-report", NEW_JOB)
    doc.add_job(
        "on-failure", {"command": "echo failed", "after": {"job": "export", "on": "failure"}}
    )

    config = parse_config(doc.text(), SAMPLE)

    job = config.jobs["send-report"]
    assert job.description == "Sends the report: daily"
    assert isinstance(job.kind, CommandSpec)
    assert job.kind.argv == ("/bin/echo", "a b", "it's")
    assert dict(job.kind.env) == {
        "VERBOSE": "yes",
        "UMASK": "0755",
        "COUNT": "3",
        "DRY_RUN": "false",
    }
    assert isinstance(job.schedule, CronSchedule)
    assert job.retries == 2
    assert job.enabled
    after = config.jobs["on-failure"].after
    assert after is not None
    assert (after.job, after.on) == ("export", Outcome.FAILURE)


def test_add_job_appends_a_block_at_the_end_of_jobs_leaving_the_rest() -> None:
    doc = _doc(FOUR_SPACES)
    doc.add_job("send-report", {"command": "make report", "schedule": {"cron": "0 6 * * *"}})

    removed, added = _changed_lines(FOUR_SPACES, doc.text())

    assert removed == []
    assert added == [
        "    send-report:",
        "        command: make report",
        "        schedule:",
        "            cron: 0 6 * * *",  # quoted only where YAML needs it
    ]
    assert doc.text().endswith("            cron: 0 6 * * *\n# The very end.\n")


def test_add_job_creates_jobs_when_missing() -> None:
    doc = _doc("settings:\n  timezone: UTC\n")
    doc.add_job("one", {"command": "true", "schedule": "manual"})

    assert (
        doc.text()
        == "settings:\n  timezone: UTC\njobs:\n  one:\n    command: true\n    schedule: manual\n"
    )
    assert list(parse_config(doc.text(), SAMPLE).jobs) == ["one"]


def test_add_job_fills_an_empty_flow_jobs_mapping_in_block_style() -> None:
    doc = _doc("jobs: {}\n")
    doc.add_job("one", {"command": "true", "schedule": "manual"})

    assert doc.text() == "jobs:\n  one:\n    command: true\n    schedule: manual\n"


def test_add_existing_job_is_refused() -> None:
    doc = _doc(SAMPLE.read_text())
    with pytest.raises(JobActionError, match="'export' already exists"):
        doc.add_job("export", {"command": "true", "schedule": "manual"})


def test_delete_job_removes_it_and_its_group_memberships() -> None:
    text = SAMPLE.read_text()
    doc = _doc(text)
    doc.delete_job("export")
    doc.delete_job("compress")
    doc.delete_job("notify-dashboard")
    doc.delete_job("clean-up-after-failure")
    doc.delete_job("upload")

    assert doc.job("export") is None
    assert "    jobs: [] " not in doc.text()
    removed, _ = _changed_lines(text, doc.text())
    assert "  # A chain: export -> compress -> upload, and a fan-out from export." in removed
    assert "  # A sensor: succeeds when a file appears, fails after its timeout." in doc.text()
    nightly = doc.group("nightly")
    assert nightly is not None
    assert nightly["jobs"] == []


def test_delete_job_keeps_the_comment_introducing_the_next_job() -> None:
    text = SAMPLE.read_text()
    doc = _doc(text)
    doc.delete_job("month-end")

    removed, added = _changed_lines(text, doc.text())

    assert added == []
    assert (
        "  # Calendar steps: every month from the 31st runs on the last day of shorter months."
        in removed
    )
    assert "  # A one-off run." in doc.text()
    parse_config(doc.text(), SAMPLE)


def test_delete_first_job_loses_no_other_comment() -> None:
    doc = _doc(FOUR_SPACES)
    doc.delete_job("backup")

    assert "    # Between jobs.\n    prune:" in doc.text()
    assert "          - 'prune'\n" in doc.text()
    assert "- backup" not in doc.text()
    assert "# the nightly one" not in doc.text()  # it was backup's
    assert "x-defaults: &defaults\n" in doc.text()  # the anchor outlives its last alias


def test_replace_or_delete_missing_job_is_refused() -> None:
    doc = _doc(SAMPLE.read_text())
    with pytest.raises(UnknownJobError):
        doc.replace_job("nope", {"command": "true", "schedule": "manual"})
    with pytest.raises(UnknownJobError):
        doc.delete_job("nope")


# --- groups ------------------------------------------------------------------------


def test_add_replace_delete_group() -> None:
    text = SAMPLE.read_text()
    doc = _doc(text)
    doc.add_group("pings", {"jobs": ["heartbeat", "office-ping"], "description": "Pings"})
    assert parse_config(doc.text(), SAMPLE).groups["pings"].jobs == ("heartbeat", "office-ping")

    doc.replace_group("pings", {"jobs": ["heartbeat"], "description": "Pings"})
    removed, added = _changed_lines(text, doc.text())
    assert removed == []
    assert added == ["  pings:", "    jobs: [heartbeat]", "    description: Pings"]

    doc.delete_group("pings")
    doc.delete_group("reports")
    assert "reports:" not in doc.text()
    assert parse_config(doc.text(), SAMPLE).groups.keys() == {"nightly"}


def test_add_group_creates_groups_before_jobs() -> None:
    doc = _doc(FLUSH_SEQUENCES)
    doc.add_group("all", {"jobs": ["build", "test"]})

    assert doc.text().startswith("groups:\n  all:\n    jobs: [build, test]\njobs:\n  build:\n")


def test_group_errors() -> None:
    doc = _doc(SAMPLE.read_text())
    with pytest.raises(JobActionError, match="'nightly' already exists"):
        doc.add_group("nightly", {"jobs": []})
    with pytest.raises(JobActionError, match="no group named 'nope'"):
        doc.replace_group("nope", {"jobs": []})
    with pytest.raises(JobActionError, match="no group named 'nope'"):
        doc.delete_group("nope")


def test_unloadable_text_is_a_clear_error() -> None:
    with pytest.raises(TuischedError, match="cannot edit"):
        _doc("jobs:\n  a: [unclosed\n")
    with pytest.raises(TuischedError, match="not a mapping"):
        _doc("- a list\n")


def test_guess_indent() -> None:
    assert guess_indent(FOUR_SPACES) == (4, 4, 2)
    assert guess_indent(FLUSH_SEQUENCES) == (2, 2, 0)
    assert guess_indent(SAMPLE.read_text()) == (2, 2, 0)


# --- atomic_write ------------------------------------------------------------------


def test_atomic_write_replaces_content_and_keeps_mode(tmp_path: Path) -> None:
    path = tmp_path / "tuisched.yaml"
    path.write_text("old\n")
    path.chmod(0o640)

    atomic_write(path, "new\n")

    assert path.read_text() == "new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tuisched.yaml"]


def test_atomic_write_keeps_the_previous_content_as_backup(tmp_path: Path) -> None:
    path = tmp_path / "tuisched.yaml"
    backup = tmp_path / "tuisched.yaml.bak"
    path.write_text("first\n")
    backup.write_text("older backup\n")

    atomic_write(path, "second\n", backup=backup)

    assert path.read_text() == "second\n"
    assert backup.read_text() == "first\n"


def test_a_crash_before_the_rename_leaves_the_original(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tuisched.yaml"
    path.write_text("original\n")

    def crash(_src: object, _dst: object) -> None:
        raise OSError("simulated crash")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        atomic_write(path, "new\n", backup=tmp_path / "tuisched.yaml.bak")

    assert path.read_text() == "original\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tuisched.yaml"]


def test_atomic_write_fsyncs_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tuisched.yaml"
    path.write_text("old\n")
    folder_fds: list[int] = []
    synced: list[int] = []
    real_open, real_fsync = os.open, os.fsync

    def spy_open(file: str | os.PathLike[str], flags: int, *args: int) -> int:
        fd = real_open(file, flags, *args)
        if flags & os.O_DIRECTORY:
            folder_fds.append(fd)
        return fd

    def spy_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "fsync", spy_fsync)
    atomic_write(path, "new\n")

    assert folder_fds
    assert folder_fds[-1] in synced
    assert len(synced) >= 2  # the file, then its folder
