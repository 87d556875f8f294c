"""The console's default theme, safe for colour-blind readers.

Colours from Paul Tol's colour-blind-safe "bright" and "vibrant" schemes: no
pair of red and green carries meaning, and the console never relies on
colour alone (every state and result is also a word). Textual's other themes
stay available from the command palette.
"""

from __future__ import annotations

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
