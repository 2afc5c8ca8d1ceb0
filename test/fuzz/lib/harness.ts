// Runs fuzz cases and judges them: each case either returns or fails the documented way; anything
// else is a finding, grouped by cause (the problem with numbers and quoted values blanked) with the
// first example's input and how to replay it.
import { CniError } from '../../../ts/cni/errors.ts';

import { replay, Rng } from './prng.ts';

export interface Finding {
  cause: string;
  count: number;
  example: { replay: string; input: string; problem: string };
}

export interface FuzzReport {
  target: string;
  cases: number;
  findings: Finding[];
}

/** At most this much of a value in a report. */
export function shorten(text: string, max = 300): string {
  const visible = JSON.stringify(text.length > max ? text.slice(0, max) : text);
  return text.length > max ? `${visible}... (${text.length} chars)` : visible;
}

/** A cause: the problem with specifics blanked, so one bug is one line however many cases hit it. */
export const causeOf = (problem: string) =>
  problem
    .replace(/ with a message of \d+ chars/, ' with a huge message')
    .replace(/"(?:[^"\\]|\\.)*"/g, '"…"')
    .replace(/\d+/g, 'N')
    .slice(0, 160);

export class Findings {
  private readonly byCause = new Map<string, Finding>();

  add(problem: string, replayAs: string, input: string): void {
    const cause = causeOf(problem);
    const known = this.byCause.get(cause);
    if (known) known.count++;
    else this.byCause.set(cause, { cause, count: 1, example: { replay: replayAs, input, problem: problem.slice(0, 600) } });
  }

  list(): Finding[] {
    return [...this.byCause.values()];
  }
}

/** Longest a parser may take on one input before it counts as hanging (no benchmark: a bound). */
const HANG_MS = 5_000;

/**
 * `count` cases of `target`: `generate` makes the input from the case's own stream, `run` feeds it
 * to the code under test, `judge` says what is wrong with the outcome (undefined: nothing).
 */
export function fuzz<I>(
  target: string,
  cases: number | { from: number; to: number },
  generate: (rng: Rng, index: number) => I,
  run: (input: I) => unknown,
  judge: (outcome: { value?: unknown; error?: unknown }, input: I) => string | undefined,
  describe: (input: I) => string,
): FuzzReport {
  const { from, to } = typeof cases === 'number' ? { from: 0, to: cases } : cases;
  const findings = new Findings();
  for (let i = from; i < to; i++) {
    const input = generate(Rng.forCase(target, i), i);
    const started = performance.now();
    let outcome: { value?: unknown; error?: unknown };
    try {
      outcome = { value: run(input) };
    } catch (error) {
      outcome = { error };
    }
    const took = performance.now() - started;
    const problem = took > HANG_MS ? `took ${Math.round(took)} ms (a hang)` : judge(outcome, input);
    if (problem) findings.add(problem, replay(target, i), describe(input));
  }
  return { target, cases: to - from, findings: findings.list() };
}

/** Longest message (with details) an error may have: values are echoed shortened, not in full. */
export const MESSAGE_CAP = 16 * 1024;

/** What is wrong with an error that should be a CniError with one of `codes`. */
export function judgeCniError(error: unknown, codes: readonly number[]): string | undefined {
  if (!(error instanceof CniError)) return `threw ${describeThrown(error)}`;
  if (!codes.includes(error.code)) return `CniError code ${error.code} (expected ${codes.join('/')}): ${error.message}`;
  const size = error.message.length + (error.details?.length ?? 0);
  if (!error.message.trim()) return `CniError code ${error.code} with an empty message`;
  if (size > MESSAGE_CAP) return oversized(`CniError code ${error.code}`, size, error.message);
  return undefined;
}

/** A message that repeats a huge value: one cause per message shape (its text up to the first quote). */
export function oversized(what: string, size: number, message: string): string {
  const shape = message.slice(0, Math.min(message.indexOf('"') + 1 || 60, 60));
  return `${what} with a message of ${size} chars, echoing a value in full: ${shape}…`;
}

export function describeThrown(error: unknown): string {
  if (error instanceof Error) return `${error.constructor.name}: ${error.message.slice(0, 200)}`;
  return `non-Error ${typeof error}: ${String(error).slice(0, 200)}`;
}

/** A report as lines for the failure message and the log. */
export function formatReport(report: FuzzReport): string {
  if (report.findings.length === 0) return `${report.target}: ${report.cases} cases, no finding`;
  return [
    `${report.target}: ${report.cases} cases, ${report.findings.length} distinct findings:`,
    ...report.findings.map(
      (f) => `- [${f.count}x] ${f.example.problem.slice(0, 300)}\n    replay: ${f.example.replay}\n    input: ${f.example.input}`,
    ),
  ].join('\n');
}
