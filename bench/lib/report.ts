// Writes a benchmark's results as a Markdown table, JSON and an SVG chart under bench/results/.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, release } from 'node:os';

import { barChartSvg } from './chart.ts';
import { summarize, type Summary } from './stats.ts';

export interface Series {
  group: string;
  label: string;
  samplesMs: number[];
  /** Extra columns, e.g. throughput. */
  extra?: Record<string, string>;
}

interface Ratio {
  label: string;
  value: number;
}

export interface Report {
  name: string;
  title: string;
  series: Series[];
  ratios: Ratio[];
  notes: string[];
}

/** The median of the series `label` in `group`. */
export function medianOf(series: readonly Series[], group: string, label: string): number {
  const found = series.find((s) => s.group === group && s.label === label);
  if (!found) throw new Error(`no series ${label} in ${group}`);
  return summarize(found.samplesMs).medianMs;
}

function machine(): Record<string, string> {
  return {
    node: process.version,
    kernel: release(),
    cpus: `${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}`,
    date: new Date().toISOString(),
  };
}

/** Writes the files and returns the Markdown table for printing. */
export function writeReport(report: Report, directory = new URL('../results/', import.meta.url)): string {
  const rows = report.series.map((s) => ({ ...s, summary: summarize(s.samplesMs) }));
  const extraColumns = [...new Set(rows.flatMap((r) => Object.keys(r.extra ?? {})))];
  const table = [
    `| group | variant | n | median ms | p99 ms | min ms |${extraColumns.map((c) => ` ${c} |`).join('')}`,
    `|---|---|---:|---:|---:|---:|${extraColumns.map(() => '---:|').join('')}`,
    ...rows.map(
      (r) =>
        `| ${r.group} | ${r.label} | ${r.summary.n} | ${fmt(r.summary.medianMs)} | ${fmt(r.summary.p99Ms)} | ${fmt(r.summary.minMs)} |` +
        extraColumns.map((c) => ` ${r.extra?.[c] ?? ''} |`).join(''),
    ),
  ].join('\n');
  const ratios = report.ratios.map((r) => `- ${r.label}: **${r.value.toFixed(2)}**`).join('\n');
  const env = machine();
  const markdown = [
    `# ${report.title}`,
    '',
    `Machine: ${env['cpus']}, Linux ${env['kernel']}, Node ${env['node']}; run ${env['date']}.`,
    '',
    table,
    '',
    ratios,
    '',
    ...report.notes.map((n) => `- ${n}`),
    '',
  ].join('\n');
  mkdirSync(directory, { recursive: true });
  writeFileSync(new URL(`${report.name}.md`, directory), markdown);
  const json: {
    machine: Record<string, string>;
    series: Array<Omit<Series, 'samplesMs'> & Summary & { samplesMs: number[] }>;
    ratios: Ratio[];
    notes: string[];
  } = {
    machine: env,
    series: rows.map((r) => ({
      group: r.group,
      label: r.label,
      ...r.summary,
      ...(r.extra ? { extra: r.extra } : {}),
      samplesMs: r.samplesMs,
    })),
    ratios: report.ratios,
    notes: report.notes,
  };
  writeFileSync(new URL(`${report.name}.json`, directory), `${JSON.stringify(json, null, 2)}\n`);
  const chart = barChartSvg(
    report.title,
    rows.map((r) => ({ group: r.group, label: r.label, medianMs: r.summary.medianMs, p99Ms: r.summary.p99Ms })),
  );
  writeFileSync(new URL(`${report.name}.svg`, directory), chart);
  return `${table}\n\n${ratios}`;
}

function fmt(ms: number): string {
  return ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2);
}
