"""What the front door returns: the verdicts as a table and as a page (``to_html``, Jupyter's ``_repr_html_``)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from functools import cached_property
from os import PathLike
from pathlib import Path

import pandas as pd

from driftwarden.core.records import SEVERITIES, FeatureOutcome, WindowReport
from driftwarden.schemas.config import MonitorConfig

__all__ = ["Judgement", "VERDICT_COLUMNS"]

#: The columns of :attr:`Judgement.verdicts`, one row per (model, window, feature[, segment]).
VERDICT_COLUMNS = ("model", "window_start", "window_end", "feature", "segment", "kind", "count", "missing",
                   "invalid", "drifted", "severity", "alarm", "gate_ks", "gate_psi", "gate_emd", "gate_chi2",
                   "gate_new_share", "gate_missing_delta", "ks_pvalue", "chi2_pvalue", "p_adjusted", "psi", "emd",
                   "error")
#: Rows shown in a notebook before the rest is folded away (``to_html`` writes them all).
NOTEBOOK_ROWS = 50
SEVERITY_COLOURS = {"none": "#f3f4f6", "minor": "#fef3c7", "moderate": "#fdba74", "major": "#f87171"}
TABLE_COLUMNS = ("model", "window_start", "feature", "segment", "kind", "count", "missing", "invalid", "severity",
                 "drifted", "gate_ks", "gate_psi", "gate_new_share", "p_adjusted", "error")


@dataclass
class Judgement:
    """The verdicts of a front-door call.

    ``reports``: each judged (model, window)'s :class:`core.records.WindowReport`, as the job stores
    them; ``counts``: rows read, valid, rejected and late; ``rejections``: ``(coordinates, reason,
    detail)`` of each rejected row (coordinates: ``(name or path, row)``); ``config``: the monitor
    config used; ``notes``: what the caller should know (an inferred config, rejected rows).
    """

    reports: list[WindowReport]
    counts: dict[str, int]
    rejections: list[tuple[tuple, str, str]]
    config: MonitorConfig
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.rejections:
            coordinates, reason, detail = self.rejections[0]
            self.notes = [*self.notes, f"{len(self.rejections)} of {self.counts['read']} current rows rejected, "
                                       f"as the job would reject them (row {coordinates[-1]}: {reason}: {detail})"]

    @cached_property
    def verdicts(self) -> pd.DataFrame:
        """One row per (model, window, feature[, segment]) in the job's order; ``segment`` as ``key=value``."""
        rows = [_row(report, outcome) for report in self.reports for outcome in report.features]
        return pd.DataFrame(rows, columns=list(VERDICT_COLUMNS))

    @property
    def drifted(self) -> pd.DataFrame:
        """The rows of :attr:`verdicts` that drifted, worst first."""
        return _worst_first(self.verdicts[self.verdicts["drifted"]])

    def to_html(self, path: str | PathLike) -> Path:
        """Write the verdicts as a standalone HTML page (every row; the quiet ones folded away); its path."""
        path = Path(path)
        path.write_text("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>driftwarden verdicts</title>"
                        f"</head><body>{self._html(rows=None)}</body></html>\n", encoding="utf-8")
        return path

    def _repr_html_(self) -> str:
        """Jupyter's picture of the result: the summary, then the drifted rows and the first quiet ones."""
        return self._html(rows=NOTEBOOK_ROWS)

    def __repr__(self) -> str:
        drifted = self.verdicts[self.verdicts["drifted"]]
        return (f"<Judgement: {len(self.reports)} window(s), {len(self.verdicts)} verdicts, {len(drifted)} drifted"
                f"{': ' + ', '.join(sorted(set(drifted['feature']))) if len(drifted) else ''}>")

    def _html(self, rows: int | None) -> str:
        """The page's body: headline, notes, counts, the drifted rows, then the quiet ones folded."""
        verdicts = _worst_first(self.verdicts)
        drifted, quiet = verdicts[verdicts["drifted"]], verdicts[~verdicts["drifted"]]
        shown = quiet if rows is None else quiet.head(max(rows - len(drifted), 0))
        parts = [f"<div class=\"driftwarden\"><h3>driftwarden: {len(drifted)} of {len(verdicts)} verdicts "
                 f"drifted, {len(self.reports)} window(s)</h3>",
                 *[f"<p><em>{html.escape(note)}</em></p>" for note in self.notes],
                 "<p>" + ", ".join(f"{html.escape(k)}: {v}" for k, v in self.counts.items()) + "</p>",
                 _table(drifted) if len(drifted) else "<p>No feature drifted.</p>"]
        if len(quiet):
            more = "" if len(shown) == len(quiet) else f" ({len(quiet) - len(shown)} more in .verdicts)"
            parts.append(f"<details><summary>{len(quiet)} quiet verdicts{more}</summary>{_table(shown)}</details>")
        return "".join(parts) + "</div>"


def _row(report: WindowReport, f: FeatureOutcome) -> dict:
    """One verdict row."""
    segment = ", ".join(f"{k}={v}" for k, v in f.segment.items()) if f.segment else None
    return {"model": report.model, "window_start": report.window_start, "window_end": report.window_end,
            "feature": f.name, "segment": segment, "kind": f.kind, "count": f.count, "missing": f.missing,
            "invalid": f.invalid,
            "drifted": f.drifted, "severity": f.severity, "alarm": f.alarm, "gate_ks": f.gate_ks,
            "gate_psi": f.gate_psi, "gate_emd": f.gate_emd, "gate_chi2": f.gate_chi2,
            "gate_new_share": f.gate_new_share, "gate_missing_delta": f.gate_missing_delta,
            "ks_pvalue": f.ks_pvalue, "chi2_pvalue": f.chi2_pvalue, "p_adjusted": f.p_adjusted, "psi": f.psi,
            "emd": f.emd, "error": f.error}


def _worst_first(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Rows by severity (worst first), then window and feature (stable)."""
    rank = verdicts["severity"].map(SEVERITIES.index)
    return verdicts.assign(_rank=-rank).sort_values(["_rank", "window_start", "model", "feature"],
                                                    kind="stable").drop(columns="_rank")


def _table(verdicts: pd.DataFrame) -> str:
    """An HTML table of verdict rows, every name escaped, each row coloured by its severity."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in TABLE_COLUMNS)
    body = []
    for _, row in verdicts.iterrows():
        colour = SEVERITY_COLOURS[row["severity"]]
        cells = "".join(f"<td>{html.escape(_cell(row[c]))}</td>" for c in TABLE_COLUMNS)
        body.append(f"<tr style=\"background:{colour}\">{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _cell(value: object) -> str:
    """A cell as text: numbers to four significant digits, missing as empty."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return str(value)
