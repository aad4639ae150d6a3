"""Bad monitor configs end with one line naming the file, the line and the field; never a traceback.

One table: each row is what a newcomer might write and what the error must name. Every row is
also run through ``driftwarden replay --config`` to see the red line and exit code 1.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.core.errors import ConfigError
from driftwarden.schemas.config import MAX_DEPTH, load_config

MODELS = "models: [{name: m, features: {x: numeric}}]\n"

# (id, file content (bytes) or None for a special path, expected "line: field" text in the error)
BAD_CONFIGS = [
    ("zero-size", f"window: {{size: 0s}}\n{MODELS}", ":1: window.size: '0s': a window must last at least 1 ms"),
    ("zero-size-number", f"{MODELS}window:\n  size: 0\n", ":3: window.size: 0: a window must last"),
    ("sub-ms-size", f"window: {{size: 0.4ms}}\n{MODELS}", ":1: window.size:"),
    ("yes-size", f"window: {{size: yes}}\n{MODELS}", ":1: window.size: True is not a duration (YAML reads yes"),
    ("word-size", f"window: {{size: soon}}\n{MODELS}", ":1: window.size: 'soon' is not a duration"),
    ("list-size", f"window: {{size: [1]}}\n{MODELS}", ":1: window.size: [1] is not a duration"),
    ("negative-size", f"window: {{size: -5}}\n{MODELS}", ":1: window.size: -5 is a negative duration"),
    ("negative-text", f"window: {{out_of_orderness: -5s}}\n{MODELS}", ":1: window.out_of_orderness: '-5s' is not"),
    ("negative-idleness", f"{MODELS}window: {{idleness: -0.5}}\n", ":2: window.idleness: -0.5 is a negative"),
    ("infinite-size", f"window: {{size: .inf}}\n{MODELS}", ":1: window.size: inf is not a finite duration"),
    ("nan-size", f"window: {{size: .nan}}\n{MODELS}", ":1: window.size: nan is not a finite duration"),
    ("100-day-size", f"window: {{size: 2400h}}\n{MODELS}", ":1: window.size: '2400h' must be below 100 days"),
    ("100-day-lateness", f"window: {{out_of_orderness: 2400h}}\n{MODELS}", ":1: window.out_of_orderness: '2400h' must be below"),
    ("nan-alpha", f"thresholds: {{alpha: .nan}}\n{MODELS}", ":1: thresholds.alpha: Input should be a finite number"),
    ("nan-psi", f"{MODELS}thresholds:\n  psi_major: .NaN\n", ":3: thresholds.psi_major: Input should be a finite"),
    ("inf-psi", f"thresholds: {{psi_minor: .inf}}\n{MODELS}", ":1: thresholds.psi_minor: Input should be a finite"),
    ("minor-above-major", f"thresholds: {{psi_minor: 0.3}}\n{MODELS}", ":1: thresholds: psi_minor (0.3) must be below"),
    ("fixed-is-not-a-key", f"thresholds: {{fixed: true}}\n{MODELS}", ":1: thresholds.fixed: Extra inputs are not"),
    ("duplicate-section", f"window: {{size: 5s}}\n{MODELS}window: {{size: 6s}}\n",
     ":3: window: given twice (first on line 1)"),
    ("duplicate-nested", f"{MODELS}window:\n  size: 5s\n  size: 6s\n", ":4: window.size: given twice (first on line 3)"),
    ("duplicate-in-list", "models:\n  - name: m\n    features: {x: numeric, x: categorical}\n",
     ":3: models.0.features.x: given twice"),
    ("not-utf8", b"models: [{name: m, features: {x: numeric}}]\n# caf\xe9\n", ":2: not UTF-8 (byte 0xe9"),
    ("too-deep", MODELS + "alerting: " + "[" * 3000 + "]" * 3000 + "\n", f":2: not valid YAML: nested deeper than {MAX_DEPTH}"),
    ("too-deep-block", MODELS + "alerting:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 200)),
     f"not valid YAML: nested deeper than {MAX_DEPTH}"),
    ("nul-byte", f"{MODELS}source: {{group_id: a\0b}}\n", ":2: not valid YAML: character #x0000 is not allowed"),
    ("bad-yaml", f"{MODELS}window: {{size: 5s\n", ":3: not valid YAML:"),
    ("empty", b"", ":1: the config is empty"),
    ("only-comment", b"# nothing yet\n", ":1: the config is empty"),
    ("a-list", b"- models\n", ":1: the config must be a mapping"),
    ("unknown-kind", "models:\n  - name: m\n    features:\n      x: textual\n", ":4: models.0.features.x: Input should be"),
    ("no-models", b"window: {size: 5s}\n", ":1: models: Field required"),
    ("prediction-clash", "models:\n  - name: fraud-v3\n    features: {amount: numeric, prediction: numeric}\n",
     ":2: models.0: model 'fraud-v3': a feature named 'prediction' clashes with the monitored prediction"),
    ("segments-by-numeric", "models:\n  - name: m\n    features: {x: numeric, country: categorical}\n"
     "    segments:\n      by: [x]\n",
     ":5: models.0.segments: by: 'x' is a numeric feature; segments are cut by categorical features ('country')"),
    ("segments-by-unknown", "models:\n  - name: m\n    features: {x: numeric, country: categorical}\n"
     "    segments: {by: [country, os]}\n", ":4: models.0.segments: by: 'os' is not a feature of the model"),
    ("segments-top-zero", "models:\n  - name: m\n    features: {country: categorical}\n"
     "    segments:\n      by: [country]\n      top: 0\n", ":6: models.0.segments.top: Input should be greater than"),
    ("segments-no-by", "models: [{name: m, features: {c: categorical}, segments: {by: []}}]\n",
     ":1: models.0.segments.by: Tuple should have at least 1 item"),
    ("segments-by-twice", "models: [{name: m, features: {c: categorical}, segments: {by: [c, c]}}]\n",
     ":1: models.0.segments.by: a feature may appear once in by; repeated: 'c'"),
    ("segments-min-count", "models: [{name: m, features: {c: categorical}, segments: {by: [c], min_count: 0}}]\n",
     ":1: models.0.segments.min_count: Input should be greater than or equal to 1"),
    ("prediction-not-bool", "models: [{name: m, features: {x: numeric}, monitor_prediction: maybe}]\n",
     ":1: models.0.monitor_prediction: Input should be a valid boolean"),
    ("season-warmup", f"{MODELS}reference:\n  mode: warmup\n  season: 1d\n",
     ":3: reference: season needs mode file or rolling"),
    ("season-not-whole-windows", f"window: {{size: 7m}}\nreference: {{mode: rolling, season: 1h}}\n{MODELS}",
     ":2: reference: season '1h' must be a whole number of windows (420,000 ms each)"),
    ("season-word", f"reference: {{mode: rolling, season: daily}}\n{MODELS}",
     ":1: reference.season: 'daily' is not a duration like 60s, 5m, 250ms, 1d"),
    ("tolerance-without-season", f"reference: {{mode: rolling, phase_tolerance: 1h}}\n{MODELS}",
     ":1: reference: phase_tolerance needs a season"),
    ("tolerance-past-half-season", f"window: {{size: 1h}}\nreference: {{mode: rolling, season: 1d, phase_tolerance: 12h}}\n"
     f"{MODELS}", ":2: reference: phase_tolerance '12h' (12 windows each side) spans more than the season '1d'"),
    ("rolling-too-few-seasons", f"window: {{size: 1h}}\nreference:\n  mode: rolling\n  season: 1d\n  phase_tolerance: 0\n"
     f"{MODELS}", ":3: reference: seasons 2: with phase_tolerance 0 windows each side a season gives 1 reference windows "
     "per phase, and calibration needs 5: set seasons to 5 or widen phase_tolerance"),
    ("one-season", f"window: {{size: 1h}}\nreference: {{mode: rolling, season: 1d, seasons: 1}}\n{MODELS}",
     ":2: reference.seasons: Input should be greater than or equal to 2"),
    ("unknown-section", f"{MODELS}windows: {{size: 5s}}\n", ":2: windows: Extra inputs are not permitted"),
    ("unhashable-key", f"{MODELS}alerting: {{[a]: 1}}\n", ":2: not valid YAML: while constructing a mapping"),
    ("directory", None, ": cannot read the config: Is a directory"),
    ("missing", None, ": cannot read the config: No such file or directory"),
    ("below-a-file", None, ": cannot read the config: Not a directory"),
    # a file that opens but cannot be read, even by root (chmod 000 would not stop root)
    ("unreadable", None, ": cannot read the config: Input/output error"),
]


def _config_path(tmp_path: Path, case: str, content: bytes | str | None) -> Path:
    """Write the case's file (or make the special path it names)."""
    path = tmp_path / f"{case}.yaml"
    if case == "directory":
        path.mkdir()
    elif case == "unreadable":
        path = Path("/proc/self/mem")  # reading it at offset 0 fails with EIO
    elif case == "below-a-file":
        (tmp_path / "plain").write_text(MODELS)
        path = tmp_path / "plain" / "c.yaml"
    elif content is not None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


@pytest.mark.parametrize("case,content,expected", BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_is_one_line_naming_file_line_and_field(tmp_path, case, content, expected):
    path = _config_path(tmp_path, case, content)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:") and "\n" not in message, message
    assert expected in message, message


@pytest.mark.parametrize("case,content,expected", BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_replay_prints_the_config_error_as_one_red_line(tmp_path, case, content, expected):
    path = _config_path(tmp_path, case, content)
    events = tmp_path / "events.jsonl"
    events.write_bytes(orjson.dumps({"event_time": 1767225600000, "model": "m", "features": {"x": 1}}) + b"\n")
    result = CliRunner().invoke(app, ["replay", "--no-progress", "--input", str(events), "--config", str(path)])
    assert result.exit_code == 1, result.output
    assert result.output.count("\n") == 1 and result.output.startswith("ConfigError: "), result.output
    assert expected in result.output, result.output


def test_legal_durations_still_work(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(f"window: {{size: 1.5, out_of_orderness: 0, idleness: 250ms}}\n{MODELS}")
    window = load_config(path).window
    assert (window.size_ms, window.out_of_orderness_ms, window.idleness_ms) == (1500, 0, 250)


def test_seasons_read_days_and_weeks(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(f"window: {{size: 1h}}\nreference: {{mode: rolling, season: 1w, phase_tolerance: 2h, seasons: 3}}\n"
                    f"{MODELS}")
    reference = load_config(path).reference
    assert (reference.season_ms, reference.tolerance_windows(3_600_000), reference.seasons) == (604_800_000, 2, 3)
    assert reference.seasons_needed(3_600_000) == 2


def test_yaml_merge_keys_are_not_duplicates(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(f"{MODELS}base: &b {{size: 5s, idleness: 1s}}\n")
    with pytest.raises(ConfigError, match=r":2: base: Extra inputs"):  # the anchor parses; the key is unknown
        load_config(path)
    path.write_text(f"{MODELS}window: {{<<: {{size: 5s, idleness: 1s}}, size: 7s}}\n")
    assert load_config(path).window.size_ms == 7000


#: Rows that are about reading the file, not the monitor config's fields: the alert rules
#: (`driftwarden alerts deliver --config`, the demo's delivery worker) read the same file the same way.
READ_ERRORS = {"duplicate-section", "duplicate-nested", "duplicate-in-list", "not-utf8", "too-deep", "too-deep-block",
               "nul-byte", "bad-yaml", "unhashable-key", "directory", "missing", "below-a-file", "unreadable"}


@pytest.mark.parametrize("case,content,expected", [c for c in BAD_CONFIGS if c[0] in READ_ERRORS],
                         ids=[c[0] for c in BAD_CONFIGS if c[0] in READ_ERRORS])
def test_alerts_deliver_reads_the_config_the_same_way(tmp_path, case, content, expected):
    path = _config_path(tmp_path, case, content)
    result = CliRunner().invoke(app, ["alerts", "deliver", "--once", "--store-url", f"sqlite:///{tmp_path / 's.db'}",
                                      "--config", str(path)])
    assert isinstance(result.exception, ConfigError), result.output + repr(result.exception)  # main() prints it
    message = str(result.exception)
    assert message.startswith(f"{path}:") and "\n" not in message, message
    assert expected in message, message


BAD_ALERTING = [
    ("format", "alerting:\n  routes:\n    - name: a\n      url: https://hooks.example.com/T0KEN\n      format: teams\n",
     ":5: alerting.routes.0.format: Input should be 'native', 'alertmanager' or 'slack'"),
    ("duration", f"{MODELS}alerting:\n  group_wait: soon\n", ":3: alerting.group_wait: Input should be a valid timedelta"),
    ("not-a-mapping", f"{MODELS}alerting: [1]\n", ":2: alerting: Input should be a valid dictionary"),
    ("rules-only-file", "group_wait: 30s\nroutes: 1\n", ":2: routes: Input should be a valid tuple"),
]


@pytest.mark.parametrize("case,content,expected", BAD_ALERTING, ids=[c[0] for c in BAD_ALERTING])
def test_a_bad_alerting_section_names_file_line_and_field(tmp_path, case, content, expected):
    from driftwarden.alerting.rules import load_rules

    path = tmp_path / f"{case}.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        load_rules(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:") and "\n" not in message and "T0KEN" not in message, message
    assert expected in message, message


def test_a_monitor_config_without_alerting_has_the_default_rules(tmp_path):
    from driftwarden.alerting.rules import AlertRules, load_rules

    path = tmp_path / "monitor.yaml"
    path.write_text(f"window: {{size: 60s}}\n{MODELS}")
    assert load_rules(path) == AlertRules() and load_config(path).alerting == {}


def test_the_job_names_file_line_and_field_of_a_bad_alerting_section(tmp_path):
    """`driftwarden run` refuses a bad alerting section before the job starts, as `alerts deliver` does."""
    path = tmp_path / "monitor.yaml"
    path.write_text(f"{MODELS}alerting:\n  group_wait: soon\n")
    result = CliRunner().invoke(app, ["run", "--config", str(path), "--store-url", f"sqlite:///{tmp_path / 's.db'}"])
    assert isinstance(result.exception, ConfigError), result.output + repr(result.exception)
    message = str(result.exception)
    assert message.startswith(f"{path}:3: alerting.group_wait: Input should be a valid timedelta"), message
