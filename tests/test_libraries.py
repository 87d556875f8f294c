"""What tuisched leans on its libraries for, and the hand-written parts that stay.

Jinja2: the alert sandbox bounds loops and `~` through the parsed tree and
Jinja's own code generator; the few undocumented hooks it still overrides are
checked here, so that a Jinja release that drops one fails loudly instead of
leaving a template unbounded. So are the private parts of APScheduler (the pass over
due jobs, a job built from its pickled state), Textual (the key parser and the terminal
driver the console extends) and argparse (the actions the completion walks) that the
code relies on.

The audit log's `AppendFile` reopens a moved file like
`logging.handlers.WatchedFileHandler`, and keeps what that handler drops.
PyYAML: the CLI verbs read `settings` from libyaml's events; the console's
text-only YAML is one module. The runs' processes are read from /proc by hand
(see `tuisched.runtime.execution.descendants` for why not psutil).
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
from pathlib import Path

import pytest
import yaml
from jinja2 import Environment
from jinja2.compiler import CodeGenerator
from jinja2.sandbox import SandboxedEnvironment, SandboxedFormatter

from tuisched.domain.templates import TemplateError, render
from tuisched.domain.templates.sandbox import sandbox
from tuisched.frontends.tui.yamltext import block_text, flow_text, read_text
from tuisched.runtime import configtext
from tuisched.runtime.configtext import NODE_NAME_VARIABLE, state_dir_of
from tuisched.runtime.execution.descendants import _process_table
from tuisched.runtime.execution.leftovers import kill_left_behind
from tuisched.runtime.handlers.appendfile import AppendFile

# --- Jinja2: the sandbox without a private code generator -------------------------------

RUNAWAY = "{% for a in range(1000) %}{% for b in range(1000) %}{% endfor %}{% endfor %}"


def test_the_sandbox_compiles_with_jinjas_own_code_generator() -> None:
    assert sandbox().code_generator_class is CodeGenerator


def test_a_loop_and_a_tilde_compile_to_the_sandboxs_helpers() -> None:
    code = sandbox().compile("{% for x in items %}{{ x ~ '!' }}{% endfor %}", raw=True)
    assert "environment.counted" in code
    assert "environment.joined" in code


def test_a_template_compiled_from_its_parsed_tree_is_bounded_too() -> None:
    environment = sandbox()
    tree = environment.parse("{% for x in items %}{{ x ~ '!' }}{% endfor %}")
    code = environment.compile(tree, raw=True)
    assert "environment.counted" in code
    assert "environment.joined" in code


def test_a_tree_compiled_twice_counts_its_loops_once() -> None:
    environment = sandbox()
    tree = environment.parse("{% for x in items %}{{ x }}{% endfor %}")
    environment.compile(tree)
    assert environment.compile(tree, raw=True).count("environment.counted") == 1


def test_a_doubling_tilde_is_refused() -> None:
    doubling = "{% set s = 'xxxxxxxx' %}" + "".join(
        f"{{% set s{i + 1} = s{i or ''} ~ s{i or ''} %}}" for i in range(40)
    )
    with pytest.raises(TemplateError, match=r"longer than|too much work"):
        render(doubling + "{{ s40|length }}", {})


def test_the_sandboxs_helpers_spend_no_step_of_their_own() -> None:
    # 99,000 iterations each joining once: within the 100,000 steps only if the
    # loop's `counted` and each `~` cost nothing beyond the iteration itself.
    source = "{% for a in range(99000) %}{{ '' ~ '' }}{% endfor %}ok"  # MAX_RANGE is 100,000
    assert render(source, {}) == "ok"


def test_the_error_names_the_template_line_of_a_runaway_loop() -> None:
    with pytest.raises(TemplateError, match="too much work") as caught:
        render("one\ntwo\n" + RUNAWAY, {})
    assert caught.value.line == 3


@pytest.mark.parametrize(
    ("owner", "hook"),
    [
        (SandboxedEnvironment, "wrap_str_format"),
        (SandboxedEnvironment, "call"),
        (SandboxedEnvironment, "call_binop"),
        (SandboxedEnvironment, "intercepted_binops"),
        (Environment, "concat"),
        (Environment, "compile"),
        (SandboxedFormatter, "get_field"),
    ],
)
def test_the_jinja_hooks_the_sandbox_overrides_are_still_jinjas(owner: type, hook: str) -> None:
    assert hook in vars(owner), f"Jinja2 no longer has {owner.__name__}.{hook}: see pyproject"


# --- the audit log's own file rather than logging.handlers.WatchedFileHandler ------------


def test_a_link_planted_where_the_log_was_moved_keeps_the_lines_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """After logrotate moves the log, a link in its place is refused like a full disk:
    one warning, the lines kept, and written to a new file once the link is gone."""
    caplog.set_level(logging.INFO)
    path, victim = tmp_path / "audit.log", tmp_path / "victim"
    victim.write_text("precious\n")
    file = AppendFile(path, "the test log")
    file.add("before")
    path.rename(tmp_path / "audit.log.1")
    path.symlink_to(victim)
    file.add("during")  # no loop: written (or kept) at once, never raised
    file.add("still")
    assert victim.read_text() == "precious\n"
    assert file.unwritten == len(b"during\nstill\n")
    assert caplog.text.count("cannot write the test log") == 1
    assert "is a symbolic link" in caplog.text
    path.unlink()
    file.add("after")
    file.close()
    assert path.read_text() == "during\nstill\nafter\n"
    assert (tmp_path / "audit.log.1").read_text() == "before\n"
    assert "writing the test log works again" in caplog.text


def test_a_log_that_cannot_be_reopened_at_close_says_what_is_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "audit.log"
    file = AppendFile(path, "the test log")
    path.unlink()
    path.mkdir()  # a folder where the file was: it cannot be opened again
    file.add("kept")
    file.close()  # does not raise
    assert "did not take 5 bytes of lines before closing" in caplog.text


# --- PyYAML's C parser where a command waits on it ---------------------------------------

JOBS = "jobs:\n  a: {command: 'true', schedule: manual}\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("settings:\n  state_dir: st\n" + JOBS, "st"),
        ("settings: {state_dir: 'quoted dir'}\n" + JOBS, "quoted dir"),
        (JOBS + 'settings:\n  timezone: UTC\n  state_dir: "after"\n', "after"),
        ("settings:\n  state_dir: 123\n" + JOBS, "123"),  # the text, as the reader takes it
        ("settings:\n  state_dir: first\nsettings:\n  state_dir: last\n", "last"),
        ("defaults: &d {state_dir: merged}\nsettings:\n  <<: *d\n" + JOBS, "merged"),
        ("settings:\n  state_dir: ~\n" + JOBS, None),
        ("settings:\n  state_dir: [a]\n" + JOBS, None),
        ("- a list\n", None),
        ("settings: [\n  state_dir: broken\n", "broken"),  # read from its line
    ],
)
def test_the_state_directory_is_found_leniently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, expected: str | None
) -> None:
    monkeypatch.setattr(configtext, "user_state_dir", lambda: tmp_path / "default")
    path = tmp_path / "tuisched.yaml"
    path.write_text(text)
    found = state_dir_of(path)
    assert found == (tmp_path / expected if expected else configtext.default_state_dir(path))
    assert found.is_relative_to(tmp_path / ("" if expected else "default/configs"))


@pytest.mark.parametrize(
    ("cluster", "clustered"),
    [("  cluster: {database: 'postgresql://x'}\n", True), ("  cluster:\n", False), ("", False)],
)
def test_a_named_node_of_a_cluster_has_its_own_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cluster: str, clustered: bool
) -> None:
    monkeypatch.setenv(NODE_NAME_VARIABLE, "east")
    path = tmp_path / "tuisched.yaml"
    path.write_text("settings:\n  state_dir: st\n" + cluster + JOBS)
    expected = tmp_path / "st" / "nodes" / "east" if clustered else tmp_path / "st"
    assert state_dir_of(path) == expected


def test_finding_the_state_directory_builds_none_of_the_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI verbs find the socket from `settings` alone: the jobs are only parsed (with
    libyaml where it is there), never built into objects (seconds at 10,000 jobs)."""

    def refused(*args: object, **kwargs: object) -> object:
        raise AssertionError("the whole file was loaded")

    monkeypatch.setattr(yaml, "load", refused)
    monkeypatch.setattr(yaml, "safe_load", refused)
    jobs = "".join(f"  job{i}: {{command: 'echo {i}', schedule: manual}}\n" for i in range(500))
    path = tmp_path / "tuisched.yaml"
    path.write_text("settings:\n  state_dir: st\njobs:\n" + jobs)
    assert state_dir_of(path) == tmp_path / "st"


# --- one text-only YAML for the console ---------------------------------------------------


def test_the_console_shows_and_reads_yaml_as_the_text_written() -> None:
    argv = ["/bin/echo", "yes", "0755", "12:30", "a b"]
    shown = flow_text(argv)
    assert shown == "[/bin/echo, yes, 0755, '12:30', a b]"
    assert read_text(shown) == argv
    assert block_text({"command": "true", "retries": "2", "on": "off"}) == (
        "command: true\nretries: 2\non: off\n"
    )


# --- the runs' processes: /proc read by hand rather than psutil ---------------------------


def test_a_recorded_process_is_known_by_its_start_ticks_not_its_pid_alone(tmp_path: Path) -> None:
    """A process is named by its pid and its start in clock ticks after boot (which no
    clock change moves): a record whose start does not match leaves the pid alone."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        start = _process_table()[sleeper.pid].start
        record = tmp_path / "processes.json"
        record.write_text(json.dumps({"run": [[sleeper.pid, start + 1]]}))
        assert kill_left_behind(record, None, ()) == 0
        assert sleeper.poll() is None
        assert not record.exists()
        record.write_text(json.dumps({"run": [[sleeper.pid, start]]}))
        assert kill_left_behind(record, None, ()) == 1
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
    finally:
        sleeper.kill()
        sleeper.wait()


# --- APScheduler 3: the pass over due jobs that the engine replaces -----------------------


def test_apschedulers_loop_still_calls_the_pass_over_due_jobs_the_engine_replaces() -> None:
    """`_BurstScheduler` (runtime/engine/firing.py) overrides APScheduler 3's private
    `_process_jobs`: its main loop must still call it for the seconds to wait, and the
    scheduler hold the job store lock it takes."""
    import inspect

    from apscheduler.schedulers.base import BaseScheduler
    from apscheduler.schedulers.blocking import BlockingScheduler

    assert "wait_seconds = self._process_jobs()" in inspect.getsource(BlockingScheduler._main_loop)
    assert "_jobstores_lock" in inspect.getsource(BaseScheduler.__init__)


def test_the_burst_pass_hands_every_due_job_over_at_once_then_moves_them_on() -> None:
    from datetime import UTC, datetime, timedelta
    from zoneinfo import ZoneInfo

    from apscheduler.job import Job as ApsJob

    from tuisched.domain.model import AtSchedule, EverySchedule, Unit
    from tuisched.runtime.engine.firing import _BurstScheduler, _due
    from tuisched.runtime.engine.jobstore import HeapJobStore
    from tuisched.runtime.engine.trigger import SlotTrigger

    utc = ZoneInfo("UTC")
    now = datetime.now(UTC)
    due = now - timedelta(seconds=1)
    handed: list[list[str]] = []
    store = HeapJobStore()
    scheduler = _BurstScheduler(
        store, lambda batch: handed.append([job for job, _ in batch]), now=lambda: now
    )
    schedules = {
        "once": AtSchedule(at=due, tz=utc),
        "often": EverySchedule(step=1, unit=Unit.HOUR, start=due, stop=None, tz=utc),
    }

    def add(name: str, schedule: object, first: datetime) -> None:
        store.add_job(ApsJob(
            scheduler, id=name, func=print, trigger=SlotTrigger(schedule, name),  # type: ignore[arg-type]
            executor="default", args=(), kwargs={}, name=name, misfire_grace_time=None,
            coalesce=False, max_instances=1, next_run_time=first,
        ))  # fmt: skip

    for name, schedule in schedules.items():
        add(name, schedule, due)
    add("later", schedules["once"], now + timedelta(hours=2))
    wait = scheduler._process_jobs()
    assert handed == [["once", "often"]]  # one batch, due order
    assert store.lookup_job("once") is None  # its one slot has fired
    assert store.lookup_job("often").next_run_time == due + timedelta(hours=1)
    assert wait is not None
    assert 0 < wait <= 3600  # until the first next run time (an hour at most)
    assert _due(store.lookup_job("often"), due) == (due, due)


def test_a_job_built_from_its_state_is_the_job_apschedulers_add_job_builds() -> None:
    """`built_job` (runtime/engine/firing.py) skips `add_job` for speed: it fills a job
    through `__setstate__` with a state written out by hand, and sets the private
    `_scheduler` and `_jobstore_alias`. A release that changes the state's version or
    keys, or renames those attributes, fails here."""
    from datetime import UTC, datetime, timedelta
    from zoneinfo import ZoneInfo

    from apscheduler.job import Job as ApsJob
    from apscheduler.schedulers.background import BackgroundScheduler

    from tuisched.domain.model import EverySchedule, Unit
    from tuisched.runtime.engine.firing import _NOOP, built_job
    from tuisched.runtime.engine.trigger import SlotTrigger

    first = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)
    schedule = EverySchedule(step=1, unit=Unit.HOUR, start=first, stop=None, tz=ZoneInfo("UTC"))
    trigger = SlotTrigger(schedule, "hourly")
    scheduler = BackgroundScheduler(timezone=UTC)
    scheduler.start(paused=True)
    try:
        scheduler.add_job(
            _NOOP, trigger=trigger, id="hourly", name="hourly", executor="default",
            jobstore="default", misfire_grace_time=None, coalesce=False, max_instances=1,
            next_run_time=first,
        )  # fmt: skip
        made = scheduler.get_job("hourly")
        built = built_job(scheduler, "hourly", trigger, first)
        for attribute in ApsJob.__slots__:
            if attribute != "__weakref__":
                assert getattr(built, attribute) == getattr(made, attribute), attribute
        assert built.__getstate__() == made.__getstate__()
        assert built_job(scheduler, "hourly", trigger, None).next_run_time is None
        built._modify(next_run_time=first + timedelta(hours=1))  # what pause and resume do
    finally:
        scheduler.shutdown(wait=False)


# --- Textual: the console's key parser and terminal driver --------------------------------


def test_textuals_key_parser_keeps_what_the_consoles_parser_reaches_into() -> None:
    """`KeyParser` (frontends/tui/typeahead.py) subclasses Textual's private
    `XTermParser`, ends a waiting Esc through the private `_timeout_time` and `tick()`,
    and reads the bracketed paste markers of that module."""
    import inspect

    from textual import _parser, _xterm_parser

    assert _xterm_parser.BRACKETED_PASTE_START == "\x1b[200~"
    assert _xterm_parser.BRACKETED_PASTE_END == "\x1b[201~"
    assert issubclass(_xterm_parser.XTermParser, _parser.Parser)
    parser_source = inspect.getsource(_parser.Parser)
    assert "self._timeout_time" in parser_source
    assert "def tick(self)" in parser_source
    assert "def feed(self, data: str)" in parser_source


def test_textuals_linux_driver_keeps_what_the_console_driver_overrides() -> None:
    """`TerminalDriver` (frontends/tui/terminal.py) overrides the private methods below of
    Textual's `LinuxDriver` and reads its private `_file`, `_debug` and `_app`."""
    import inspect

    from textual.drivers.linux_driver import LinuxDriver

    for method in ("_sigtstp_application", "_sigcont_application", "_run_input_thread",
                   "run_input_thread"):  # fmt: skip
        assert method in vars(LinuxDriver), f"Textual's LinuxDriver no longer has {method}"
    source = inspect.getsource(LinuxDriver)
    assert "target=self._run_input_thread" in source  # the input thread runs the override
    assert "signal.signal(signal.SIGTSTP, self._sigtstp_application)" in source
    assert "signal.signal(signal.SIGCONT, self._sigcont_application)" in source
    for attribute in ("self._file", "self._debug", "self._app", "self.fileno", "self.exit_event"):
        assert attribute in source, f"Textual's LinuxDriver no longer uses {attribute}"


def test_argparse_keeps_the_actions_the_completion_and_examples_walk() -> None:
    """`completion.py` and `examples.py` walk a parser's private `_actions`, and the
    subcommands' `_SubParsersAction` with its `_choices_actions`."""
    import argparse

    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("jobs", help="list the jobs")
    (found,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(found.choices) == ["jobs"]
    assert [choice.dest for choice in found._choices_actions] == ["jobs"]
