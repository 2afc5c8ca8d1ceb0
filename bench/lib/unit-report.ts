// Writes a benchmark's results whose series are in units of their own (Gbit/s, ms, connections a
// second, millicores), rather than report.ts's milliseconds: a Markdown table with a unit column,
// JSON with the raw samples and what the bench adds, and an SVG chart, under bench/results/.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, release } from 'node:os';

import { barChartSvg } from './chart.ts';
import { summarize } from './stats.ts';

export interface UnitSeries {
  group: string;
  label: string;
  unit: string;
  samples: number[];
}

export interface UnitReport {
  /** The files' name: bench/results/<name>.{md,json,svg}. */
  name: string;
  title: string;
  series: UnitSeries[];
  ratios: { label: string; value: number }[];
  notes: string[];
  loadBefore: number;
  /** Written into the JSON between the ratios and the notes (the bench's rounds, what it checked). */
  details: Record<string, unknown>;
}

const fmt = (value: number) =>
  value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value >= 1 ? value.toFixed(2) : value.toFixed(3);

/** Writes the three files; returns the table and the ratios' lines, for printing. */
export function writeUnitReport(report: UnitReport, directory = new URL('../results/', import.meta.url)): string {
  const machine = {
    node: process.version,
    kernel: release(),
    cpus: `${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}`,
    date: new Date().toISOString(),
    loadBefore: report.loadBefore.toFixed(2),
  };
  const rows = report.series.map((s) => ({ ...s, summary: summarize(s.samples) }));
  const table = [
    '| group | variant | n | median | p99 | min | max | unit |',
    '|---|---|---:|---:|---:|---:|---:|---|',
    ...rows.map(
      (r) =>
        `| ${r.group} | ${r.label} | ${r.summary.n} | ${fmt(r.summary.medianMs)} | ${fmt(r.summary.p99Ms)} | ${fmt(r.summary.minMs)} | ${fmt(r.summary.maxMs)} | ${r.unit} |`,
    ),
  ].join('\n');
  const lines = report.ratios.map((f) => `- ${f.label}: **${f.value.toFixed(2)}**`).join('\n');
  mkdirSync(directory, { recursive: true });
  const markdown = [
    `# ${report.title}`,
    '',
    `Machine: ${machine.cpus}, Linux ${machine.kernel}, Node ${machine.node}; run ${machine.date}.`,
    '',
    table,
    '',
    lines,
    '',
    ...report.notes.map((n) => `- ${n}`),
    '',
  ].join('\n');
  writeFileSync(new URL(`${report.name}.md`, directory), markdown);
  const json = {
    machine,
    series: rows.map((r) => ({
      group: r.group,
      label: r.label,
      unit: r.unit,
      n: r.summary.n,
      median: r.summary.medianMs,
      p99: r.summary.p99Ms,
      min: r.summary.minMs,
      max: r.summary.maxMs,
      samples: r.samples,
    })),
    ratios: report.ratios,
    ...report.details,
    notes: report.notes,
  };
  writeFileSync(new URL(`${report.name}.json`, directory), `${JSON.stringify(json, null, 2)}\n`);
  const bars = rows.map((r) => ({ group: `${r.group} (${r.unit})`, label: r.label, medianMs: r.summary.medianMs, p99Ms: r.summary.p99Ms }));
  writeFileSync(new URL(`${report.name}.svg`, directory), barChartSvg(report.title, bars, ''));
  return `${table}\n\n${lines}`;
}
