"""The job form (`a` add, `e` edit): a definition built field by field, validated before it closes.

The form knows the common keys (kind, trigger, timeout, retries, priority,
overlap, description, enabled). Every other key of an edited job (`cwd`,
`env`, `requires`, `alerts`, `x-` notes...) is carried over untouched, in its
place. Saving checks the configuration the change would give, as a reload
would check it (the control seam's `preview`, nothing written), and lists every
problem under the form; only a valid definition leaves it, as `(name, definition)`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import ClassVar

import yaml
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from tuisched.domain.errors import TuischedError
from tuisched.domain.views import ConfigEdit
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


class _TextLoader(yaml.SafeLoader):
    """Reads every scalar as text: `[/bin/echo, yes]` keeps the word `yes`."""

    yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, object]]]] = {}  # type: ignore[misc]


class _TextDumper(yaml.SafeDumper):
    """Writes text scalars unquoted where YAML allows (`[/bin/echo, hi]`)."""

    yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, object]]]] = {}  # type: ignore[misc]


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
    shown = (
        yaml.dump(target, Dumper=_TextDumper, default_flow_style=True, width=10_000).strip()
        if isinstance(target, list)
        else _text(target)
    )
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
        argv = yaml.load(text, Loader=_TextLoader)  # noqa: S506  (a SafeLoader subclass)
    except yaml.YAMLError as error:
        raise ValueError(f"command: not a YAML list: {error}") from None
    if not isinstance(argv, list) or not all(isinstance(item, str) for item in argv):
        raise ValueError("command: an argv is a YAML list of words, like [/bin/echo, hi]")
    return argv


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


class JobFormScreen(ModalScreen[tuple[str, dict[str, object]] | None]):
    """Add a job, or edit one (its name is then fixed); `escape` cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "save", "Save"),
    ]

    def __init__(
        self,
        control: SchedulerControl,
        name: str | None = None,
        definition: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__()
        self.control = control
        self.editing = name is not None
        self.original = dict(definition or {})
        self.values = values_from(name, self.original) if name is not None else FormValues()

    # --- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        title = f"Edit job {self.values.name}" if self.editing else "Add a job"
        with Vertical(classes="dialog", id="job-form"):
            yield Static(Text(title), classes="question")
            with VerticalScroll(id="form-fields"):
                for label, field, shown_for in self._fields():
                    classes = f"form-row -trigger {shown_for}" if shown_for else "form-row"
                    with Horizontal(classes=classes):
                        yield Label(label, classes="form-label")
                        yield field
            yield Static(id="form-problems")
            with Horizontal(classes="buttons"):
                yield Button("Cancel", id="form-cancel", compact=True)
                yield Button("Save (ctrl+s)", id="form-save", variant="primary", compact=True)

    def _fields(self) -> list[tuple[str, Widget, str]]:
        """(label, field, the triggers it is shown for; "" for always)."""
        v = self.values
        return [
            ("Name", Input(v.name, id="form-name", disabled=self.editing, compact=True), ""),
            ("Kind", _select(KINDS, v.kind, "form-kind"), ""),
            ("Value", Input(v.target, id="form-target", compact=True), ""),
            ("Trigger", _select(TRIGGERS, v.trigger, "form-trigger"), ""),
            ("Cron", _input(v.cron, "form-cron", "*/5 * * * *"), "-cron"),
            ("Every", _input(v.every, "form-every", "1 hour"), "-every"),
            ("Start", _input(v.start, "form-start", "2026-01-01T00:00"), "-cron -every"),
            ("Stop", _input(v.stop, "form-stop", "(optional)"), "-cron -every"),
            ("At", _input(v.at, "form-at", "2026-06-01T08:00"), "-at"),
            ("After job", _input(v.after_job, "form-after-job", "a job name"), "-after"),
            ("On", _select(OUTCOMES, v.after_on, "form-after-on"), "-after"),
            ("Delay", _input(v.after_delay, "form-after-delay", "10s"), "-after"),
            ("Timeout", _input(v.timeout, "form-timeout", "30m"), ""),
            ("Retries", _input(v.retries, "form-retries", "0"), ""),
            ("Priority", _input(v.priority, "form-priority", "0"), ""),
            ("Overlap", _select(OVERLAPS, v.overlap, "form-overlap", blank=True), ""),
            ("Description", Input(v.description, id="form-description", compact=True), ""),
            ("Enabled", Checkbox("enabled", v.enabled, id="form-enabled", compact=True), ""),
        ]

    def on_mount(self) -> None:
        self._show_trigger_fields()
        self._show_hint()
        self.query_one("#form-target" if self.editing else "#form-name", Input).focus()

    @on(Select.Changed, "#form-trigger")
    def _show_trigger_fields(self) -> None:
        trigger = self.query_one("#form-trigger", Select).value
        for row in self.query(".form-row.-trigger"):
            row.display = row.has_class(f"-{trigger}")

    @on(Select.Changed, "#form-kind")
    def _show_hint(self) -> None:
        kind = self.query_one("#form-kind", Select).value
        self.query_one("#form-target", Input).placeholder = _TARGET_HINTS.get(str(kind), "")

    # --- reading and saving ---------------------------------------------------------------

    def read_values(self) -> FormValues:
        """The fields as typed now."""
        typed: dict[str, object] = {}
        for field in fields(FormValues):
            widget_id = f"#form-{field.name.replace('_', '-')}"
            widget = self.query_one(widget_id)
            if isinstance(widget, Input):
                typed[field.name] = widget.value
            elif isinstance(widget, Select):
                typed[field.name] = "" if widget.value is Select.NULL else str(widget.value)
            elif isinstance(widget, Checkbox):
                typed[field.name] = widget.value
        return FormValues(**typed)  # type: ignore[arg-type]

    @on(Button.Pressed, "#form-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#form-save")
    @on(Input.Submitted)
    async def action_save(self) -> None:
        values = self.read_values()
        name = values.name.strip()
        try:
            definition = definition_from(values, self.original)
        except ValueError as error:
            self._show_problems([str(error)])
            return
        save = self.query_one("#form-save", Button)
        save.disabled = True
        edit = (ConfigEdit.replace_job if self.editing else ConfigEdit.add_job)(name, definition)
        try:
            problems = await self.control.preview(edit)
        except TuischedError as error:
            problems = (str(error),)
        finally:
            save.disabled = False
        if problems:
            self._show_problems(list(problems))
        else:
            self.dismiss((name, definition))

    def _show_problems(self, problems: list[str]) -> None:
        box = self.query_one("#form-problems", Static)
        box.update(Text("\n".join(problems)))
        box.add_class("-shown")


def _input(value: str, widget_id: str, placeholder: str) -> Input:
    return Input(value, id=widget_id, placeholder=placeholder, compact=True)


def _select(
    options: tuple[str, ...], value: str, widget_id: str, *, blank: bool = False
) -> Select[str]:
    chosen = value if value in options else Select.NULL
    if not blank and chosen is Select.NULL:
        chosen = options[0]
    return Select(
        [(option, option) for option in options],
        value=chosen,
        allow_blank=blank,
        prompt="(default)",
        id=widget_id,
        compact=True,
    )
