"""One job read, checked and rewritten through its own block of the file (issue 14, R7, R16).

The whole-document way (ruamel.yaml over the whole file, then `parse_config` of
the whole result) is the oracle: for every edit, the block way must accept and
refuse the same edits, name the same problems at the same lines, and give the
same configuration, while leaving every byte outside the edited block alone.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache, lru_cache, partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuisched.domain.config.diff import config_diff
from tuisched.domain.errors import ConfigError, ExcerptMismatch, JobActionError
from tuisched.domain.events import ConfigLoaded
from tuisched.domain.model import Config
from tuisched.runtime import configedits
from tuisched.runtime.configfiles import parse_config
from tuisched.runtime.document import ConfigDocument
from tuisched.runtime.document.blocks import JobBlocks

from .runtime_fixtures import running

NOW = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)
SAMPLE = Path(__file__).resolve().parent.parent / "sample_config"

CONFIG = """\
# the operator's own header
settings:
  timezone: UTC
  state_dir: state
  shutdown_grace: 2s

email:
  smtp: {host: localhost, port: 8025, security: none}
  from: "tuisched <tuisched@localhost>"
  subject: "[tuisched] {{ job.name }}"
  default_template: default.txt

groups:
  nightly:
    jobs: [export, compress, report]   # the chain

jobs:
  # export comes first: everything waits for it
  export:
    command: [/bin/echo, 'exported']
    schedule: {cron: "30 1 * * *"}   # 01:30
    retries: 2

  compress:
    command: "gzip -k /tmp/x"
    after: {job: export, on: success}
  report:
    description: "the daily report"
    command: [/bin/true]
    schedule:
      cron: "10 4 * * *"
    requires: [export]
    # a comment inside the job
    retry_delay: 30s
  tidy: {command: [/bin/true], schedule: manual}

  # hourly, from its own previous run
  hourly:
    python: "tests.engine_jobs:noop"
    schedule: {every: 1 hour, start: 2026-01-01T00:00}
    requires: [self]
"""


def _write(folder: Path, text: str = CONFIG) -> Path:
    (folder / "default.txt").write_text("{{ job.name }} {{ event }}\n")
    path = folder / "tuisched.yaml"
    path.write_text(text)
    return path


def _whole(
    text: str, path: Path, name: str, definition: Mapping[str, object]
) -> tuple[str, Config]:
    """The oracle: the whole document edited, then the whole file checked."""
    document = ConfigDocument(text, path)
    document.replace_job(name, definition)
    edited = document.text()
    return edited, parse_config(edited, path)


def _outcome(run: Any) -> tuple[str, Any]:
    """("ok", result) or ("refused", problem lines) or ("action", message)."""
    try:
        return "ok", run()
    except ConfigError as error:
        return "refused", [str(problem) for problem in error.problems]
    except JobActionError as error:
        return "action", str(error)


# --- the block of a job ---------------------------------------------------------------------


def test_a_replaced_job_keeps_every_other_byte_of_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path)
    config = parse_config(CONFIG, path)
    blocks = configedits.blocks_of(CONFIG, config)
    definition = configedits.job_definition(blocks, config, "report")
    assert definition is not None
    definition = {**definition, "description": "the nightly report", "timeout": "5m"}
    done = configedits.replace_job(blocks, config, "report", definition, NOW)
    head, tail = (
        CONFIG.split("  report:\n", maxsplit=1)[0],
        CONFIG.split("    retry_delay: 30s\n")[1],
    )
    assert done.text.startswith(head)
    assert done.text.endswith(tail)  # the next job, its comments and blank lines untouched
    middle = done.text[len(head) : len(done.text) - len(tail)]
    assert middle == (
        "  report:\n"
        '    description: "the nightly report"\n'  # its quotes kept
        "    command: [/bin/true]\n"
        "    schedule:\n"
        '      cron: "10 4 * * *"\n'
        "    requires: [export]\n"
        "    # a comment inside the job\n"
        "    retry_delay: 30s\n"
        "    timeout: 5m\n"
    )
    assert done.config.jobs["report"] == parse_config(done.text, path).jobs["report"]


def test_other_jobs_keep_their_own_indentation(tmp_path: Path) -> None:
    """The whole-document writer re-indents the whole file; the block writer touches one job."""
    text = (
        CONFIG.replace("  hourly:\n    python", "  hourly:\n        python")
        .replace("    schedule: {every", "        schedule: {every")
        .replace("    requires: [self]", "        requires: [self]")
    )
    path = _write(tmp_path, text)
    config = parse_config(text, path)
    blocks = configedits.blocks_of(text, config)
    done = configedits.replace_job(
        blocks, config, "tidy", {"command": ["/bin/true"], "schedule": "manual", "priority": "3"},
        NOW,
    )  # fmt: skip
    assert '        python: "tests.engine_jobs:noop"\n' in done.text
    lines, before = done.text.splitlines(), text.splitlines()
    assert [line for line in lines if "tidy" not in line] == [
        line for line in before if "tidy" not in line
    ]
    assert done.config.jobs["tidy"].priority == 3


def test_a_file_with_crlf_line_endings_is_edited_whole(tmp_path: Path) -> None:
    text = CONFIG.replace("\n", "\r\n")
    path = _write(tmp_path, text)
    config = parse_config(text, path)
    with pytest.raises(ExcerptMismatch):
        configedits.replace_job(
            configedits.blocks_of(text, config), config, "tidy", {"schedule": "manual"}, NOW
        )


def test_every_job_of_the_sample_reads_as_the_whole_document_reads_it(tmp_path: Path) -> None:
    folder = tmp_path / "sample"
    shutil.copytree(SAMPLE, folder)
    path = folder / "tuisched.yaml"
    text = path.read_text()
    config = parse_config(text, path)
    blocks, whole = configedits.blocks_of(text, config), ConfigDocument(text, path)
    alone = 0
    for name in config.jobs:
        try:
            definition = configedits.job_definition(blocks, config, name)
        except ExcerptMismatch:  # `<<: *office-hours` needs the anchor: read whole
            assert name == "office-ping"
            continue
        alone += 1
        assert definition == whole.job(name), name
    assert alone == len(config.jobs) - 1


def test_a_block_that_is_not_where_the_configuration_says_is_not_used(tmp_path: Path) -> None:
    path = _write(tmp_path)
    config = parse_config(CONFIG, path)
    moved = JobBlocks.of(CONFIG, {name: job.line + 1 for name, job in config.jobs.items()})
    with pytest.raises(ExcerptMismatch):
        configedits.job_definition(moved, config, "report")
    with pytest.raises(ExcerptMismatch):
        configedits.replace_job(moved, config, "report", {"schedule": "manual"}, NOW)


# --- the check: the same verdict as a whole check ----------------------------------------------

EDITS: dict[str, Mapping[str, object]] = {
    "manual": {"schedule": "manual"},
    "bad cron": {"schedule": {"cron": "61 * * * *"}},
    "every without start": {"schedule": {"every": "1 hour"}},
    "zero step": {"schedule": {"every": "0 hours", "start": "2026-01-01T00:00"}},
    "at": {"schedule": {"at": "2026-12-24T18:00"}},
    "other cron": {"schedule": {"cron": "0 2 * * *"}},
    "after report": {"schedule": None, "after": {"job": "report"}},
    "after hourly": {"schedule": None, "after": {"job": "hourly"}},
    "after compress": {"schedule": None, "after": {"job": "compress"}},
    "after nobody": {"schedule": None, "after": {"job": "nobody"}},
    "after and schedule": {"after": {"job": "tidy"}},
    "requires report": {"requires": ["report"]},
    "requires hourly": {"requires": ["hourly"]},
    "requires tidy": {"requires": ["tidy"]},
    "requires self": {"requires": ["self"]},
    "requires nobody": {"requires": ["nobody"]},
    "typo": {"tiemout": "5m"},
    "zero timeout": {"timeout": "0s"},
    "bad timeout": {"timeout": "five minutes"},
    "two kinds": {"python": "tests.engine_jobs:noop"},
    "env": {"env": {"LC_ALL": "C", "TZ": "UTC"}},
    "description": {"description": "changed: a longer one"},
    "alert": {"alerts": {"failed": {"to": ["ops@example.org"]}}},
    "bad address": {"alerts": {"failed": {"to": ["not an address"]}}},
    "bad zone": {"timezone": "Mars/Olympus"},
    "retries": {"retries": "3", "retry_delay": "1m"},
    "disabled": {"enabled": "false"},
}


def _apply(definition: Mapping[str, object], change: Mapping[str, object]) -> dict[str, object]:
    new = {**definition, **change}
    return {key: value for key, value in new.items() if value is not None}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("edits")


@cache
def _start(text: str, path: Path) -> tuple[Config, JobBlocks]:
    """The configuration and blocks an example starts from: the same text and files
    every example, and both frozen, so read once."""
    config = parse_config(text, path)
    return config, configedits.blocks_of(text, config)


@lru_cache(maxsize=256)
def _read_only(text: str, path: Path) -> ConfigDocument:
    """The whole document of `text`, only ever read (`job` hands out a plain copy):
    examples share their first texts, so each is loaded once."""
    return ConfigDocument(text, path)


def _job_in(text: str, path: Path, name: str) -> dict[str, object] | None:
    return _read_only(text, path).job(name)


FRESH = {"command": ["/bin/echo", "fresh"], "schedule": {"cron": "5 5 * * *"}}
"""What a job added by the differential test starts from."""


def _step(
    blocks: JobBlocks, config: Config, name: str, definition: Mapping[str, object]
) -> tuple[Any, Any]:
    """(the block way, the text it would write) for adding or replacing job `name`."""
    if name in config.jobs:
        return partial(configedits.replace_job, blocks, config, name, definition, NOW), (
            configedits.edited_blocks(blocks, config, name, definition).text
        )
    return partial(configedits.add_job, blocks, config, name, definition, NOW), (
        configedits.added_blocks(blocks, config, name, definition).text
    )


def _whole_step(text: str, path: Path, name: str, definition: Mapping[str, object]) -> Config:
    document = ConfigDocument(text, path)
    if document.job(name) is None:
        document.add_job(name, definition)
    else:
        document.replace_job(name, definition)
    return parse_config(document.text(), path)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["export", "compress", "report", "tidy", "hourly", "fresh"]),
            st.sampled_from(sorted(EDITS)),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_the_block_check_and_a_whole_check_agree(
    folder: Path, steps: list[tuple[str, str]]
) -> None:
    """A run of edits (`fresh` is added, then edited), each made to the text the last
    accepted one left. The block check accepts exactly the edits whose written file a
    reload (`parse_config` of the whole file) accepts, naming the same problems at the
    same lines; the whole-document writer agrees on each verdict and on the
    configuration; the blocks move along as jobs grow."""
    path = _write(folder)
    text = CONFIG
    config, blocks = _start(text, path)
    for name, edit in steps:
        definition = _apply(_job_in(text, path, name) or FRESH, EDITS[edit])
        run, written = _step(blocks, config, name, definition)
        ours = _outcome(run)
        reload = _outcome(partial(parse_config, written, path))
        whole = _outcome(partial(_whole_step, text, path, name, definition))
        assert ours[0] == reload[0] == whole[0], (name, edit, ours, reload, whole)
        if ours[0] == "refused":
            # Both name a refused job's own problems only, not the group lines listing it.
            assert ours[1], (name, edit)
            assert ours[1] == reload[1], (name, edit, ours[1], reload[1])
        if ours[0] != "ok":
            continue
        done, reread, expected = ours[1], reload[1], whole[1]
        assert done.text == written
        assert config_diff(expected, reread, NOW).empty, (name, edit)
        assert config_diff(reread, done.config, NOW).empty, (name, edit)
        assert done.config.jobs[name] == reread.jobs[name]  # its line too
        assert list(done.config.jobs) == list(reread.jobs)
        text, config, blocks = done.text, done.config, done.blocks


SAMPLE_JOBS = ["export", "compress", "daily-report", "hourly-rollup", "report-gate", "heartbeat"]
SAMPLE_EDITS: dict[str, Mapping[str, object]] = {
    **EDITS,
    "after export": {"schedule": None, "after": {"job": "export", "on": "both"}},
    "after report-gate": {"schedule": None, "after": "report-gate"},
    "requires daily-report": {"requires": ["daily-report"]},
    "requires heartbeat": {"requires": ["heartbeat"]},
    "failed alert": {"alerts": {"failed": {"to": "ops@example.org"}}},
    "missing template": {"alerts": {"failed": {"to": "ops@example.org", "template": "no.txt"}}},
}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sample")
    shutil.copytree(SAMPLE, folder, dirs_exist_ok=True)
    return folder / "tuisched.yaml"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(SAMPLE_JOBS), st.sampled_from(sorted(SAMPLE_EDITS))),
        min_size=1,
        max_size=3,
    )
)
def test_the_block_check_agrees_with_a_reload_of_the_sample(
    sample: Path, steps: list[tuple[str, str]]
) -> None:
    """The same on the sample file: alerts, templates, groups with alerts, an e-mail subject."""
    text = sample.read_text()
    config, blocks = _start(text, sample)
    for name, edit in steps:
        definition = _apply(_job_in(text, sample, name) or {}, SAMPLE_EDITS[edit])
        ours = _outcome(partial(configedits.replace_job, blocks, config, name, definition, NOW))
        written = configedits.edited_blocks(blocks, config, name, definition).text
        reload = _outcome(partial(parse_config, written, sample))
        assert ours[0] == reload[0], (name, edit, ours, reload)
        if ours[0] == "refused":
            assert ours[1] == reload[1], (name, edit, ours[1], reload[1])
        if ours[0] == "ok":
            done = ours[1]
            assert config_diff(reload[1], done.config, NOW).empty, (name, edit)
            assert done.config.jobs[name] == reload[1].jobs[name]
            text, config, blocks = done.text, done.config, done.blocks


def test_a_dependant_broken_by_an_edit_is_named_at_its_own_line(tmp_path: Path) -> None:
    path = _write(tmp_path)
    config = parse_config(CONFIG, path)
    blocks = configedits.blocks_of(CONFIG, config)
    export = {"command": ["/bin/echo", "exported"], "schedule": "manual", "retries": "2"}
    with pytest.raises(ConfigError) as raised:
        configedits.replace_job(blocks, config, "export", export, NOW)
    requires_line = CONFIG.splitlines().index("    requires: [export]") + 1
    assert [str(p) for p in raised.value.problems] == [
        f"{path}:{requires_line}: job 'report': requires 'export', which has no cycle "
        "(it needs a cron or every schedule)"
    ]
    cycle = {"command": ["/bin/true"], "after": {"job": "compress"}}
    with pytest.raises(ConfigError, match=r"job 'compress': dependency cycle: compress -> export"):
        configedits.replace_job(blocks, config, "export", cycle, NOW)
    _, whole = _outcome(lambda: _whole(CONFIG, path, "export", cycle))
    with pytest.raises(ConfigError) as raised:
        configedits.replace_job(blocks, config, "export", cycle, NOW)
    assert [str(p) for p in raised.value.problems] == whole


# --- through the runtime: written atomically, hand edits kept ------------------------------------


async def test_an_edit_rewrites_one_block_atomically_then_schedules(tmp_path: Path) -> None:
    path = _write(tmp_path)
    async with running(path) as (runtime, events):
        before_fire = runtime.engine.next_fire("report")
        definition = await runtime.source.job_definition("report")  # type: ignore[union-attr]
        assert definition is not None
        new = {**definition, "schedule": {"cron": "20 5 * * *"}, "env": {"A": "1"}}
        await runtime.actions.replace_job("report", new)
        (loaded,) = await events.wait_for(ConfigLoaded)
        assert loaded.origin == "edit"
        assert loaded.diff is not None
        assert [change.name for change in loaded.diff.changed] == ["report"]
        assert runtime.engine.next_fire("report") != before_fire
        text = path.read_text()
        # a second edit, below the first one's grown block, lands on its own job
        await runtime.actions.replace_job(
            "hourly", {"python": "tests.engine_jobs:noop", "schedule": "manual"}
        )
        assert (
            runtime.config.job("hourly").line
            == parse_config(path.read_text(), path).job("hourly").line
        )
        assert await runtime.actions.reload()  # the whole file still reads as what runs
        assert runtime.config.job("report").kind.env == {"A": "1"}  # type: ignore[union-attr]
    assert (tmp_path / "tuisched.yaml.bak").read_text() == text
    assert path.read_text().startswith(CONFIG.split("  report:\n", maxsplit=1)[0])
    assert path.read_text().endswith("  # hourly, from its own previous run\n  hourly:\n"
                                     "    python: \"tests.engine_jobs:noop\"\n"
                                     "    schedule: manual\n")  # fmt: skip
    assert not list(tmp_path.glob(".tuisched.yaml.*.tmp"))


async def test_an_added_job_goes_after_the_last_one_and_nothing_else_moves(
    tmp_path: Path,
) -> None:
    text = CONFIG + "\n# the end of the jobs\nx-notes: {owner: ops}   # kept as written\n"
    path = _write(tmp_path, text)
    new = {"command": ["/bin/echo", "new"], "after": {"job": "hourly"}}
    async with running(path) as (runtime, events):
        with pytest.raises(JobActionError, match="already exists"):
            await runtime.actions.add_job("tidy", new)
        with pytest.raises(ConfigError) as raised:
            await runtime.actions.add_job("late", {**new, "after": {"job": "nobody"}})
        line = text.count("\n", 0, text.index("\n# the end")) + 1  # `late:`; `after:` 2 below
        assert [str(p) for p in raised.value.problems] == [
            f"{path}:{line + 2}: job 'late': after names unknown job 'nobody'"
        ]
        assert path.read_text() == text
        await runtime.actions.add_job("late", new)
        (loaded,) = await events.wait_for(ConfigLoaded)
        assert loaded.diff is not None
        assert loaded.diff.added == ("late",)
        assert runtime.config.job("late").line == line
    head, tail = text.split("\n# the end", maxsplit=1)
    assert path.read_text() == (
        head + "  late:\n    command: [/bin/echo, new]\n    after:\n      job: hourly\n"
        "\n# the end" + tail
    )


async def test_a_refused_edit_writes_nothing(tmp_path: Path) -> None:
    path = _write(tmp_path)
    async with running(path) as (runtime, _):
        with pytest.raises(ConfigError, match=r"job 'report': requires 'export'"):
            await runtime.actions.replace_job(
                "export", {"command": ["/bin/true"], "schedule": "manual"}
            )
        assert runtime.engine.next_fire("export") is not None
    assert path.read_text() == CONFIG
    assert not (tmp_path / "tuisched.yaml.bak").exists()


async def test_a_hand_edit_made_meanwhile_is_not_overwritten(tmp_path: Path) -> None:
    path = _write(tmp_path)
    async with running(path) as (runtime, _):
        definition = await runtime.source.job_definition("tidy")  # type: ignore[union-attr]
        assert definition is not None
        by_hand = CONFIG.replace("retries: 2", "retries: 4  # typed by hand")
        path.write_text(by_hand)  # before the watcher has told anyone
        with pytest.raises(JobActionError, match="changed on disk"):
            await runtime.actions.replace_job("tidy", {**definition, "priority": "2"})
    assert path.read_text() == by_hand


async def test_a_job_using_an_anchor_is_edited_through_the_whole_document(tmp_path: Path) -> None:
    text = CONFIG.replace("settings:\n", "x-base: &base\n  retries: 1\n\nsettings:\n").replace(
        "  tidy: {command: [/bin/true], schedule: manual}\n",
        "  tidy:\n    <<: *base\n    command: [/bin/true]\n    schedule: manual\n",
    )
    path = _write(tmp_path, text)
    async with running(path) as (runtime, _):
        definition = await runtime.source.job_definition("tidy")  # type: ignore[union-attr]
        assert definition == {"retries": "1", "command": ["/bin/true"], "schedule": "manual"}
        await runtime.actions.replace_job("tidy", {**definition, "priority": "7"})
        assert runtime.config.job("tidy").priority == 7
    assert "    <<: *base\n" in path.read_text()


# --- the console on 10,000 jobs ---------------------------------------------------------------


def _many_jobs(folder: Path, count: int) -> Path:
    """`count` jobs, each with a comment above it, every tenth one `after` the one before."""
    lines = ["settings: {timezone: UTC, state_dir: state, shutdown_grace: 2s}", "jobs:"]
    for i in range(count):
        name = f"j{i:05d}"
        lines += [f"  # {name}, one of many", f"  {name}:", "    command: [/bin/true]"]
        trigger = (
            f"after: {{job: j{i - 1:05d}}}" if i % 10 == 1 else 'schedule: {cron: "0 3 1 1 *"}'
        )
        lines += [f"    {trigger}", f"    description: 'job {i}'"]
    path = folder / "tuisched.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.timeout(180)
async def test_the_form_and_the_definition_tab_show_the_right_job_of_10000(tmp_path: Path) -> None:
    from textual.widgets import Input, Static

    from tuisched.frontends.tui.screens.detail import JobDetailScreen
    from tuisched.frontends.tui.screens.form import JobFormScreen
    from tuisched.frontends.tui.widgets.jobs import JobsTable

    from .console_fixtures import make_app, until

    path = _many_jobs(tmp_path, 10_000)
    app, runtime = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 10_000, within=120)
        table.focus()
        table.move_cursor(row=table.get_row_index("j07771"))
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, JobFormScreen), within=30)
        form = app.screen
        await until(pilot, lambda: bool(form.query("#form-name")), within=30)  # composed
        assert form.query_one("#form-name", Input).value == "j07771"
        assert form.query_one("#form-after-job", Input).value == "j07770"
        assert form.query_one("#form-description", Input).value == "job 7771"
        form.query_one("#form-description", Input).value = "job 7771, edited"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: not isinstance(app.screen, JobFormScreen), within=30)
        await pilot.press("y")
        await until(
            pilot, lambda: runtime.config.job("j07771").description == "job 7771, edited", 30
        )
        await until(pilot, lambda: not app.screen.is_modal, within=30)
        table.move_cursor(row=table.get_row_index("j04242"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, JobDetailScreen), within=30)
        shown = app.screen.query_one("#detail-definition", Static)
        await until(pilot, lambda: "job 4242" in str(shown.content), within=30)
        lines = str(shown.content).splitlines()
        assert "description: job 4242" in lines
        assert "  cron: 0 3 1 1 *" in lines
    text = path.read_text()
    assert '    description: "job 7771, edited"\n' in text or "'job 7771, edited'" in text
    assert text.count("\n") == 10_000 * 5 + 2


def test_the_console_rereads_only_the_jobs_an_edit_changed(tmp_path: Path) -> None:
    from tuisched.domain.config.diff import ConfigDiff, JobChange
    from tuisched.frontends.tui.state import ConsoleState

    def loaded(diff: ConfigDiff) -> ConfigLoaded:
        return ConfigLoaded(
            at=NOW, path=tmp_path / "tuisched.yaml", jobs=3, groups=0, origin="edit", diff=diff
        )

    edited = ConfigDiff(changed=(JobChange("report", (), None, None),))
    changes = ConsoleState().digest([loaded(edited)])
    assert (changes.everything, changes.touched, changes.hide_banner) == (False, {"report"}, True)
    for diff in (
        ConfigDiff(added=("new",)),
        ConfigDiff(removed=("old",)),
        ConfigDiff(groups=("g",)),
    ):
        assert ConsoleState().digest([loaded(diff)]).everything
    assert ConsoleState().digest([loaded(ConfigDiff(sections=("settings",)))]).everything
