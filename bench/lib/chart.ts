// A horizontal bar chart as SVG: one bar per series at its median, a whisker out to its p99. Each
// group has its own scale, so that a group of sub-millisecond bars is as legible as one of 300 ms.
// Hand-written (about 60 lines) because the chart libraries on npm need a browser or canvas to
// render, which a benchmark run on a server should not pull in.

export interface ChartRow {
  group: string;
  label: string;
  medianMs: number;
  p99Ms: number;
}

const PALETTE = ['#2f6db5', '#d9822b', '#5a9e4b', '#8e5bb5', '#c44e52'];

function escapeXml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

export function barChartSvg(title: string, rows: readonly ChartRow[], unit = 'ms'): string {
  const labelWidth = 260;
  const plotWidth = 520;
  const rowHeight = 26;
  const groups = [...new Set(rows.map((r) => r.group))];
  const labels = [...new Set(rows.map((r) => r.label))];
  const parts: string[] = [];
  let y = 50;
  for (const group of groups) {
    const max = Math.max(...rows.filter((r) => r.group === group).map((r) => r.p99Ms)) * 1.08;
    const x = (value: number) => labelWidth + (value / max) * plotWidth;
    parts.push(`<text x="10" y="${y}" font-weight="bold">${escapeXml(group)}</text>`);
    y += 10;
    for (const row of rows.filter((r) => r.group === group)) {
      const color = PALETTE[labels.indexOf(row.label) % PALETTE.length];
      const mid = y + rowHeight / 2;
      parts.push(
        `<text x="20" y="${mid + 4}">${escapeXml(row.label)}</text>`,
        `<rect x="${labelWidth}" y="${y + 4}" width="${x(row.medianMs) - labelWidth}" height="${rowHeight - 8}" fill="${color}"/>`,
        `<line x1="${x(row.medianMs)}" y1="${mid}" x2="${x(row.p99Ms)}" y2="${mid}" stroke="#333"/>`,
        `<line x1="${x(row.p99Ms)}" y1="${mid - 6}" x2="${x(row.p99Ms)}" y2="${mid + 6}" stroke="#333"/>`,
        `<text x="${x(row.p99Ms) + 6}" y="${mid + 4}" font-size="11">${row.medianMs.toFixed(2)} ${unit} (p99 ${row.p99Ms.toFixed(2)})</text>`,
      );
      y += rowHeight;
    }
    y += 14;
  }
  const width = labelWidth + plotWidth + 190;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y + 20}" font-family="sans-serif" font-size="13">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="24" font-size="16" font-weight="bold">${escapeXml(title)}</text>`,
    `<text x="${width - 10}" y="24" font-size="11" text-anchor="end">bar: median, whisker: p99; each group on its own scale</text>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}
