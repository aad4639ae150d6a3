"""`driftwarden replay` on a merchant id over 100,000 Zipf-distributed ids (issue 20), end to end.

The reference is raw events (built in replay the way `driftwarden reference build` builds it);
the stream has four drift-free windows, then three where 5% of traffic goes to 2,000 new ids.
"""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.replay.report import validate_report
from driftwarden.replay.synthetic import zipf_ids

T0, WINDOW_MS, PER_WINDOW = 1_767_225_600_000, 60_000, 3000  # 2026-01-01T00:00:00Z


def _events(rng: np.random.Generator, first_window: int, windows: int, new_share: float = 0.0) -> list[bytes]:
    lines = []
    for w in range(first_window, first_window + windows):
        for i, merchant in enumerate(zipf_ids(rng, PER_WINDOW, new_share=new_share)):
            event = {"event_time": T0 + w * WINDOW_MS + i * WINDOW_MS // PER_WINDOW, "model": "pay",
                     "features": {"merchant": merchant}}
            lines.append(orjson.dumps(event))
    return lines


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("cardinality")
    rng = np.random.default_rng(5)
    (folder / "ref.jsonl").write_bytes(b"\n".join(_events(rng, -30, 24)) + b"\n")
    stream = _events(rng, 0, 4) + _events(rng, 4, 3, new_share=0.05)
    (folder / "stream.jsonl").write_bytes(b"\n".join(stream) + b"\n")
    result = CliRunner().invoke(app, ["replay", "--no-progress", "--input", str(folder / "stream.jsonl"),
                                      "--reference", str(folder / "ref.jsonl"),
                                      "--report-json", str(folder / "r.json"), "--report-html", str(folder / "r.html")])
    assert result.exit_code == 0, result.output
    return {"doc": orjson.loads((folder / "r.json").read_bytes()), "html": (folder / "r.html").read_text()}


def test_new_ids_drift_from_their_first_window(replayed: dict) -> None:
    doc = replayed["doc"]
    validate_report(doc)
    merchant = [next(f for f in w["features"] if f["name"] == "merchant") for w in doc["windows"]]
    assert [f["drifted"] for f in merchant] == [False] * 4 + [True] * 3
    assert min(f["gate"]["new_share"] for f in merchant[4:]) > max(f["gate"]["new_share"] for f in merchant[:4])


def test_html_shows_unseen_share_and_moved_head_values_not_one_bar_per_value(replayed: dict) -> None:
    page = replayed["html"]
    assert "values the reference never saw" in page and "reference baseline" in page
    assert "top value that moved" in page and "(other)" in page
    assert page.count("data:image/png;base64,") == 3  # head bars, PSI over the head, unseen share per window
    moved = page[page.index("top value that moved"):]
    assert moved[:moved.index("</table>")].count("<tr><td>") <= 11  # at most 10 head values and "(other)"
    assert page.count("<tr") < 40  # no row per value anywhere: the ranking, the cell's windows, the moved values
