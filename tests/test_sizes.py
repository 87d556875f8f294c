"""Sizes as operators write them, and `settings.output_max` that takes one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuisched.domain.errors import ConfigError
from tuisched.domain.sizes import format_size, parse_size
from tuisched.runtime.configfiles import load_config

from .runtime_fixtures import write_config


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1048576", 1048576),
        ("64MiB", 64 * 1024**2),
        ("64 MiB", 64 * 1024**2),
        ("1gib", 1024**3),
        ("2G", 2 * 1024**3),
        ("500MB", 500_000_000),
        ("1TB", 10**12),
        ("10KiB", 10240),
        ("7b", 7),
    ],
)
def test_sizes_read(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "MiB", "1.5GiB", "-1MiB", "1 PiB", "1e9", "٣MiB", "1MiBs"])
def test_bad_sizes_say_the_accepted_forms(text: str) -> None:
    with pytest.raises(ValueError, match="write it like 64MiB"):
        parse_size(text)


@pytest.mark.parametrize("size", [1, 1023, 1024, 64 * 1024**2, 3 * 1024**3, 1500, 1024**4])
def test_format_size_reads_back(size: int) -> None:
    assert parse_size(format_size(size)) == size


def test_settings_output_max_defaults_to_64_mib(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, "a: {command: [/bin/true], schedule: manual}"))
    assert config.settings.output_max == 64 * 1024**2


def test_settings_output_max_is_read(tmp_path: Path) -> None:
    path = write_config(
        tmp_path, "a: {command: [/bin/true], schedule: manual}", settings="output_max: 2GiB"
    )
    assert load_config(path).settings.output_max == 2 * 1024**3


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("lots", "output_max: bad size 'lots'"),
        ("1KiB", "output_max must be from 1MiB to 1TiB, not 1KiB"),
        ("2TiB", "output_max must be from 1MiB to 1TiB, not 2TiB"),
    ],
)
def test_a_bad_output_max_names_the_file_and_line(tmp_path: Path, value: str, message: str) -> None:
    path = write_config(
        tmp_path, "a: {command: [/bin/true], schedule: manual}", settings=f"output_max: {value}"
    )
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    (problem,) = raised.value.problems
    assert str(problem).startswith(f"{path}:")
    assert message in str(problem)
