"""Alerts end to end: a real runtime, real jobs, a real SMTP server on loopback."""

from __future__ import annotations

import json
from pathlib import Path

from tuisched.domain.events import AlertSent, RunFinished, RunNotStarted

from .runtime_fixtures import running, write_config
from .smtp_fixtures import smtp_server


def _config(tmp_path: Path, port: int) -> Path:
    (tmp_path / "failed.txt").write_text(
        "{{ job.name }} failed with exit code {{ run.exit_code }} on {{ hostname }}\n"
        "groups: {{ job.groups | join(',') }}\n{{ run.output_tail }}\n"
    )
    path = write_config(
        tmp_path,
        """
        extract:
          command: "echo 'disk full' >&2; exit 3"
          schedule: manual
          alerts:
            failed: {to: [ops@example.org], template: failed.txt}
        load: {command: [/bin/true], after: extract}
        report: {command: [/bin/true], schedule: manual}
        """,
    )
    text = path.read_text().replace(
        "jobs:",
        f"email:\n  smtp: {{host: 127.0.0.1, port: {port}, timeout: 5s}}\n"
        "  from: tuisched@example.org\n"
        '  subject: "[tuisched] {{ job.name }} {{ event }}"\n'
        "  default_template: failed.txt\n"
        "groups:\n  nightly:\n    jobs: [extract, load]\n"
        "    alerts:\n      not_started: {to: [dev@example.org]}\n"
        "jobs:",
    )
    path.write_text(text)
    return path


async def test_a_failed_job_and_its_cascade_send_their_alerts(tmp_path: Path) -> None:
    with smtp_server() as server:
        async with running(_config(tmp_path, server.port)) as (runtime, events):
            runtime.actions.run_now("extract")
            runtime.actions.run_now("report")
            await events.wait_for(RunNotStarted, lambda e: e.run.job == "load")
            await events.wait_for(RunFinished, lambda e: e.run.job == "report")
            sent = await events.wait_for(AlertSent, count=2)
        messages = {m["Subject"]: m for m in server.handler.messages}
    assert {(e.job, e.alert) for e in sent} == {("extract", "failed"), ("load", "not_started")}
    failed = messages["[tuisched] extract failed"]
    assert failed["To"] == "ops@example.org"
    body = failed.get_content().replace("\r\n", "\n")  # SMTP lines end in CRLF
    assert body.startswith(f"extract failed with exit code 3 on {runtime.node}\ngroups: nightly\n")
    assert "disk full" in body
    assert messages["[tuisched] load not_started"]["To"] == "dev@example.org"
    assert (
        len(server.handler.messages) == 2
    )  # report has no alert, and extract's group none for failed


def test_run_fires_alerts_and_dependants_only_when_asked(tmp_path: Path) -> None:
    from .test_cli import run

    with smtp_server() as server:
        config = _config(tmp_path, server.port)
        status, _, err = run("run", "extract", "-c", str(config))
        assert status == 3
        assert "load" not in err
        assert server.handler.messages == []
        status, _, err = run("run", "extract", "--fire-events", "-c", str(config))
        assert status == 3
        assert "load: NOT_STARTED (extract#" in err
        subjects = sorted(m["Subject"] for m in server.handler.messages)
    assert subjects == ["[tuisched] extract failed", "[tuisched] load not_started"]


def test_run_with_fire_events_runs_dependants_in_the_foreground(tmp_path: Path) -> None:
    from .test_cli import run

    config = write_config(
        tmp_path,
        """
        first: {command: [echo, one], schedule: manual}
        second: {command: [echo, two], after: {job: first, delay: 0s}}
        never: {command: [echo, three], after: {job: first, on: failure}}
        """,
    )
    status, out, err = run("run", "first", "--fire-events", "-c", str(config))
    assert (status, out) == (0, "one\ntwo\n")
    assert "never: NOT_STARTED (first#" in err
    status, out, _ = run("history", "--json", "-c", str(config))
    triggers = {row["job"]: row["trigger"] for row in json.loads(out)}
    assert triggers == {"first": "manual", "second": "dependency", "never": "dependency"}
