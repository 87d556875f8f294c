"""Backfill and the downtime ledger in cluster mode, with nodes as real processes on a
real PostgreSQL: the runs of a backfill or a decision may be taken by any node, and each
slot runs once however many nodes are asked at once (issue 16)."""

from __future__ import annotations

import itertools
import json
import subprocess
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from .test_cluster_nodes import TUISCHED, Cluster, Node, wait_until

pytestmark = pytest.mark.timeout(150)

START = '"2026-01-01T00:00:00Z"'


@pytest.fixture
def cluster(postgres: Any, tmp_path: Path) -> Any:
    made = Cluster(postgres, tmp_path)
    try:
        yield made
    finally:
        made.close()


def _job(name: str, command: str, extra: str = "", every: str = "61s") -> str:
    return (f"  {name}:\n    command: [/bin/sh, -c, '{command}']\n"
            f"    schedule: {{every: {every}, start: {START}}}\n"
            f"    overlap: queue\n{extra}")  # fmt: skip


def _window(cluster: Cluster, before: int, after: int) -> tuple[str, str]:
    """A window from `before` to `after` minutes ago, by the database's clock."""
    now: datetime = cluster.rows("SELECT now()")[0][0]
    return ((now - timedelta(minutes=before)).isoformat(),
            (now - timedelta(minutes=after)).isoformat())  # fmt: skip


def _backfill(node: Node, job: str, window: tuple[str, str]) -> subprocess.CompletedProcess[str]:
    return node.cli("backfill", job, "--from", window[0], "--to", window[1], "--json")


def _runs(cluster: Cluster, job: str, trigger: str, since: datetime) -> list[tuple[Any, ...]]:
    """(slot, attempt, state, owner, started_at, ended_at) of the job's runs made since."""
    return cluster.rows(
        "SELECT slot, attempt, state, owner, started_at, ended_at FROM tuisched_runs "
        "WHERE job = %s AND trigger = %s AND created_at >= %s ORDER BY slot, attempt",
        job, trigger, since,
    )  # fmt: skip


def _settled(cluster: Cluster, job: str, trigger: str, since: datetime, count: int) -> None:
    """Wait until `count` runs of the job were made since, all ended."""
    wait_until(lambda: len(rows := _runs(cluster, job, trigger, since)) >= count
               and all(row[2] not in ("due", "running") for row in rows), within=60)  # fmt: skip


def _in_slot_order(rows: list[tuple[Any, ...]]) -> None:
    """Each run started once the one of the slot before had ended (none overlapped)."""
    for before, after in itertools.pairwise(rows):
        assert after[4] >= before[5], f"{after[0]} started before {before[0]} ended"


def test_a_backfill_runs_on_every_node_in_slot_order_and_a_failed_slot_runs_again(
    cluster: Cluster, tmp_path: Path
) -> None:
    flag = tmp_path / "fail"
    flag.touch()
    jobs = _job("etl", f"if [ -e {flag} ]; then exit 1; fi; sleep 0.2")
    a, b = cluster.node(jobs, name="a"), cluster.node(jobs, name="b")
    cluster.alive(2)
    window = _window(cluster, 6, 1)
    since = cluster.rows("SELECT now()")[0][0]
    done = _backfill(a, "etl", window)
    assert done.returncode == 0, done.stderr
    slots = json.loads(done.stdout)["slots"]
    assert len(slots) >= 4, done.stdout
    _settled(cluster, "etl", "backfill", since, len(slots))
    failed = _runs(cluster, "etl", "backfill", since)
    assert [row[2] for row in failed] == ["failed"] * len(slots)
    _in_slot_order(failed)

    flag.unlink()  # fixed: the same window again, from the other node
    again = cluster.rows("SELECT now()")[0][0]
    done = _backfill(b, "etl", window)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["slots"] == slots  # failed slots are run again
    _settled(cluster, "etl", "backfill", again, len(slots))
    fixed = _runs(cluster, "etl", "backfill", again)
    assert [row[2] for row in fixed] == ["success"] * len(slots)
    _in_slot_order(fixed)
    # Slots 61 s apart prefer each node in turn: both ran some, each node's sequence heard
    # the ends of the runs the other took.
    owners = Counter(row[3] for row in failed + fixed)
    assert len(owners) == 2, owners

    nothing = _backfill(a, "etl", window)
    assert nothing.returncode == 1
    assert "needs a run" in nothing.stderr
    for node in (a, b):
        assert node.stop() == 0, node.text()[-2000:]


def test_two_nodes_asked_to_backfill_one_window_at_once_run_each_slot_once(
    cluster: Cluster,
) -> None:
    jobs = _job("etl", "sleep 0.2")
    a, b = cluster.node(jobs, name="a"), cluster.node(jobs, name="b")
    cluster.alive(2)
    window = _window(cluster, 7, 1)
    since = cluster.rows("SELECT now()")[0][0]
    asked = [subprocess.Popen(
        [*TUISCHED, "-c", str(node.path), "backfill", "etl", "--from", window[0], "--to",
         window[1], "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**node_env()},
    ) for node in (a, b)]  # fmt: skip
    answers = [process.communicate(timeout=30) for process in asked]
    assert [process.returncode for process in asked] == [0, 0], answers
    # A slot one node offered already is left out of the other's plan: count them all.
    count = len({slot for out, _ in answers for slot in json.loads(out)["slots"]})
    assert count >= 5
    _settled(cluster, "etl", "backfill", since, count)
    time.sleep(2)  # a second run of a slot would be due by now
    rows = _runs(cluster, "etl", "backfill", since)
    per_slot = Counter(row[0] for row in rows)
    assert len(per_slot) == count, per_slot
    assert set(per_slot.values()) == {1}, per_slot
    assert {row[2] for row in rows} == {"success"}
    for node in (a, b):
        assert node.stop() == 0, node.text()[-2000:]


def test_a_backfill_waits_for_a_slot_s_retry_whichever_node_runs_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    # The first attempt of each slot fails, its retry succeeds.
    command = (f"f={marks}/$(echo $TUISCHED_SLOT | tr -dc 0-9); "
               'if [ -e "$f" ]; then exit 0; fi; touch "$f"; exit 1')  # fmt: skip
    jobs = _job("flaky", command, "    retries: 1\n    retry_delay: 1s\n")
    a, b = cluster.node(jobs, name="a"), cluster.node(jobs, name="b")
    cluster.alive(2)
    since = cluster.rows("SELECT now()")[0][0]
    done = _backfill(a, "flaky", _window(cluster, 4, 1))
    assert done.returncode == 0, done.stderr
    count = len(json.loads(done.stdout)["slots"])
    assert count >= 2
    _settled(cluster, "flaky", "backfill", since, 2 * count)
    rows = _runs(cluster, "flaky", "backfill", since)
    assert [(row[1], row[2]) for row in rows] == [(0, "failed"), (1, "success")] * count
    _in_slot_order(rows)  # the next slot began only once the retry of the one before ended
    for node in (a, b):
        assert node.stop() == 0, node.text()[-2000:]


def test_the_missed_slots_of_a_pause_are_decided_once_across_nodes_and_made_up_in_order(
    cluster: Cluster,
) -> None:
    # `beat` is never paused: its slots say that time went by while the others were.
    jobs = (_job("tick", "sleep 0.3", every="1s") + _job("tock", "true", every="1s")
            + _job("beat", "true", every="1s"))  # fmt: skip
    a, b = cluster.node(jobs, name="a"), cluster.node(jobs, name="b")
    cluster.alive(2)
    paused = cluster.rows("SELECT now()")[0][0]  # the pause begins once `pause` is asked
    for job in ("tick", "tock"):
        assert a.cli("pause", job).returncode == 0
    asked = cluster.rows("SELECT now()")[0][0]
    wait_until(lambda: int(cluster.rows(
        "SELECT count(*) FROM tuisched_runs WHERE job = 'beat' AND state = 'success' "
        "AND slot > %s", asked)[0][0]) >= 3, within=30)  # fmt: skip
    resuming = cluster.rows("SELECT now()")[0][0]  # the pause ends once `resume` is asked
    for job in ("tick", "tock"):
        assert b.cli("resume", job).returncode == 0

    def pending(node: Node) -> dict[str, int]:
        listed = node.cli("missed", "--json")
        assert listed.returncode == 0, listed.stderr
        return {e["job"]: e["count"] for e in json.loads(listed.stdout) if e["pending"]}

    # (each look runs three command lines: seconds each on a busy machine)
    wait_until(lambda: len(pending(a)) == 2 and pending(a) == pending(b), within=45)
    missed = cluster.rows(
        "SELECT job, slot FROM tuisched_runs WHERE state = 'missed' ORDER BY job, slot"
    )
    assert Counter(job for job, _ in missed) == pending(a)  # one row per slot, both nodes
    # Nothing ran once the pause was heard (a node hears it from another within its
    # poll, 1 s); the missed slots are those from the pause to the first slot run after
    # the resume (heard as late as a busy machine makes the nodes hear it).
    margin = timedelta(seconds=1.5)

    def first_run_after_the_resume(job: str) -> datetime | None:
        ((slot,),) = cluster.rows(
            "SELECT min(slot) FROM tuisched_runs WHERE job = %s AND trigger = 'schedule' "
            "AND state = 'success' AND slot > %s", job, resuming)  # fmt: skip
        return slot if isinstance(slot, datetime) else None

    wait_until(lambda: all(first_run_after_the_resume(job) for job in ("tick", "tock")),
               within=30)  # fmt: skip
    for job in ("tick", "tock"):
        ran = cluster.rows(
            "SELECT slot FROM tuisched_runs WHERE job = %s AND trigger = 'schedule' AND "
            "state = 'success' AND slot BETWEEN %s AND %s",
            job, asked + margin, resuming)  # fmt: skip
        assert ran == [], f"{job} ran while paused: {ran}"
        again = first_run_after_the_resume(job)
        assert again is not None
        slots = [slot for name, slot in missed if name == job]
        assert all(paused - margin <= slot < again for slot in slots), (paused, again, slots)

    # Both nodes decide tick at once: one decision is made.
    asked = [subprocess.Popen(
        [*TUISCHED, "-c", str(node.path), "missed", "decide", "tick", "all"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=node_env(),
    ) for node in (a, b)]  # fmt: skip
    answers = [process.communicate(timeout=30) for process in asked]
    assert sorted(process.returncode for process in asked) == [0, 1], answers
    refused = next(err for (_, err), p in zip(answers, asked, strict=True) if p.returncode)
    assert "decided" in refused, refused
    for node in (a, b):  # both list tick as decided, whichever node decided
        listed = {e["job"]: e for e in json.loads(node.cli("missed", "--json").stdout)}
        assert "tick" in listed, listed
        assert not listed["tick"]["pending"]
        assert listed["tick"]["decided"], listed
    ticks = [slot for job, slot in missed if job == "tick"]
    since = paused
    _settled(cluster, "tick", "catchup", since, len(ticks))
    made = _runs(cluster, "tick", "catchup", since)
    assert [row[0] for row in made] == ticks
    assert {row[2] for row in made} == {"success"}
    _in_slot_order(made)
    statuses = cluster.rows(
        "SELECT status FROM tuisched_runs WHERE job = 'tick' AND state = 'missed'"
    )
    wait_until(
        lambda: all(
            s.startswith("made up by run")
            for (s,) in cluster.rows(
                "SELECT status FROM tuisched_runs WHERE job = 'tick' AND state = 'missed'"
            )
        ),
        within=30,
    )
    assert len(statuses) == len(ticks)

    # tock's missed slots are run by a backfill instead: that decides them.
    tocks = [slot for job, slot in missed if job == "tock"]
    window = (tocks[0].isoformat(), (tocks[-1] + timedelta(seconds=1)).isoformat())
    done = _backfill(b, "tock", window)
    assert done.returncode == 0, done.stderr
    decided = cluster.rows(
        "SELECT status FROM tuisched_runs WHERE job = 'tock' AND state = 'missed'"
    )
    assert decided
    assert all(s.startswith("made up by backfill") for (s,) in decided), decided
    wait_until(lambda: pending(a) == {} and pending(b) == {}, within=30)
    for node in (a, b):
        assert node.stop() == 0, node.text()[-2000:]


def node_env() -> dict[str, str]:
    import os

    from .pg_fixtures import PASSWORD

    return {**os.environ, "TEST_PG_PASSWORD": PASSWORD}
