/**
 * The finance report as one self-contained HTML file: totals, a daily chart of completes here against completes
 * the marketplace counts (inline SVG), per-survey totals, the surveys the health check found failing in the
 * period, the discrepancy table and, apart, the success claims nothing backs (a forgery signal, never money). No
 * script and no external
 * asset, so it opens offline and prints as it shows.
 */

import { CLAIM_KINDS, LISTED_DISCREPANCY_KINDS, MONEY_KINDS } from '../reconciliation/verdict-kinds';
import { oneLine } from '../shared/printable';
import type { Discrepancy, FinanceReport } from './finance-report';

// Shown as written: a control character (a line feed too) or a bidirectional override in an id reads as its escape.
const html = (value: unknown) =>
  oneLine(String(value)).replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string,
  );

/** Completes per day, both sides, as an SVG bar chart with labelled axes. */
function dailyChart(report: FinanceReport): string {
  const byDay = new Map<string, { here: number; marketplace: number }>();
  for (const row of report.days) {
    const day = byDay.get(row.day) ?? { here: 0, marketplace: 0 };
    day.here += row.completesPostback;
    day.marketplace += row.marketplaceCompletes;
    byDay.set(row.day, day);
  }
  const days = [...byDay.entries()].sort(([a], [b]) => a.localeCompare(b));
  if (days.length === 0) return '<p class="empty">No reconciled days in this period.</p>';
  const max = Math.max(1, ...days.flatMap(([, d]) => [d.here, d.marketplace]));
  const width = 640;
  const height = 220;
  const slot = (width - 60) / days.length;
  const bar = Math.max(2, Math.min(24, slot / 2 - 4));
  const y = (n: number) => height - 30 - (n / max) * (height - 50);
  const bars = days
    .map(([day, d], i) => {
      const x = 50 + i * slot + slot / 2;
      return [
        `<rect class="here" x="${(x - bar - 1).toFixed(1)}" y="${y(d.here).toFixed(1)}" width="${bar.toFixed(1)}" height="${(height - 30 - y(d.here)).toFixed(1)}"><title>${html(day)}: ${d.here} completes here</title></rect>`,
        `<rect class="marketplace" x="${(x + 1).toFixed(1)}" y="${y(d.marketplace).toFixed(1)}" width="${bar.toFixed(1)}" height="${(height - 30 - y(d.marketplace)).toFixed(1)}"><title>${html(day)}: ${d.marketplace} completes counted by the marketplace</title></rect>`,
        days.length <= 16 || i % Math.ceil(days.length / 16) === 0
          ? `<text x="${x.toFixed(1)}" y="${height - 12}" text-anchor="middle">${html(day.slice(5))}</text>`
          : '',
      ].join('');
    })
    .join('\n');
  return `<svg role="img" aria-label="Completes per day: here and counted by the marketplace" viewBox="0 0 ${width} ${height}" width="100%" height="${height}">
<line x1="45" y1="${height - 30}" x2="${width}" y2="${height - 30}" class="axis"/>
<text x="40" y="${y(max) + 4}" text-anchor="end">${max}</text><text x="40" y="${height - 26}" text-anchor="end">0</text>
${bars}
</svg>
<p class="legend"><span class="key here"></span> completes here (postback-confirmed) <span class="key marketplace"></span> completes counted by the marketplace</p>`;
}

export function reportHtml(report: FinanceReport): string {
  const t = report.totals;
  const kinds = LISTED_DISCREPANCY_KINDS;
  const surveyRows = report.surveys
    .map(
      (s) =>
        `<tr><td>${html(s.surveyId)}</td><td class="n">${s.completesPostback}</td><td class="n">${s.completesRedirectOnly}</td><td class="n">${s.marketplaceCompletes}</td><td class="n">${s.validCompletes}</td><td class="n">${s.invalidCompletes}</td><td class="n">${html(s.owed)}</td><td class="n">${html(s.pending)}</td><td class="n">${Object.values(s.discrepancies).reduce((a, n) => a + (n ?? 0), 0)}</td><td>${html(s.lastReconciledAt)}</td></tr>`,
    )
    .join('\n');
  const rowsOf = (list: readonly Discrepancy[]) =>
    list
      .map(
        (d) =>
          `<tr${d.money ? ' class="money"' : ''}><td>${html(d.day)}</td><td>${html(d.surveyId)}</td><td>${html(d.pid)}</td><td class="token">${html(d.token)}</td><td>${html(d.kind)}</td><td>${html(d.marketplaceStatus)}${d.verifyToken ? ` (${html(d.verifyToken)})` : ''}${d.searchedFrom ? ` (none since ${html(d.searchedFrom)})` : ''}</td><td class="n">${html(d.cpi)}${d.expectedCpi && d.expectedCpi !== d.cpi ? ` (expected ${html(d.expectedCpi)})` : ''}</td><td>${html(d.postback)} / ${html(d.redirect)}</td></tr>`,
      )
      .join('\n');
  const discrepancyRows = rowsOf(report.discrepancies);
  const failingRows = report.failingSurveys
    .map(
      (f) =>
        `<tr><td>${html(f.surveyId)}</td><td>${f.from ? html(f.from) : 'before the history kept'}</td><td>${f.to ? html(f.to) : 'still failing'}</td><td>${html(f.reasons.join(', '))}</td></tr>`,
    )
    .join('\n');
  const claimCounts = [...CLAIM_KINDS]
    .map((kind) => `<li>${html(kind)}: <strong>${t.claims[kind] ?? 0}</strong></li>`)
    .join('');
  const kindCounts = kinds
    .map(
      (kind) =>
        `<li>${html(kind)}${MONEY_KINDS.has(kind) ? ' (money)' : ''}${kind === 'invalidated' ? ' (every reversal: rows re-filed under another status too)' : ''}: <strong>${t.discrepancies[kind] ?? 0}</strong></li>`,
    )
    .join('');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Reconciliation report ${html(report.from)} to ${html(report.to)}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;color:#1b1b1b;margin:2rem;max-width:72rem}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ccc}
.meta{color:#555}.cards{display:flex;flex-wrap:wrap;gap:1rem;margin:1rem 0}
.card{border:1px solid #ccc;border-radius:6px;padding:.6rem 1rem;min-width:9rem}.card b{display:block;font-size:1.4rem}
table{border-collapse:collapse;width:100%;font-size:.85rem}th,td{border-bottom:1px solid #ddd;padding:.25rem .4rem;text-align:left}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}td.token{font-family:monospace;font-size:.8rem}
tr.money td{background:#fff4e5}svg text{font-size:11px;fill:#333}.axis{stroke:#888}
rect.here,.key.here{fill:#2b6cb0;background:#2b6cb0}rect.marketplace,.key.marketplace{fill:#9bbf3b;background:#9bbf3b}
.key{display:inline-block;width:.8rem;height:.8rem;margin:0 .3rem 0 1rem;vertical-align:middle}
@media print{body{margin:0}h2{break-after:avoid}tr{break-inside:avoid}.card{border-color:#000}}
</style>
</head>
<body>
<h1>Reconciliation report</h1>
<p class="meta">Marketplace days ${html(report.from)} to ${html(report.to)} (time zone ${html(report.timeZone)}), generated ${html(report.generatedAt)}.</p>
<div class="cards">
<div class="card" id="owed">Owed (valid completes)<b>${html(t.owed)}</b></div>
<div class="card" id="pending">Pending review<b>${html(t.pending)}</b></div>
<div class="card" id="completes-here">Completes here (postback)<b>${t.completesPostback}</b></div>
<div class="card" id="completes-marketplace">Completes counted by the marketplace<b>${t.marketplaceCompletes}</b></div>
<div class="card" id="invalidated">Completes reviewed Invalid (rows still Completed)<b>${t.invalidCompletes}</b></div>
<div class="card" id="money-discrepancy-count">Money discrepancies<b>${t.moneyDiscrepancies}</b></div>
<div class="card" id="reversed-amount">Reversed after the fact<b>${html(report.amounts.reversed)}</b></div>
<div class="card" id="not-paid-amount">Completes signed here, not paid<b>${html(report.amounts.notPaid)}</b></div>
<div class="card" id="not-received-amount">Completes listed there, never received here<b>${html(report.amounts.notReceived)}</b></div>
<div class="card" id="underpaid-amount">Completes listed below the survey's price<b>${html(report.amounts.underpaid)}</b></div>
<div class="card" id="discrepancy-count">Discrepancies<b>${report.discrepancies.length}</b></div>
<div class="card" id="awaiting-count">Awaiting judgement (too recent: figures provisional)<b>${t.awaiting}</b></div>
<div class="card" id="claim-count">Unverified success claims<b>${report.claims.length}</b></div>
<div class="card" id="failing-count">Surveys failing in the period<b>${new Set(report.failingSurveys.map((f) => f.surveyId)).size}</b></div>
</div>
${report.amounts.unpriced > 0 ? `<p class="meta" id="unpriced-note">${report.amounts.unpriced} money ${report.amounts.unpriced === 1 ? 'discrepancy' : 'discrepancies'} below ${report.amounts.unpriced === 1 ? 'has' : 'have'} no price known: not in the reversed, not-paid, never-received or below-price sums above.</p>` : ''}
<h2>Completes per day</h2>
${dailyChart(report)}
<h2>Discrepancies by kind</h2>
<ul>${kindCounts}</ul>
<h2>Surveys</h2>
<table id="surveys"><thead><tr><th>Survey</th><th>Completes (postback)</th><th>Redirect only</th><th>Marketplace completes</th><th>Valid</th><th>Invalid</th><th>Owed</th><th>Pending</th><th>Discrepancies</th><th>Last reconciled</th></tr></thead>
<tbody>
${surveyRows}
</tbody></table>
<h2>Reconciliation failing</h2>
${
  report.reconciliationFailing.length === 0
    ? '<p class="meta">Every survey\'s days of the period were reconciled by its last run.</p>'
    : `<p class="meta">The last run could not reconcile these days: their figures are as an earlier run left them (or missing) until one succeeds.</p>
<table id="reconciliation-failing"><thead><tr><th>Survey</th><th>Days</th><th>Last error</th><th>Failing since</th><th>Last failed at</th></tr></thead>
<tbody>
${report.reconciliationFailing
  .map(
    (f) =>
      `<tr><td>${html(f.surveyId)}</td><td>${html(f.days.join(', '))}</td><td>${html(f.error)}</td><td>${html(f.failingSince)}</td><td>${html(f.lastFailedAt)}</td></tr>`,
  )
  .join('\n')}
</tbody></table>`
}
<h2>Surveys failing in this period</h2>
<p class="meta">Spells in which the survey health check found a survey failing (postbacks stopped, success redirects without their postback, postbacks refused for a stale key, configuration drift): completes of those hours may be missing here or unpaid. <code>npm run cli -- health --survey &lt;id&gt;</code> shows a survey now.</p>
${
  report.failingSurveys.length === 0
    ? '<p class="empty" id="failing-none">No survey was failing in this period.</p>'
    : `<table id="failing"><thead><tr><th>Survey</th><th>Failing from</th><th>Until</th><th>Reasons</th></tr></thead>
<tbody>
${failingRows}
</tbody></table>`
}
<h2>Discrepancies</h2>
<table id="discrepancies"><thead><tr><th>Day</th><th>Survey</th><th>PID</th><th>Token</th><th>Kind</th><th>Marketplace</th><th>CPI</th><th>Here (postback / redirect)</th></tr></thead>
<tbody>
${discrepancyRows}
</tbody></table>
<h2>Unverified success claims</h2>
<p class="meta">Success redirects that no signed postback and no marketplace transaction back, or that both contradict. Anyone who has seen the success URL can send one: they are never money, and a burst of them is a sign of forgery.</p>
<ul>${claimCounts}</ul>
<table id="claims"><thead><tr><th>Day</th><th>Survey</th><th>PID</th><th>Token</th><th>Kind</th><th>Marketplace</th><th>CPI</th><th>Here (postback / redirect)</th></tr></thead>
<tbody>
${rowsOf(report.claims)}
</tbody></table>
</body>
</html>
`;
}
