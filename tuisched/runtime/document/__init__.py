"""Edit a configuration file's text in place, and write it back atomically.

R16 asks that adding, modifying and deleting jobs and groups keep the
operator's comments, blank lines, quotes and key order. PyYAML cannot write
a file back with its comments, so this module uses ruamel.yaml's round-trip
mode, and uses it **only for writing**: what a configuration *means* is still
decided by `tuisched.domain.config.config` (PyYAML events, every scalar taken as the text
written, one error report). Two readers would drift; a writer that only has
to reproduce text cannot disagree with the reader about meaning, because
every value it writes is a string that the reader takes verbatim.

ruamel.yaml is configured for that job (TRAPS.md):

- a *text-only resolver*: a plain scalar is a string unless it is a null form
  (empty, `~`, `null`) or the merge key `<<`, exactly as `tuisched.domain.config.yamlsource`
  reads it. Loading never turns `2026-01-01T00:00`, `0755`, `yes` or `12:30`
  into other types, and dumping a string never adds quotes or `!!str` tags
  that were not in the file;
- `preserve_quotes`, so `"..."` and `'...'` stay as written, and a changed
  value keeps its old quotes;
- a very wide `width`, so long lines are never re-wrapped;
- the file's own indentation (mapping indent, sequence indent, dash offset),
  guessed from its text.

Values handed in through the API are converted to the text tuisched reads back
with the same meaning: booleans become `true`/`false`, numbers their decimal
text; the emitter quotes only what YAML syntax requires (`*/15 * * * *`,
`a: b`), with double quotes. New mappings are written in block style, new
lists of plain values in flow style (`[/bin/echo, hi]`), as the sample
configuration writes them.

ruamel.yaml keeps the comments and blank lines that follow a value with that
value (often with the last key of the job *before* the one they introduce).
Edits that remove or append a mapping's last key move that trailing text
along, so a comment stays above the job it describes.

A whole document is re-emitted with one indentation; a file that mixes
indentations is normalised to the first one found. Replacing (or adding) one
job goes through that job's block alone (`blocks`, used by
`tuisched.runtime.configedits`): only its text is loaded, re-emitted and
spliced back, and every other byte of the file is kept as it was.
"""

from tuisched.runtime.document.editor import ConfigDocument
from tuisched.runtime.document.files import atomic_write
from tuisched.runtime.document.values import Plain, as_text
from tuisched.runtime.document.yamlio import guess_indent

__all__ = ["ConfigDocument", "Plain", "as_text", "atomic_write", "guess_indent"]
