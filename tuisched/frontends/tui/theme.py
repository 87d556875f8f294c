"""The console's default theme, safe for colour-blind readers.

Colours from Paul Tol's colour-blind-safe "bright" and "vibrant" schemes: no
pair of red and green carries meaning, and the console never relies on
colour alone (every state and result is also a word). Textual's other themes
stay available from the command palette.

In 16 colours (`TERM=xterm` without `COLORTERM`, or `TEXTUAL_COLOR_SYSTEM=standard`)
the orange accent becomes bright red, the error colour: a focused pane's border
and the footer's keys would read as errors. `theme_for` then picks `TUISCHED_16`,
whose accent becomes bright cyan there.
"""

from __future__ import annotations

from dataclasses import replace

from textual.theme import Theme

TUISCHED_THEME = Theme(
    name="tuisched",
    primary="#4477AA",  # blue
    secondary="#33BBEE",  # cyan
    accent="#EE7733",  # orange
    warning="#CCBB44",  # yellow
    error="#EE3377",  # magenta: tells from success without hue
    success="#009988",  # teal
    foreground="#E6E6E6",
    background="#16181D",
    surface="#1F232A",
    panel="#262B33",
    dark=True,
)

TUISCHED_16 = replace(TUISCHED_THEME, name="tuisched-16", accent="#33DDEE")  # bright cyan
"""The theme for 16 colours: focus and keys in bright cyan (errors keep bright red)."""


def theme_for(color_system: str | None) -> Theme:
    """The console's theme for a terminal of `color_system` (Rich's name for it)."""
    return TUISCHED_16 if color_system == "standard" else TUISCHED_THEME
