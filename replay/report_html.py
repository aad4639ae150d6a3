"""The HTML replay report: one self-contained page (PNG plots embedded as base64, no script, nothing fetched).

What matters first: the features ranked by effect size (with how many segments each drifted in), then a
segment x feature heat map per model (a cell's colour is its worst severity over the windows, or whether the
gate alone fired, the cell was quiet or not judged; each cell links to its detail), then the plots of the
drifted features: reference vs window CDF (numeric, from the sketches' quantiles) or category shares, the
PSI contribution of each bin or category, and the drift score timeline with gate alarms and drifted
windows marked; a feature that drifted only inside a segment gets that segment's timeline beside the global
one. A high-cardinality categorical feature (its reference has a ``CategoricalProfile``) shows instead its
unseen-value share against the reference baseline and the head values whose share moved most. Then each
drifted cell's windows. The cells where the gate fired but the deep tests never confirmed it, and the quiet
and unjudged cells, are folded away, counted; every window's verdict is in the JSON report.

Model, feature, segment and category names come from events: HTML-escaped in the page, never part of an
id or a link (cells are numbered), and drawn with matplotlib's math text off (``$\\alpha$`` is a category
like any other, not a formula).
"""

from __future__ import annotations

import html
from collections import Counter
from pathlib import Path

from driftwarden.core.errors import ReplayError
from driftwarden.core.records import severity_rank
from driftwarden.replay.engine import DriftDetail, ReplayOutcome
from driftwarden.replay.html_cells import ALARM, DRIFTED, NOT_JUDGED, QUIET, Cell, drifted_runs, heat_map, report_cells
from driftwarden.replay.html_data import effect_ranking, moved_values, profile_of, unseen_summary
from driftwarden.replay.report_plots import (contribution_png, correlation_png, distribution_png, literal_text,
                                             moved_png, segment_timeline_png, timeline_png, unseen_png)
from driftwarden.schemas.events import rfc3339

#: At most this many drifted features get plots (the ranking lists them all).
MAX_PLOTTED = 30
#: At most this many windows are listed in one cell's detail (its drifted ones first; the JSON has them all).
MAX_CELL_WINDOWS = 50

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;font-size:0.9em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,td:nth-child(2){text-align:left;white-space:nowrap}img{max-width:100%}
.major{color:#b00;font-weight:bold}.moderate{color:#d60}.minor{color:#a80}.feature{margin-top:2em}
.lead{font-size:1.05em}details{margin:1em 0}summary{cursor:pointer;font-weight:600}
table.heat td,table.heat th{padding:0;border:1px solid #fff;text-align:center}
table.heat th.row{text-align:right;padding:0 6px;background:none;font-weight:normal;white-space:nowrap}
table.heat th.corner{background:none}
table.heat th.col{background:none;font-weight:normal;height:9em;vertical-align:bottom;padding:2px 0}
table.heat th.col div{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;margin:0 auto}
table.heat td a{display:block;width:2.1em;height:1.7em;line-height:1.7em;text-decoration:none;color:#222}
.c-major{background:#b2182b;color:#fff!important}.c-moderate{background:#ef8a62}.c-minor{background:#fddbc7}
.c-alarm{background:#f7f7c8}.c-quiet{background:#e3eee3}.c-not-judged{background:#f4f4f4;color:#999!important}
.legend span{display:inline-block;padding:1px 8px;margin-right:6px;border:1px solid #ddd}td.time{white-space:nowrap}
:target{outline:3px solid #357}"""


def write_html(doc: dict, outcome: ReplayOutcome, path: Path) -> None:
    """Render the report page and write it to ``path``."""
    try:
        Path(path).write_text(render_html(doc, outcome), encoding="utf-8")
    except OSError as exc:
        raise ReplayError(f"cannot write the HTML report to {path}: {exc.strerror}") from exc


def render_html(doc: dict, outcome: ReplayOutcome) -> str:
    """The whole page as a string."""
    cells = report_cells(doc)
    ids = {cell.key: f"cell-{i}" for i, cell in enumerate(cells)}  # numbered: a name is never an id
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>driftwarden replay</title>"
             f"<style>{_STYLE}</style></head><body>", _header(doc), _lead(cells), _ranking_table(doc, cells, ids)]
    parts.extend(_heat_map(cells, model, ids) for model in dict.fromkeys(c.model for c in cells))
    with literal_text():
        parts.append(_plots(doc, outcome, cells))
    window_ms = doc["settings"]["window_ms"]
    parts.append(_drifted_details(cells, ids, window_ms))
    parts.append(_folded(cells, ids, window_ms))
    parts.append("</body></html>")
    return "\n".join(parts)


def _header(doc: dict) -> str:
    source = doc["source"]
    what = (f"topic <b>{_e(source['topic'])}</b> from {source['from']} to {source['to']}"
            if "topic" in source else f"file <b>{_e(source['input'])}</b>")
    counts = ", ".join(f"{k}: {v}" for k, v in doc["counts"].items() if k != "invalid_values")
    invalid = "; ".join(f"{_e(model)} / {_e(feature)} {n}" for model, by_feature in
                        doc["counts"].get("invalid_values", {}).items() for feature, n in by_feature.items())
    return (f"<h1>driftwarden replay</h1><p>{what}; reference {_e(doc['settings']['reference'])}; "
            f"windows of {doc['settings']['window_ms'] / 1000:g} s; generated {doc['generated_at']}</p>"
            f"<p>{len(doc['windows'])} windows; records {counts}</p>"
            + (f"<p>values of the wrong type (their events kept): {invalid}</p>" if invalid else ""))


def _lead(cells: list[Cell]) -> str:
    """One sentence: what drifted, where."""
    drifted = [c for c in cells if c.state == DRIFTED]
    if not cells:
        return "<p class='lead'>No window was judged.</p>"
    globally = sorted({(c.model, c.feature) for c in drifted if c.segment is None})
    local = sorted({(c.model, c.feature) for c in drifted if c.segment is not None} - set(globally))
    inside = f", {len(local)} only inside a segment ({', '.join(_e(f) for _, f in local)})" if local else ""
    text = (f"{len(drifted)} of {len(cells)} (segment, feature) cells drifted: {len(globally)} feature(s) in all "
            f"traffic{inside}.")
    return f"<p class='lead'><b>{text}</b></p>" if drifted else "<p class='lead'>No feature drifted.</p>"


_RANKING_HEAD = ("<table><tr><th>model</th><th>feature</th><th>kind</th><th>max PSI</th><th>max EMD</th>"
                 "<th>max KS</th><th>drifted windows</th><th>first drifted</th><th>worst severity</th>"
                 "<th>drifted in segments</th></tr>")


def _ranking_table(doc: dict, cells: list[Cell], ids: dict[tuple, str]) -> str:
    """The global view's features by effect size: those that drifted anywhere, then the rest folded away."""
    rows = effect_ranking(doc)
    if not rows:
        return ""
    in_segments = Counter((c.model, c.feature) for c in cells if c.segment is not None and c.state == DRIFTED)
    overall = {(c.model, c.feature): c for c in cells if c.segment is None}
    drifted = [r for r in rows if r["drifted_windows"] or in_segments[r["model"], r["feature"]]]
    rest = [r for r in rows if not (r["drifted_windows"] or in_segments[r["model"], r["feature"]])]
    lines = ["".join(_ranking_row(r, overall.get((r["model"], r["feature"])), in_segments[r["model"], r["feature"]],
                                  ids) for r in chosen) for chosen in (drifted, rest)]
    table = "<h2>Features ranked by effect size</h2>" + (_RANKING_HEAD + lines[0] + "</table>" if drifted else "")
    if rest:
        table += (f"<details><summary>{len(rest)} feature(s) that drifted nowhere</summary>{_RANKING_HEAD}{lines[1]}"
                  "</table></details>")
    return table


def _ranking_row(r: dict, cell: Cell | None, segments: int, ids: dict[tuple, str]) -> str:
    return (f"<tr><td>{_e(r['model'])}</td><td>{_cell_link(cell, ids, r['feature'])}</td><td>{r['kind']}</td>"
            f"<td>{_f(r['psi'])}</td><td>{_f(r['emd'])}</td><td>{_f(r['ks'])}</td><td>{r['drifted_windows']}</td>"
            f"<td class='time'>{r['first_drifted'] or '-'}</td><td class='{r['severity']}'>{r['severity']}</td>"
            f"<td>{segments}</td></tr>")


def _cell_link(cell: Cell | None, ids: dict[tuple, str], text: str) -> str:
    return _e(text) if cell is None else f"<a href='#{ids[cell.key]}'>{_e(text)}</a>"


_LEGEND = ("<p class='legend'><span class='c-major'>major</span><span class='c-moderate'>moderate</span>"
           "<span class='c-minor'>minor</span><span class='c-alarm'>gate alarm, not confirmed</span>"
           "<span class='c-quiet'>quiet</span><span class='c-not-judged'>not judged</span>"
           "a drifted cell shows how many windows drifted; each cell links to its detail</p>")


def _heat_map(cells: list[Cell], model: str, ids: dict[tuple, str]) -> str:
    """A model's segment x feature grid, each cell coloured by its worst severity (or state), linked to its detail."""
    rows, columns, grid = heat_map(cells, model)
    head = "".join(f"<th class='col'><div>{_e(c)}</div></th>" for c in columns)
    body = "".join(f"<tr><th class='row'>{_e(row)}</th>" + "".join(_heat_cell(grid.get((row, col)), ids)
                                                                  for col in columns) + "</tr>" for row in rows)
    return (f"<h2>Segments x features: {_e(model)}</h2>{_LEGEND}<table class='heat'><tr><th class='corner'></th>"
            f"{head}</tr>{body}</table>")


def _heat_cell(cell: Cell | None, ids: dict[tuple, str]) -> str:
    if cell is None:
        return "<td></td>"
    title = f"{cell.feature} [{cell.segment_text}]: {_cell_state_text(cell)}"
    text = str(cell.drifted) if cell.drifted else ""
    return (f"<td><a class='{_colour(cell)}' href='#{ids[cell.key]}' title='{_e(title)}'>{text}</a></td>")


def _cell_state_text(cell: Cell) -> str:
    if cell.state == DRIFTED:
        return f"{cell.severity}, drifted in {cell.drifted} of {cell.windows} windows"
    if cell.state == ALARM:
        return f"gate alarm in {cell.alarms} of {cell.windows} windows, never confirmed"
    if cell.state == QUIET:
        return f"quiet in {cell.judged} judged windows of {cell.windows}"
    return f"not judged in any of {cell.windows} windows"


def _colour(cell: Cell) -> str:
    return "c-" + (cell.severity if cell.state == DRIFTED else cell.state.replace(" ", "-"))


def _plots(doc: dict, outcome: ReplayOutcome, cells: list[Cell]) -> str:
    """The drifted features' plots (first drift in all traffic), then the timelines of drifts only inside a segment."""
    details = sorted(outcome.first_drift.values(), key=lambda d: (d.window_start_ms, d.model, d.feature))
    parts = [_feature_section(doc, detail) for detail in details[:MAX_PLOTTED]]
    if len(details) > MAX_PLOTTED:
        parts.append(f"<p>{len(details) - MAX_PLOTTED} more drifted features are listed in the ranking only.</p>")
    drifted_globally = {(d.model, d.feature) for d in details}
    local = [c for c in cells if c.state == DRIFTED and c.segment is not None
             and (c.model, c.feature) not in drifted_globally][:max(0, MAX_PLOTTED - len(details))]
    parts.extend(_segment_section(doc, cell) for cell in local)
    return "".join(parts)


def _segment_section(doc: dict, cell: Cell) -> str:
    """A feature that drifted only inside a segment: that segment's score timeline against the global view's
    (a group's: also its evidence and correlation difference in the segment's first drifted window)."""
    images, text = [segment_timeline_png(doc, cell)], ""
    if cell.kind == "group":
        first = next(entry for start, entry in sorted(cell.notable, key=lambda w: w[0]) if entry["drifted"])
        detail = DriftDetail(cell.model, cell.feature, cell.kind, 0, None, None, evidence=first.get("evidence"))
        images.insert(0, correlation_png(detail))
        text = _group_text(detail)
    return (f"<div class='feature'><h2>{_e(cell.model)} / {_e(cell.feature)} [{_e(cell.segment_text)}] ({cell.kind})"
            f"</h2><p>drifted only inside this segment, first in the window starting {cell.first_drifted}</p>{text}"
            + "".join(f"<img src='data:image/png;base64,{image}'>" for image in images if image) + "</div>")


def _drifted_details(cells: list[Cell], ids: dict[tuple, str], window_ms: int) -> str:
    drifted = sorted((c for c in cells if c.state == DRIFTED),
                     key=lambda c: (-severity_rank(c.severity), c.first_drifted or ""))
    if not drifted:
        return ""
    return "<h2>Drifted cells</h2>" + "".join(_cell_detail(c, ids, window_ms) for c in drifted)


def _folded(cells: list[Cell], ids: dict[tuple, str], window_ms: int) -> str:
    """The cells that did not drift, folded away and counted: gate alarms never confirmed, then the rest."""
    alarms = [c for c in cells if c.state == ALARM]
    rest = [c for c in cells if c.state in (QUIET, NOT_JUDGED)]
    parts = []
    if alarms:
        details = "".join(_cell_detail(c, ids, window_ms) for c in alarms)
        parts.append(f"<details><summary>{len(alarms)} cell(s) where the gate fired in some window but the deep tests "
                     f"never confirmed a drift</summary>{details}</details>")
    if rest:
        quiet = sum(c.state == QUIET for c in rest)
        parts.append(f"<details><summary>{quiet} quiet cell(s) (judged, no gate alarm in any window) and "
                     f"{len(rest) - quiet} not judged</summary>{_quiet_table(rest, ids)}</details>")
    return "".join(parts)


def _cell_detail(cell: Cell, ids: dict[tuple, str], window_ms: int) -> str:
    """A cell's heading, its summary, when it drifted, and its windows that were not quiet (folded, drifted first)."""
    rows = sorted(cell.notable, key=lambda w: (not w[1]["drifted"], w[0]))[:MAX_CELL_WINDOWS]
    more = len(cell.notable) - len(rows)
    table = ("<table><tr><th>window start</th><th>count</th><th>missing</th><th>verdict</th><th>severity</th>"
             "<th>gate PSI</th><th>gate KS</th><th>new share</th><th>p adjusted</th><th>decided by</th></tr>"
             + "".join(_window_row(start, e) for start, e in sorted(rows, key=lambda w: w[0])) + "</table>"
             + (f"<p>{more} more window(s) in the JSON report.</p>" if more > 0 else ""))
    runs = drifted_runs([start for start, e in cell.notable if e["drifted"]], window_ms)
    when = ("<p>drifted " + "; ".join(f"from {a} to {b} ({n} window{'s' if n > 1 else ''})" for a, b, n in runs)
            + "</p>") if runs else ""
    return (f"<div id='{ids[cell.key]}' class='cell'><h3>{_e(cell.model)} / {_e(cell.feature)} "
            f"[{_e(cell.segment_text)}]</h3><p>{_cell_summary(cell)}</p>{when}<details><summary>{len(cell.notable)} "
            f"window(s) not quiet</summary>{table}</details></div>")


def _cell_summary(cell: Cell) -> str:
    drift = (f"<span class='{cell.severity}'>{cell.severity}</span>, drifted in {cell.drifted} of {cell.windows} "
             f"windows (first {cell.first_drifted})" if cell.drifted else f"no drift in {cell.windows} windows")
    return (f"{drift}; gate alarms {cell.alarms}; judged {cell.judged}; max PSI {_f(cell.max_psi)}, max KS "
            f"{_f(cell.max_ks)}, smallest p adjusted {_p(cell.min_p_adjusted)}")


def _window_row(start: str, entry: dict) -> str:
    gate, deep, evidence = entry["gate"], entry["deep"] or {}, entry.get("evidence") or {}
    p = entry.get("p_adjusted", deep.get("p_adjusted"))
    verdict = entry.get("error") or ("drifted" if entry["drifted"] else
                                     "gate alarm, not significant" if gate["alarm"] else "not judged")
    return (f"<tr><td>{start}</td><td>{entry['count']}</td><td>{entry['missing']}</td><td>{_e(verdict)}</td>"
            f"<td class='{entry['severity']}'>{entry['severity']}</td><td>{_f(gate['psi'])}</td>"
            f"<td>{_f(gate['ks'])}</td><td>{_pct(gate.get('new_share'))}</td><td>{_p(p)}</td>"
            f"<td>{_e(evidence.get('test', '-'))}</td></tr>")


def _quiet_table(cells: list[Cell], ids: dict[tuple, str]) -> str:
    head = ("<table><tr><th>segment</th><th>feature</th><th>state</th><th>windows</th><th>judged</th>"
            "<th>max PSI</th><th>max KS</th></tr>")
    body = "".join(f"<tr id='{ids[c.key]}'><td>{_e(c.segment_text)}</td><td>{_e(c.feature)}</td><td>{c.state}</td>"
                   f"<td>{c.windows}</td><td>{c.judged}</td><td>{_f(c.max_psi)}</td><td>{_f(c.max_ks)}</td></tr>"
                   for c in cells)
    return head + body + "</table>"


def _feature_section(doc: dict, detail: DriftDetail) -> str:
    title = (f"<div class='feature'><h2>{_e(detail.model)} / {_e(detail.feature)} ({detail.kind})</h2>"
             f"<p>first drifted in the window starting {rfc3339(detail.window_start_ms)}</p>")
    bins = doc["settings"].get("bins", 10)
    if detail.kind == "group":  # a multivariate group: what moved together, and how much variance was lost
        images = [correlation_png(detail), timeline_png(doc, detail)]
        title += _group_text(detail)
    elif profile_of(detail) is not None:  # high cardinality: unseen share and the head, not one bar per value
        images = [moved_png(detail), contribution_png(detail, bins), unseen_png(doc, detail)]
        title += _unseen_text(doc, detail) + _moved_table(detail)
    else:
        images = [distribution_png(detail), contribution_png(detail, bins), timeline_png(doc, detail)]
    return title + "".join(f"<img src='data:image/png;base64,{img}'>" for img in images if img) + "</div>"


def _group_text(detail: DriftDetail) -> str:
    """A drifted group's evidence in words: the share of variance lost and the pairs whose correlation moved most."""
    evidence = detail.evidence or {}
    rows = "".join(f"<tr><td>{_e(' / '.join(map(str, p['features'])))}</td><td>{_f(p['reference'])}</td>"
                   f"<td>{_f(p['window'])}</td><td>{p['delta']:+.3f}</td></tr>" for p in evidence.get("pairs") or ())
    lost = evidence.get("variance_lost")
    return (f"<p>share of variance the reference's principal components no longer explain: {_pct(lost)}; "
            f"decided by the {_e(evidence.get('test', '-'))} test</p>"
            + ("<table><tr><th>pair</th><th>reference correlation</th><th>window correlation</th><th>change</th></tr>"
               f"{rows}</table>" if rows else ""))


def _unseen_text(doc: dict, detail: DriftDetail) -> str:
    unseen = unseen_summary(detail, doc)
    return (f"<p>values the reference never saw: {_pct(unseen['window'])} of this window's events "
            f"(reference baseline {_pct(unseen['baseline'])}, gate threshold {_pct(unseen['threshold'])})</p>")


def _moved_table(detail: DriftDetail) -> str:
    rows = "".join(f"<tr><td>{_e(r['value'])}</td><td>{_pct(r['reference'])}</td><td>{_pct(r['window'])}</td>"
                   f"<td>{(r['window'] - r['reference']) * 100:+.2f} pts</td></tr>" for r in moved_values(detail))
    return ("<table><tr><th>top value that moved</th><th>reference share</th><th>window share</th><th>change</th></tr>"
            f"{rows}</table>") if rows else ""


def _e(text: str) -> str:
    return html.escape(str(text))


def _pct(value: float | None) -> str:
    return "-" if value is None or value != value else f"{value * 100:.2f}%"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
