"""The job form (`a` add, `e` edit): a definition built field by field, validated before it closes.

The form knows the common keys (kind, trigger, timeout, retries, priority,
overlap, description, enabled). Every other key of an edited job (`cwd`,
`env`, `requires`, `alerts`, `x-` notes...) is carried over untouched, in its
place. Saving checks the configuration the change would give, as a reload
would check it (the control seam's `preview`, nothing written), and shows each
problem once: next to the field it is about, or under the form when it is about
no field (another job the change breaks). A valid definition is then confirmed
and saved from the form (the seam's `edit`), which closes only once it is
saved: a save refused (an offline edit pending, a problem found as it is
written, the scheduler gone) keeps the form with everything typed and the
reason on it. Nothing typed is lost by a key: a save that changes nothing
closes the form saying so (nothing written), and `escape` asks before it
discards changes, naming the fields changed.

While the fields change, the form shows what the edit would do (SPEC R25):
the job's next slots before and after it side by side, the clock changes its
new schedule meets, and the jobs whose `after`/`requires` it touches (the
seam's `impact`, asked once typing pauses, after the form is drawn, off the
event loop).
"""

from __future__ import annotations

import contextlib
import re
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Input, Label, Static
from textual.worker import WorkerError

from tuisched.domain.errors import ConfigError, TuischedError
from tuisched.domain.views import ConfigEdit, EditImpact
from tuisched.frontends.tui.screens.dialogs import ConfirmScreen
from tuisched.frontends.tui.view import MINUTES_SHAPE, SECONDS_SHAPE, has_seconds
from tuisched.frontends.tui.widgets.choice import Choice
from tuisched.frontends.tui.yamltext import flow_text, read_text
from tuisched.runtime.control import SchedulerControl

KINDS = ("command", "python", "wait_for")
TRIGGERS = ("cron", "every", "at", "manual", "after")
OVERLAPS = ("skip", "allow", "queue")
OUTCOMES = ("success", "failure", "both")
_MANAGED = frozenset({*KINDS, "schedule", "after", "timeout", "retries", "priority"}) | {
    "overlap", "description", "enabled",
}  # fmt: skip
"""Keys the form edits; any other key of a definition is kept as it is."""
_PLAIN_FIELDS = ("timeout", "retries", "priority", "overlap", "description")
_INTEGER = re.compile(r"[+-]?\d+")
_TARGET_HINTS = {
    "command": "a shell string, or an argv as a YAML list: [/bin/echo, hi]",
    "python": "package.module:attr",
    "wait_for": "a path or glob",
}


@dataclass(frozen=True, slots=True)
class FormValues:
    """What the form's fields say, as typed."""

    name: str = ""
    kind: str = "command"
    target: str = ""
    trigger: str = "cron"
    cron: str = ""
    every: str = ""
    start: str = ""
    stop: str = ""
    at: str = ""
    after_job: str = ""
    after_on: str = "success"
    after_delay: str = ""
    timeout: str = ""
    retries: str = ""
    priority: str = ""
    overlap: str = ""
    description: str = ""
    enabled: bool = True


def _text(value: object) -> str:
    return "" if value is None else str(value)


def values_from(name: str, definition: Mapping[str, object]) -> FormValues:
    """The form's fields for an existing definition (plain text values)."""
    kind = next((key for key in KINDS if key in definition), "command")
    target = definition.get(kind)
    shown = flow_text(target) if isinstance(target, list) else _text(target)
    text = {key: _text(definition.get(key)) for key in _PLAIN_FIELDS}
    values = FormValues(
        name=name, kind=kind, target=shown, timeout=text["timeout"], retries=text["retries"],
        priority=text["priority"], overlap=text["overlap"], description=text["description"],
        enabled=_text(definition.get("enabled", "true")).lower() not in ("false", "no", "off"),
    )  # fmt: skip
    return _trigger_values(values, definition)


def _trigger_values(values: FormValues, definition: Mapping[str, object]) -> FormValues:
    after, schedule = definition.get("after"), definition.get("schedule")
    if after is not None:
        after_map = after if isinstance(after, Mapping) else {"job": after}
        return replace(
            values, trigger="after", after_job=_text(after_map.get("job")),
            after_on=_text(after_map.get("on")) or "success",
            after_delay=_text(after_map.get("delay")),
        )  # fmt: skip
    if not isinstance(schedule, Mapping):
        return replace(values, trigger="manual" if schedule == "manual" else "cron")
    form = next((key for key in ("cron", "every", "at") if key in schedule), "cron")
    read = {key: _text(schedule.get(key)) for key in ("cron", "every", "at", "start", "stop")}
    return replace(
        values, trigger=form, cron=read["cron"], every=read["every"], at=read["at"],
        start=read["start"], stop=read["stop"],
    )  # fmt: skip


def _target(values: FormValues) -> object:
    """The kind's value; a command written `[...]` is an argv (ValueError if malformed)."""
    text = values.target.strip()
    if values.kind != "command" or not text.startswith("["):
        return text
    try:
        argv = read_text(text)
    except yaml.YAMLError as error:
        raise ValueError(f"command: not a YAML list ({_yaml_reason(error)})") from None
    if not isinstance(argv, list) or not all(isinstance(item, str) for item in argv):
        raise ValueError("command: an argv is a YAML list of words, like [/bin/echo, hi]")
    return argv


def _yaml_reason(error: yaml.YAMLError) -> str:
    """PyYAML's reason in one line: `expected ',' or ']' at column 15` (its own text
    spans six lines, which read as six problems)."""
    problem = getattr(error, "problem", None) or "cannot be read"
    mark = getattr(error, "problem_mark", None)
    where = f" at column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}".replace("'<stream end>'", "the end")


def _trigger(values: FormValues) -> tuple[str, object]:
    """(`schedule` or `after`, its value) for the chosen trigger."""
    if values.trigger == "manual":
        return "schedule", "manual"
    if values.trigger == "after":
        after: dict[str, object] = {"job": values.after_job.strip()}
        if values.after_on != "success":
            after["on"] = values.after_on
        if values.after_delay.strip():
            after["delay"] = values.after_delay.strip()
        return "after", after
    schedule: dict[str, object] = {values.trigger: getattr(values, values.trigger).strip()}
    if values.trigger != "at":
        for key in ("start", "stop"):
            if getattr(values, key).strip():
                schedule[key] = getattr(values, key).strip()
    return "schedule", schedule


def _number(text: str) -> object:
    """An int when the text is one; otherwise the text, for the validator to name."""
    text = text.strip()
    return int(text) if _INTEGER.fullmatch(text) else text


def definition_from(
    values: FormValues, original: Mapping[str, object] | None = None
) -> dict[str, object]:
    """The definition the form describes; keys it does not know kept from `original`.

    Raises:
        ValueError: a field cannot be turned into a value at all (a malformed argv).
    """
    trigger_key, trigger = _trigger(values)
    original = original or {}
    if isinstance(original.get("after"), str) and trigger == {"job": values.after_job.strip()}:
        trigger = values.after_job.strip()  # `after: export` stays written that way
    new: dict[str, object] = {"description": values.description.strip()}
    new[values.kind] = _target(values)
    new[trigger_key] = trigger
    new.update(timeout=values.timeout.strip(), retries=_number(values.retries))
    new.update(priority=_number(values.priority), overlap=values.overlap)
    if not values.enabled or "enabled" in original:
        new["enabled"] = values.enabled
    new = {key: value for key, value in new.items() if value != ""}
    return _merged(new, original)


def _merged(new: dict[str, object], original: Mapping[str, object]) -> dict[str, object]:
    """`new` laid over `original`: unknown keys kept, a changed kind or trigger in place."""
    result: dict[str, object] = {}
    triggers = ("schedule", "after")
    for key, value in original.items():
        if key not in _MANAGED:
            result[key] = value
            continue
        # A new kind takes the old kind's place; a new trigger the old trigger's.
        slot = KINDS if key in KINDS else triggers if key in triggers else (key,)
        for placed in slot:
            if placed in new and placed not in result:
                result[placed] = new[placed]
    for key, value in new.items():
        result.setdefault(key, value)
    return result


IMPACT_DELAY = 0.3
"""Seconds typing must pause before the impact preview is asked again."""
_SLOT_WIDTH = 30
"""Width of the `now` column of the preview: a slot is `Thu 2026-05-07 09:30 CEST`
(three more with seconds)."""
_FIELD_KEYS = {
    "schedule.cron": "cron", "schedule.every": "every", "schedule.start": "start",
    "schedule.stop": "stop", "schedule.at": "at", "schedule": "trigger",
    "an 'every' schedule needs 'start'": "start", "after.delay": "after-delay",
    "after.on": "after-on", "after": "after-job", "timeout": "timeout",
    "a wait_for job needs a timeout": "timeout", "retries": "retries",
    "priority": "priority", "overlap": "overlap", "description": "description",
    "enabled": "enabled", "command": "target", "python": "target", "wait_for": "target",
    "a job needs a trigger source": "trigger", "a job name": "name", "bad job name": "name",
    "'self' is reserved": "name",
}  # fmt: skip
"""How a problem about the edited job starts -> the form field it is about."""


class JobFormScreen(ModalScreen[str | None]):
    """Add a job, or edit one (its name is then fixed), and save it; `escape` cancels
    (asking first when something was changed). Dismissed with what was done (`backup
    saved`, `backup: nothing changed`), or None when nothing was."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "save", "Save"),
    ]

    def __init__(
        self,
        control: SchedulerControl,
        name: str | None = None,
        definition: Mapping[str, object] | None = None,
        *,
        file: str = "the configuration",
    ) -> None:
        """`file` names the configuration file in the question before saving."""
        super().__init__()
        self.control = control
        self.file = file
        self.editing = name is not None
        self.original = dict(definition or {})
        self.values = values_from(name, self.original) if name is not None else FormValues()
        self.impact: EditImpact | None = None
        """The latest impact preview shown (None until the first arrives)."""
        self._impact_timer: Timer | None = None
        self._asked: ConfigEdit | None = None
        self._problems_shown = False
        self._refusal = ""
        """Why the last save was refused (kept on the form until the next save)."""
        self._saving = False
        self._box_lines: list[str] = []
        """The problems shown in the box under the form (the refusal aside)."""
        # Focused as it is composed: a second focus change would restyle the whole form.
        self.AUTO_FOCUS = "#form-target" if self.editing else "#form-name"  # type: ignore[misc]

    # --- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        title = f"Edit job {self.values.name}" if self.editing else "Add a job"
        with Vertical(classes="dialog", id="job-form"):
            yield Static(Text(title), classes="question")
            # Grids of labels and fields, and only the chosen trigger's fields: every widget
            # more is styled before the form shows (SPEC R18: it opens at once).
            fields = self._fields()
            split = next(i for i, field in enumerate(fields) if field.key == "timeout")
            with VerticalScroll(id="form-fields"):
                with Grid(classes="form-grid"):
                    yield from self._rows(fields[:split])
                # The preview under the trigger's fields, outside the grids: a grid sizes
                # a cell spanning its columns by its first column's width.
                yield Static(Text("Next runs: working them out...", style="dim"), id="form-impact")
                with Grid(classes="form-grid"):
                    yield from self._rows(fields[split:])
            yield Static(id="form-problems")
            with Horizontal(classes="buttons"):
                yield Button("Cancel", id="form-cancel", compact=True)
                yield Button("Save (ctrl+s)", id="form-save", variant="primary", compact=True)

    def _rows(self, fields: list[_Field]) -> Iterator[Widget]:
        for field in fields:
            if field.shown_for(self.values.trigger):
                yield from field.row()

    def _fields(self) -> list[_Field]:
        """Every field of the form, in order (each built only when first shown)."""
        v = self.values
        return [
            _Field("Name", "name", lambda: Input(v.name, disabled=self.editing, compact=True)),
            _Field("Kind", "kind", lambda: Choice(KINDS, v.kind)),
            _Field("Value", "target", lambda: Input(v.target, compact=True)),
            _Field("Trigger", "trigger", lambda: Choice(TRIGGERS, v.trigger)),
            _Field("Cron", "cron", lambda: _input(v.cron, "*/5 * * * *"), "cron"),
            _Field("Every", "every", lambda: _input(v.every, "1 hour"), "every"),
            _Field("Start", "start", lambda: _input(v.start, "2026-01-01T00:00"), "cron every"),
            _Field("Stop", "stop", lambda: _input(v.stop, "(optional)"), "cron every"),
            _Field("At", "at", lambda: _input(v.at, "2026-06-01T08:00"), "at"),
            _Field("After job", "after-job", lambda: _input(v.after_job, "a job name"), "after"),
            _Field("On", "after-on", lambda: Choice(OUTCOMES, v.after_on), "after"),
            _Field("Delay", "after-delay", lambda: _input(v.after_delay, "10s"), "after"),
            _Field("Timeout", "timeout", lambda: _input(v.timeout, "30m")),
            _Field("Retries", "retries", lambda: _input(v.retries, "0")),
            _Field("Priority", "priority", lambda: _input(v.priority, "0")),
            _Field("Overlap", "overlap", lambda: Choice(OVERLAPS, v.overlap, blank="(default)")),
            _Field("Description", "description", lambda: Input(v.description, compact=True)),
            _Field("Enabled", "enabled", lambda: Checkbox("enabled", v.enabled, compact=True)),
        ]

    def on_mount(self) -> None:
        self._show_hint()
        # The preview waits until the form is drawn and typing pauses: opening stays fast.
        self.call_after_refresh(self._impact_soon)

    @on(Choice.Changed, "#form-trigger")
    def _show_trigger_fields(self) -> None:
        """Show the chosen trigger's fields (built the first time), hide the others'."""
        trigger = self.query_one("#form-trigger", Choice).value
        previous: Widget = self.query_one("#form-trigger")  # the trigger's fields follow it
        for field in self._fields():
            found = self.query(f"#form-{field.key}")
            if found:
                previous = found.first()
            elif field.shown_for(trigger) and isinstance(previous.parent, Widget):
                row = field.row()
                previous.parent.mount(*row, after=previous)
                previous = row[-1]
        for part in self.query(".-trigger"):
            part.display = part.has_class(f"-{trigger}")

    @on(Choice.Changed, "#form-kind")
    def _show_hint(self) -> None:
        kind = self.query_one("#form-kind", Choice).value
        self.query_one("#form-target", Input).placeholder = _TARGET_HINTS.get(kind, "")

    # --- the impact preview ---------------------------------------------------------------

    @on(Input.Changed)
    @on(Choice.Changed)
    @on(Checkbox.Changed)
    def _impact_soon(self) -> None:
        """Ask for the preview again once typing pauses (one request per pause); the
        problems the last save found no longer describe the fields: they go."""
        if self._problems_shown:
            self._clear_problems()
        if self._impact_timer is not None:
            self._impact_timer.stop()
        self._impact_timer = self.set_timer(IMPACT_DELAY, self._ask_impact)

    def _ask_impact(self) -> None:
        values = self.read_values()
        try:
            definition = definition_from(values, self.original)
        except ValueError as error:  # a field no definition can hold: no need to ask
            self._asked = None
            base = self.impact or EditImpact(job=values.name.strip())
            self.impact = replace(
                base, after=(), dst=(), after_note=f"not valid yet: {error}", problems=(str(error),)
            )
            self._show_impact()
            return
        edit = self._edit(values.name.strip(), definition)
        if edit == self._asked:
            return
        self._asked = edit
        self.run_worker(self._fetch_impact(edit), group="impact", exclusive=True)

    async def _fetch_impact(self, edit: ConfigEdit) -> None:
        try:
            impact = await self.control.impact(edit)
        except TuischedError as error:
            self._asked = None  # asked again at the next change
            self._show_impact_text(Text(f"Next runs: no preview ({error})", style="dim"))
            return
        self.impact = impact
        self._show_impact()

    def _show_impact(self) -> None:
        """Draw the latest preview; while the save's problems are shown, it points at them
        rather than saying the first one again."""
        impact = self.impact
        if impact is None:
            return
        if self._problems_shown and impact.problems:
            impact = replace(impact, after_note="not valid yet: see the problems in the form")
        for pane in self.query("#form-impact").results(Static):
            pane.update(impact_text(impact, pane.content_size.width or 76))

    def _show_impact_text(self, text: Text) -> None:
        """Show `text` as the preview; nothing once the form is closing (Esc typed while
        the preview was asked: it comes back to no pane)."""
        for pane in self.query("#form-impact").results(Static):
            pane.update(text)

    # --- reading and saving ---------------------------------------------------------------

    def read_values(self) -> FormValues:
        """The fields as typed now."""
        typed: dict[str, object] = {}
        for field in fields(FormValues):
            widget_id = f"#form-{field.name.replace('_', '-')}"
            found = self.query(widget_id)  # a trigger's fields are built when first shown
            widget = found.first() if found else None
            if isinstance(widget, Input | Choice | Checkbox):
                typed[field.name] = widget.value
            else:
                typed[field.name] = getattr(self.values, field.name)
        return FormValues(**typed)  # type: ignore[arg-type]

    def _edit(self, name: str, definition: dict[str, object]) -> ConfigEdit:
        return (ConfigEdit.replace_job if self.editing else ConfigEdit.add_job)(name, definition)

    def changed_fields(self) -> list[str]:
        """The labels of the fields whose value differs from what the form opened with."""
        now, labels = self.read_values(), {f.key: f.label for f in self._fields()}
        return [
            labels[field.name.replace("_", "-")]
            for field in fields(FormValues)
            if getattr(now, field.name) != getattr(self.values, field.name)
        ]

    @on(Button.Pressed, "#form-cancel")
    def action_cancel(self) -> None:
        """Close the form; when something was changed, ask first (the default keeps it).
        While a save is under way, that save decides."""
        if self._saving:
            return
        changed = self.changed_fields()
        if not changed:
            self.dismiss(None)
            return
        name = self.read_values().name.strip()
        if self.editing:
            question = f"Discard your changes to {name}?"
        else:
            question = f"Discard the new job {name}?" if name else "Discard the new job?"
        question += f"\nChanged: {', '.join(changed)}"

        def answered(discard: bool | None) -> None:
            if discard:
                self.dismiss(None)

        self.app.push_screen(ConfirmScreen(question, yes="Discard"), answered)

    @on(Button.Pressed, "#form-save")
    @on(Input.Submitted)
    async def action_save(self) -> None:
        """Check the definition, ask, then save it; the form closes once it is saved.

        The check and the question are also a worker's, awaited here: keys typed after
        ctrl+s (its `y`) wait for the question it opens however ctrl+s reached the form
        (see `typeahead.py`: it waits for an action to end, and for the workers a key
        started), where they would reach a field while the check is under way."""
        if self._saving:
            return
        self._saving = True  # until the question is up (a second ctrl+s meanwhile is one)
        worker = self.run_worker(self._check_and_ask(), group="save-check")
        with contextlib.suppress(WorkerError):  # its failure is the worker's to report
            await worker.wait()

    async def _check_and_ask(self) -> None:
        try:
            await self._ask_to_save()
        finally:
            self._saving = False

    async def _ask_to_save(self) -> None:
        if self._impact_timer is not None:  # the check takes the lane the preview would use
            self._impact_timer.stop()
        if self._refusal:
            self._refusal = ""
            self._show_box(self._box_lines)
        values = self.read_values()
        name = values.name.strip()
        try:
            definition = definition_from(values, self.original)
        except ValueError as error:
            self._show_problems([_field_of(str(error))])  # the form's own check
            return
        if self.editing and self._unchanged(definition):
            self.dismiss(f"{name}: nothing changed")
            return
        edit = self._edit(name, definition)
        problems = await self._checked(edit)
        if problems:
            self._show_problems(placed_problems(problems, name))
            return
        question = (
            f"Save the changes to {name} in {self.file}?"
            if self.editing
            else f"Add job {name} to {self.file}?"
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._write(edit), group="save", exclusive=True)

        self.app.push_screen(ConfirmScreen(question), answered)

    def _unchanged(self, definition: dict[str, object]) -> bool:
        """Whether `definition` is what the form opened with (typed spaces aside)."""
        try:
            return definition == definition_from(self.values, self.original)
        except ValueError:  # the definition it opened with cannot be read back
            return False

    async def _checked(self, edit: ConfigEdit) -> tuple[str, ...]:
        """Every problem the seam's check of `edit` finds (the Save button off meanwhile)."""
        save = self.query_one("#form-save", Button)
        save.disabled = True
        try:
            return await self.control.preview(edit)
        except TuischedError as error:
            return (str(error),)
        finally:
            save.disabled = False

    async def _write(self, edit: ConfigEdit) -> None:
        """Save `edit`; refused, the form stays with the reason on it."""
        self._saving = True
        save = self.query_one("#form-save", Button)
        save.disabled = True
        try:
            await self.control.edit(edit)
        except ConfigError as error:  # found as it was written (changed meanwhile)
            problems = [str(problem) for problem in error.problems] or [str(error)]
            self._refused("the configuration would not be valid")
            self._show_problems(placed_problems(problems, edit.name))
            return
        except TuischedError as error:  # an offline edit pending, the scheduler gone...
            self._refused(str(error))
            return
        finally:
            self._saving = False
            save.disabled = False
        self.dismiss(f"{edit.name} {'saved' if self.editing else 'added'}")

    def _refused(self, reason: str) -> None:
        """Say on the form why the save was refused, until the next save."""
        reason = reason.rstrip(".")
        self._refusal = f"Not saved: {reason}.\nEverything typed is kept: ctrl+s tries again."
        self._show_box(self._box_lines)

    def _show_problems(self, placed: list[tuple[str, str]]) -> None:
        """Each problem (field, message) next to its field when it has one, else under
        the form."""
        self._clear_problems()
        elsewhere: list[str] = []
        for field, message in placed:
            found = self.query(f"#form-{field}") if field else None
            widget = found.first() if found else None
            if widget is not None and widget.display and isinstance(widget.parent, Widget):
                error = Static(Text(message), classes="form-error")
                widget.parent.mount(Label(classes="form-error-pad"), error, after=widget)
            else:
                elsewhere.append(message if not field else f"{_label(field)}: {message}")
        self._show_box(elsewhere)
        self._problems_shown = True
        self._show_impact()

    def _clear_problems(self) -> None:
        """Take the save's problems away (a refusal stays: typing does not change it)."""
        self.query(".form-error, .form-error-pad").remove()
        self._show_box([])
        self._problems_shown = False
        self._show_impact()

    def _show_box(self, lines: list[str]) -> None:
        """The box under the form: why the last save was refused, then `lines`."""
        self._box_lines = lines
        shown = [self._refusal, *lines] if self._refusal else lines
        box = self.query_one("#form-problems", Static)
        box.update(Text("\n".join(shown)))
        box.set_class(bool(shown), "-shown")


def placed_problems(problems: Iterable[str], name: str) -> list[tuple[str, str]]:
    """Each distinct problem as (form field, message): the field ("" for none) and, for a
    problem about job `name`'s own field, the message without its file, line and key."""
    placed: list[tuple[str, str]] = []
    own = f"job '{name}': "
    for problem in dict.fromkeys(problems):  # one cause, said once
        head, found, message = problem.partition(own)
        if not found or head.count(": ") > 1:
            placed.append(("", problem))
            continue
        field, said = _field_of(message)
        placed.append((field, said) if field else ("", problem))
    return placed


def _field_of(message: str) -> tuple[str, str]:
    """The form field a problem of the edited job is about, and its message without the
    key (`schedule.cron: minute field '61'...` -> (`cron`, `minute field '61'...`))."""
    for key in sorted(_FIELD_KEYS, key=len, reverse=True):
        if message.startswith(key) and message[len(key) : len(key) + 1] in (":", " ", ""):
            said = message[len(key) :].removeprefix(":").strip()
            return _FIELD_KEYS[key], said if said and message[len(key)] == ":" else message
    return "", message


def _label(field: str) -> str:
    return field.replace("-", " ").capitalize()


def impact_text(impact: EditImpact, width: int = 76) -> Text:
    """The preview as the form shows it: slots side by side, clock changes, dependencies
    (long lines wrapped to `width` under their own indent)."""
    text = Text()
    text.append(f"Next runs ({impact.timezone})\n", style="bold")
    zone = _zone(impact.timezone)
    marked = {slot.timestamp() for warning in impact.dst for slot in warning.slots}
    if impact.before or impact.after:
        if has_seconds((*impact.before, *impact.after)):  # a 10-second job: 07:00:10...
            shape, column = SECONDS_SHAPE, _SLOT_WIDTH + 3
        else:
            shape, column = MINUTES_SHAPE, _SLOT_WIDTH
        text.append(f"  {'now':<{column}}after this edit\n", style="dim")
        for row in range(max(len(impact.before), len(impact.after))):
            before = _slot_cell(impact.before, row, zone, marked, shape)
            after = _slot_cell(impact.after, row, zone, marked, shape)
            text.append(f"  {before:<{column}}{after}\n")
    for side, note in (("now", impact.before_note), ("after this edit", impact.after_note)):
        if note:
            text.append(_wrapped(f"{side}: {note}", width))
    warnings = [warning.text for warning in impact.dst]
    _section(text, "Clock changes (! marks a slot one moves or repeats)", warnings, width)
    _section(text, "Dependencies", impact.dependencies, width)
    text.rstrip()
    return text


def _zone(key: str) -> ZoneInfo | None:
    """The preview's zone, so slots read alike in a hosting and an attached console (a
    slot that crossed the socket carries only its offset)."""
    try:
        return ZoneInfo(key)
    except (ValueError, ZoneInfoNotFoundError):
        return None


def _slot_cell(
    slots: tuple[datetime, ...], row: int, zone: ZoneInfo | None, marked: set[float], shape: str
) -> str:
    if row >= len(slots):
        return ""
    slot = slots[row].astimezone(zone) if zone is not None else slots[row]
    flag = " !" if slot.timestamp() in marked else ""
    return slot.strftime(f"%a %Y-%m-%d {shape} %Z") + flag


def _section(text: Text, title: str, lines: Iterable[str], width: int) -> None:
    listed = list(lines)
    if listed:
        text.append(f"{title}\n", style="bold")
        for line in listed:
            text.append(_wrapped(line, width))


def _wrapped(line: str, width: int) -> str:
    """`line` indented, its continuation lines further in, so each item stands apart."""
    filled = textwrap.fill(line, max(width, 20), initial_indent="  ", subsequent_indent="    ")
    return filled + "\n"


@dataclass(frozen=True, slots=True)
class _Field:
    """One field of the form: its label, its id (`form-KEY`), how to build it, and the
    triggers it belongs to (space-separated; "" for a field every trigger has)."""

    label: str
    key: str
    make: Callable[[], Widget]
    triggers: str = ""

    def shown_for(self, trigger: str) -> bool:
        return not self.triggers or trigger in self.triggers.split()

    def row(self) -> tuple[Label, Widget]:
        """The label and the field, classed for the form's grid and its trigger."""
        classes = ["-trigger", *(f"-{name}" for name in self.triggers.split())]
        classes = classes if self.triggers else []
        field = self.make()
        field.id = f"form-{self.key}"
        return (
            Label(self.label, classes=" ".join(["form-label", *classes])),
            field.add_class("form-field", *classes),
        )


def _input(value: str, placeholder: str) -> Input:
    return Input(value, placeholder=placeholder, compact=True)
