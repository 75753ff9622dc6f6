"""deploy/SETTINGS.md is the one documented list of settings: it must say exactly what
tuner.service.settings.Settings parses, and every documented variable must parse."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.service.settings import READ_BY, REGENERATE, Settings, settings_markdown

DOC = Path(__file__).resolve().parents[2] / "deploy" / "SETTINGS.md"


def test_every_setting_says_who_reads_it_and_what_it_does():
    fields = set(Settings.model_fields)
    assert not fields - set(READ_BY), (
        f"add {sorted(fields - set(READ_BY))} to READ_BY in tuner/service/settings.py"
    )
    assert not set(READ_BY) - fields, f"READ_BY names settings that no longer exist: {set(READ_BY) - fields}"
    undocumented = [name for name, field in Settings.model_fields.items() if not field.description]
    assert not undocumented, f"give these fields a description=: {undocumented}"


def test_settings_md_is_generated_from_the_class():
    assert DOC.read_text() == settings_markdown(), (
        f"deploy/SETTINGS.md differs from tuner.service.settings.Settings; regenerate it: {REGENERATE}"
    )


def test_the_regenerate_command_prints_the_document():
    """The command the failure above names really writes what the test expects."""
    result = subprocess.run(
        [sys.executable, "-m", "tuner.service.settings"],
        cwd=DOC.parents[1],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == settings_markdown()


@pytest.mark.parametrize("name", list(Settings.model_fields))
def test_documented_variable_parses(name, monkeypatch, tmp_path):
    """The documented variable is the one pydantic-settings reads, and the documented default, as
    printed, is a valid value of it (a *_file setting: a file that exists)."""
    for variable in os.environ:
        if variable.startswith("TENSOR_TUNER_"):
            monkeypatch.delenv(variable)
    default = Settings.model_fields[name].default
    value = "some-value" if default is None else default
    if name.endswith("_file"):
        value = str(tmp_path / "secret")
        Path(value).write_text("sqlite://\n")
    monkeypatch.setenv(f"TENSOR_TUNER_{name.upper()}", str(value))
    settings = Settings()
    assert name in settings.model_fields_set
    assert getattr(settings, name) == value
