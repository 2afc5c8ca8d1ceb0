// The log of what the routes subsystem leaves unrouted, and why (desired-routes.ts's notes). Most
// notes come and go as a node starts: until it publishes its address, and its VXLAN tunnel
// address, every other node has a block it cannot route yet. So a new note is logged at info, and
// only one still there after a grace period is a warning: a cluster whose nodes come up together
// logs no warning, and a node that never publishes, or a pool that cannot be routed, still does.
import type { Log } from '../../runtime/log.ts';

/** How long a note may stand before it is a warning. */
const NOTE_GRACE_MS = 60_000;

export class RouteNotes {
  readonly #log: Pick<Log, 'info' | 'warning'>;
  readonly #now: () => number;
  readonly #graceMs: number;
  /** Each standing note: when it was first seen, and whether it was warned of. */
  readonly #standing = new Map<string, { since: number; warned: boolean }>();

  constructor(log: Pick<Log, 'info' | 'warning'>, now: () => number = Date.now, graceMs = NOTE_GRACE_MS) {
    this.#log = log;
    this.#now = now;
    this.#graceMs = graceMs;
  }

  /** The notes of a pass; returns in how many ms a note is due to become a warning, if one is. */
  seen(notes: readonly string[]): number | undefined {
    const now = this.#now();
    const current = new Set(notes);
    for (const note of this.#standing.keys()) if (!current.has(note)) this.#standing.delete(note);
    const fresh = notes.filter((note) => !this.#standing.has(note));
    for (const note of fresh) this.#standing.set(note, { since: now, warned: false });
    if (fresh.length > 0) this.#log.info(fresh.join('; '));
    const lasting: string[] = [];
    let due: number | undefined;
    for (const [note, state] of this.#standing) {
      if (state.warned) continue;
      const left = state.since + this.#graceMs - now;
      if (left <= 0) {
        state.warned = true;
        lasting.push(note);
      } else due = Math.min(due ?? left, left);
    }
    if (lasting.length > 0) this.#log.warning(`still, after ${this.#graceMs / 1000} s: ${lasting.join('; ')}`);
    return due;
  }
}
