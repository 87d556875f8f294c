"""One scheduler per configuration: a file that names no `state_dir` gets a state
directory of its own, and a verb or console given another file than the one the
running scheduler runs refuses with one line naming both (issue 27)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuisched.domain.errors import AlreadyRunningError
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.configtext import default_state_dir, state_dir_of
from tuisched.runtime.store import InstanceLock

from .conftest import REPO
from .runtime_fixtures import Scheduler, schedulers  # noqa: F401  (a fixture)

JOB = "jobs:\n  hello-{name}:\n    command: [/bin/echo, {name}]\n    schedule: manual\n"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user state directory of this test (platformdirs reads $XDG_STATE_HOME)."""
    state = tmp_path / "xdg-state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state / "tuisched"


def tuisched(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`tuisched ARGV` run for real in `folder` (its ./tuisched.yaml is the default)."""
    return subprocess.run(
        [sys.executable, "-m", "tuisched", *argv],
        cwd=folder, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def start(schedulers: list[Scheduler], config: Path) -> Scheduler:  # noqa: F811
    """`tuisched --no-ui -c CONFIG`, once it has started."""
    scheduler = Scheduler(
        config, argv=[sys.executable, "-m", "tuisched", "--no-ui", "-c", str(config)]
    )
    schedulers.append(scheduler)
    scheduler.wait_for_line("scheduler started", within=30)
    return scheduler


# --- where a configuration's state is ---------------------------------------------------


def test_two_files_in_two_folders_get_two_state_directories(home: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "tuisched.yaml", tmp_path / "b" / "tuisched.yaml"
    for path in (first, second):
        path.parent.mkdir()
        path.write_text(JOB.format(name=path.parent.name))
    a, b = default_state_dir(first), default_state_dir(second)
    assert a != b
    assert a.parent == b.parent == home / "configs"
    assert a.name.startswith("a-tuisched-")
    assert b.name.startswith("b-tuisched-")
    # What the verbs find (leniently, from the text) is what the scheduler uses.
    assert state_dir_of(first) == load_config(first).settings.state_dir == a


def test_one_file_named_three_ways_is_one_configuration(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "etc" / "tuisched.yaml"
    real.parent.mkdir()
    real.write_text(JOB.format(name="x"))
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    monkeypatch.chdir(real.parent)
    assert default_state_dir(Path("tuisched.yaml")) == default_state_dir(real)
    assert default_state_dir(link) == default_state_dir(real)
    assert str(default_state_dir(real)).startswith(str(home))


def test_a_file_that_names_its_state_directory_keeps_it(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "tuisched.yaml"
    path.write_text("settings: {state_dir: here}\n" + JOB.format(name="x"))
    assert load_config(path).settings.state_dir == tmp_path / "here"
    assert state_dir_of(path) == tmp_path / "here"


def test_the_lock_names_the_configuration_its_holder_runs(tmp_path: Path) -> None:
    held = InstanceLock(tmp_path / "tuisched.lock", Path("/srv/a/tuisched.yaml"))
    held.acquire()
    try:
        assert (tmp_path / "tuisched.lock").read_text() == f"{os.getpid()}\n/srv/a/tuisched.yaml\n"
        with pytest.raises(AlreadyRunningError) as other:
            InstanceLock(tmp_path / "tuisched.lock", Path("/srv/b/tuisched.yaml")).acquire()
        assert str(other.value) == (
            f"tuisched is already running on {tmp_path} (pid {os.getpid()}) for "
            "/srv/a/tuisched.yaml, not /srv/b/tuisched.yaml: give each configuration its own "
            "settings.state_dir"
        )
        with pytest.raises(AlreadyRunningError) as same:
            InstanceLock(tmp_path / "tuisched.lock", Path("/srv/a/tuisched.yaml")).acquire()
        assert str(same.value) == f"tuisched is already running on {tmp_path} (pid {os.getpid()})"
    finally:
        held.release()


# --- two configurations made by init, side by side ---------------------------------------


@pytest.fixture
def made_by_init(home: Path, tmp_path: Path) -> tuple[Path, Path]:
    folders = []
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        done = tuisched(folder, "init")
        assert done.returncode == 0, done.stderr
        # init says where the state is, and it is where the scheduler will keep it
        state = default_state_dir(folder / "tuisched.yaml")
        assert f"its state: {state}" in done.stdout
        # the starter's jobs, renamed so that each folder's are its own
        text = (folder / "tuisched.yaml").read_text()
        (folder / "tuisched.yaml").write_text(text.replace("by-hand:", f"by-hand-{name}:"))
        folders.append(folder)
    return folders[0], folders[1]


@pytest.mark.timeout(120)
def test_two_configurations_made_by_init_run_side_by_side(
    made_by_init: tuple[Path, Path],
    schedulers: list[Scheduler],  # noqa: F811
) -> None:
    a, b = made_by_init
    start(schedulers, a / "tuisched.yaml")
    start(schedulers, b / "tuisched.yaml")  # was: "already running" (one shared state)
    for folder, other in ((a, b), (b, a)):
        status = tuisched(folder, "status")
        assert status.returncode == 0, status.stderr
        assert f"config {folder / 'tuisched.yaml'}" in status.stdout
        jobs = tuisched(folder, "jobs")
        assert f"by-hand-{folder.name}" in jobs.stdout
        assert f"by-hand-{other.name}" not in jobs.stdout
        wait = tuisched(folder, "trigger", f"by-hand-{folder.name}", "--wait")
        assert wait.returncode == 0, wait.stderr
        assert wait.stdout.strip() == "run by hand"
        reload = tuisched(folder, "reload")
        assert reload.returncode == 0
        assert "nothing to reload" in reload.stdout
    for folder, other in ((a, b), (b, a)):
        history = tuisched(folder, "history", "--json")
        assert f'"job": "by-hand-{folder.name}"' in history.stdout
        assert f"by-hand-{other.name}" not in history.stdout
    for scheduler in schedulers:
        scheduler.process.terminate()
        assert scheduler.finish() == 0


# --- a state directory two files share ----------------------------------------------------


@pytest.mark.timeout(120)
def test_a_verb_given_another_file_than_the_running_one_refuses_naming_both(
    tmp_path: Path,
    schedulers: list[Scheduler],  # noqa: F811
) -> None:
    shared = tmp_path / "shared"
    configs = {}
    for name in ("c", "d"):
        (tmp_path / name).mkdir()
        configs[name] = tmp_path / name / "tuisched.yaml"
        configs[name].write_text(f"settings: {{state_dir: {shared}}}\n" + JOB.format(name=name))
    start(schedulers, configs["c"])
    theirs, ours = configs["c"], configs["d"]
    both = (
        f"tuisched: the scheduler running on {shared} runs {theirs}, not {ours}: give each "
        "configuration its own settings.state_dir (or name the other file with -c)\n"
    )
    for argv in (
        ["status"], ["jobs"], ["trigger", "hello-d"], ["reload"], ["logs", "hello-d"],
        ["pause", "hello-d"], ["missed"], ["trigger", "hello-d", "--wait"], ["attach"],
    ):  # fmt: skip
        done = tuisched(tmp_path / "d", *argv)
        assert (done.returncode, done.stderr) == (69, both), argv
    second = tuisched(tmp_path / "d", "--no-ui")
    assert second.returncode == 75
    assert (
        f"tuisched is already running on {shared} (pid {schedulers[0].process.pid}) for "
        f"{theirs}, not {ours}: give each configuration its own settings.state_dir"
    ) in second.stderr
    # the right file, named another way, is served
    named = tuisched(tmp_path, "-c", "c/../c/tuisched.yaml", "trigger", "hello-c", "--wait")
    assert (named.returncode, named.stdout) == (0, "c\n"), named.stderr


@pytest.mark.timeout(60)
def test_a_start_says_where_the_state_kept_before_is(
    home: Path,
    tmp_path: Path,
    schedulers: list[Scheduler],  # noqa: F811
) -> None:
    home.mkdir(parents=True)
    (home / "history.db").write_bytes(b"")  # what every configuration shared before
    config = tmp_path / "tuisched.yaml"
    config.write_text(JOB.format(name="x"))
    scheduler = Scheduler(
        config, argv=[sys.executable, "-m", "tuisched", "--no-ui", "-c", str(config)]
    )
    schedulers.append(scheduler)
    line = scheduler.wait_for_line("is now kept in", within=30)
    assert f"{default_state_dir(config)}, a folder of its own" in line
    assert f"set settings.state_dir: {home} to go on with them" in line
    scheduler.wait_for_line("scheduler started", within=30)
    scheduler.process.terminate()
    assert scheduler.finish() == 0
    again = Scheduler(config, argv=[sys.executable, "-m", "tuisched", "--no-ui", "-c", str(config)])
    schedulers.append(again)
    again.wait_for_line("scheduler started", within=30)
    again.process.terminate()
    assert again.finish() == 0
    assert not any("is now kept in" in line for line in again.lines)  # said once: the first time
