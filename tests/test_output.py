"""Output capture: plain text only, bounded memory, lines for the live view, a capped file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tuisched.domain.text import plain_text
from tuisched.runtime.execution.output import LINE_MAX_CHARS, OutputCapture

# --- plain_text ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[1;31mred\x1b[0m text", "red text"),
        ("\x1b[2J\x1b[Hclear screen", "clear screen"),
        ("\x1b]0;window title\x07after", "after"),
        ("\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("\x1bPdevice control\x1b\\x", "x"),
        ("\x1b(Bcharset \x1b=keypad", "charset keypad"),
        ("bell\x07 backspace\x08 nul\x00 del\x7f c1\x9b end", "bell backspace nul del c1 end"),
        ("tab\tand\nnewline", "tab\tand\nnewline"),
        ("crlf\r\nline", "crlf\nline"),
        ("progress 10%\rprogress 20%", "progress 10%\nprogress 20%"),
        ("[bold]x[/bold] [red]not markup[/]", "[bold]x[/bold] [red]not markup[/]"),
        ("lone escape \x1b", "lone escape "),
        ("invoice\u202egpj.exe", "invoice\ufffdgpj.exe"),
        ("\u2066isolate\u2069 \u200emark\u061c", "\ufffdisolate\ufffd \ufffdmark\ufffd"),
    ],
)
def test_plain_text_strips_what_a_terminal_would_interpret(raw: str, shown: str) -> None:
    assert plain_text(raw) == shown
    assert plain_text(raw.encode()) == shown


def test_plain_text_replaces_invalid_utf8() -> None:
    assert plain_text(b"caf\xc3\xa9 \xff\xfe ok") == "caf\u00e9 \ufffd\ufffd ok"


# --- lines for the live view -------------------------------------------------------


class Lines:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, lines: tuple[str, ...]) -> None:
        self.calls.append(lines)

    @property
    def lines(self) -> list[str]:
        return [line for call in self.calls for line in call]


def test_on_lines_gets_complete_lines_only() -> None:
    lines = Lines()
    capture = OutputCapture(None, on_lines=lines)
    capture.write(b"one\ntw")
    capture.write(b"o\n\nthr")
    assert lines.calls == [("one",), ("two", "")]
    capture.write(b"ee")
    assert lines.calls == [("one",), ("two", "")]
    capture.close()
    assert lines.lines == ["one", "two", "", "three"]


def test_line_endings_split_across_writes() -> None:
    lines = Lines()
    capture = OutputCapture(None, on_lines=lines)
    for chunk in (b"a\r", b"\nb\r", b"c\n", "\u00e9".encode()[:1], "\u00e9\n".encode()[1:]):
        capture.write(chunk)
    assert lines.lines == ["a", "b", "c", "\u00e9"]


def test_lines_are_plain_text() -> None:
    lines = Lines()
    capture = OutputCapture(None, on_lines=lines)
    capture.write(b"\x1b[32mok\x1b[0m [b]kept[/b]\n\xff\n")
    assert lines.lines == ["ok [b]kept[/b]", "\ufffd"]


def test_a_long_line_arrives_in_pieces() -> None:
    lines = Lines()
    capture = OutputCapture(None, on_lines=lines)
    capture.write(b"x" * 999)
    assert lines.calls == []
    capture.write(b"y" * 1500)
    assert lines.lines == ["x" * 999 + "y", "y" * 1000]  # 499 characters still pending
    capture.write(b"y" * 600 + b"\n" + b"z" * 2500 + b"\n")
    assert [len(line) for line in lines.lines] == [1000, 1000, 1000, 99, 1000, 1000, 500]
    assert max(len(line) for line in lines.lines) == LINE_MAX_CHARS


def test_a_failing_listener_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def broken(_: tuple[str, ...]) -> None:
        raise RuntimeError("listener bug")

    capture = OutputCapture(None, on_lines=broken)
    with caplog.at_level(logging.ERROR, logger="tuisched.runtime.execution.output"):
        capture.write(b"line\n")
    assert capture.total_bytes == 5
    assert "output line listener failed" in caplog.text


# --- memory: head, tail, last line ------------------------------------------------


def test_head_and_tail_keep_both_ends() -> None:
    capture = OutputCapture(None, head_bytes=100, tail_bytes=100)
    for i in range(10_000):
        capture.write(f"line {i:05d}\n".encode())
    assert capture.total_bytes == 110_000
    assert capture.truncated
    assert capture.head().startswith("line 00000\nline 00001\n")
    assert len(capture.head()) == 100
    assert capture.tail() == "\n".join(f"line {i:05d}" for i in range(9991, 10_000))
    assert capture.tail(max_lines=2) == "line 09998\nline 09999"


def test_short_output_is_kept_whole() -> None:
    capture = OutputCapture(None, head_bytes=100, tail_bytes=100)
    capture.write(b"first\nsecond\n")
    assert not capture.truncated
    assert (capture.head(), capture.tail()) == ("first\nsecond\n", "first\nsecond")


def test_a_huge_chunk_keeps_only_the_tail() -> None:
    capture = OutputCapture(None, head_bytes=10, tail_bytes=10)
    capture.write(b"a" * 1_000_000 + b"0123456789")
    assert (capture.head(), capture.tail()) == ("a" * 10, "0123456789")


def test_last_line_is_the_last_non_blank_one() -> None:
    capture = OutputCapture(None)
    assert capture.last_line() == ""
    capture.write(b"done step 1\n\n   \n")
    assert capture.last_line() == "done step 1"
    capture.write(b"\x1b[33mwarming up")
    assert capture.last_line() == "warming up"


def test_writes_after_close_are_ignored() -> None:
    capture = OutputCapture(None)
    capture.write(b"a\n")
    capture.close()
    capture.close()
    capture.write(b"b\n")
    assert (capture.total_bytes, capture.tail(), capture.closed) == (2, "a", True)


# --- the output file ------------------------------------------------------------


def test_file_gets_the_raw_bytes_privately(tmp_path: Path) -> None:
    path = tmp_path / "run.out"
    path.write_bytes(b"old content from a previous run")
    path.chmod(0o644)
    capture = OutputCapture(path)
    capture.write(b"\x1b[31mraw\x1b[0m\n\xff")
    capture.close()
    assert path.read_bytes() == b"\x1b[31mraw\x1b[0m\n\xff"
    assert path.stat().st_mode & 0o777 == 0o600


def test_file_is_capped_with_a_marker(tmp_path: Path) -> None:
    path = tmp_path / "run.out"
    capture = OutputCapture(path, file_cap=10)
    capture.write(b"12345678")
    capture.write(b"90abcdef")
    capture.write(b"more")
    capture.close()
    assert path.read_bytes() == b"1234567890\n[output truncated at 10 bytes]\n"
    assert capture.total_bytes == 20
