// How `netplugctl flows` shows a flow record: one row of a table, or one line as it arrives
// (--follow, where the column widths cannot wait for the last record). Pure.
import type { FlowEnd, FlowRecord } from '../model/flow.ts';
import { policyDisplay } from './filter.ts';

export const FLOW_HEADER = [
  'TIME',
  'NODE',
  'SOURCE',
  'DESTINATION',
  'PROTOCOL',
  'REPORTER',
  'ACTION',
  'POLICY',
  'RULE',
  'FLOWS',
  'PACKETS',
  'BYTES',
] as const;

/** The widths --follow pads its columns to (a longer cell pushes the rest of its line). */
const FOLLOW_WIDTHS = [20, 12, 24, 28, 8, 8, 6, 24, 4, 5, 7, 5];

const PROTOCOLS: Readonly<Record<number, string>> = { 1: 'ICMP', 6: 'TCP', 17: 'UDP', 58: 'ICMPv6', 132: 'SCTP' };

/** The cells of a record's row. */
export function flowRow(record: FlowRecord): string[] {
  return [
    new Date(record.end).toISOString().replace(/\.\d{3}Z$/, 'Z'),
    record.node,
    endName(record.source, false),
    endName(record.destination, true),
    PROTOCOLS[record.protocol] ?? String(record.protocol),
    record.reporter,
    record.action,
    policyDisplay(record.policy.policy),
    record.policy.rule === undefined ? '-' : String(record.policy.rule),
    String(record.flows),
    String(record.packets),
    String(record.bytes),
  ];
}

/** A line of --follow's output: the header's or a row's cells, padded to FOLLOW_WIDTHS. */
export function followLine(cells: readonly string[]): string {
  return `${cells
    .map((cell, column) => cell.padEnd(FOLLOW_WIDTHS[column] ?? 0))
    .join('  ')
    .trimEnd()}\n`;
}

/** `namespace/pod` or the address; with the port when `withPort` and it has one (`[v6]:port`). */
function endName(end: FlowEnd, withPort: boolean): string {
  const port = withPort && end.port !== undefined ? end.port : undefined;
  if (end.kind === 'pod' && end.namespace !== undefined && end.name !== undefined)
    return `${end.namespace}/${end.name}${port === undefined ? '' : `:${port}`}`;
  if (port === undefined) return end.address;
  return end.address.includes(':') ? `[${end.address}]:${port}` : `${end.address}:${port}`;
}
