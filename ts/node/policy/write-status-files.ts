// The endpoint status files: one per local pod whose chains and dispatch entries are in the
// kernel, in `<endpointStatusPathPrefix>/endpoint-status/`, which the plugin's
// `policy_setup_timeout_seconds` waits for (ts/plugin/policy-wait.ts: it checks only that the file
// exists). Named and filled as the reference's agent does: `k8s <namespace%2Fpod> <container
// interface>`, one JSON object without a trailing newline (`ifaceName` the host side, `mac`,
// `ipv4Nets`, `ipv6Nets`; empty fields left out), mode 0644 in a directory of mode 0755.
// Each sync makes the directory equal what is wanted: files written or rewritten, the files of
// pods gone (and any other file: a stale one of a previous run) removed. The directory is read
// (listed, each file compared) at most every SCAN_MS, which puts back a file changed or removed by
// hand; between those reads a sync goes by what it wrote itself, so that a pass for one pod does
// not read a hundred files. Only ever called once the
// table is in step, so a sweep never removes the file of a pod still being programmed.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

import { statusFileName } from '../../plugin/policy-wait.ts';
import type { LocalPod } from './feed-engine.ts';

const STATUS_DIRECTORY = 'endpoint-status';
const SCAN_MS = 10_000;

export interface StatusFile {
  name: string;
  content: string;
}

/** The status file of a programmed local pod. */
export function statusFileOf(pod: LocalPod, hostInterface: string): StatusFile {
  const nets = (family: 4 | 6) =>
    pod.addresses
      .filter((address) => address.includes(':') === (family === 6))
      .map((address) => (address.includes('/') ? address : `${address}/${family === 4 ? 32 : 128}`));
  const [ipv4Nets, ipv6Nets] = [nets(4), nets(6)];
  const status = {
    ifaceName: hostInterface,
    ...(pod.mac ? { mac: pod.mac } : {}),
    ...(ipv4Nets.length > 0 ? { ipv4Nets } : {}),
    ...(ipv6Nets.length > 0 ? { ipv6Nets } : {}),
  };
  return { name: statusFileName('k8s', pod.namespace, pod.name, pod.containerInterface), content: JSON.stringify(status) };
}

export interface StatusSync {
  written: string[];
  removed: string[];
}

export class StatusFiles {
  readonly directory: string;
  readonly #now: () => number;
  /** What the directory holds, as this process last read or wrote it (name → content). */
  #held = new Map<string, string | undefined>();
  #scanned = Number.NEGATIVE_INFINITY;

  constructor(pathPrefix: string, now: () => number = performance.now.bind(performance)) {
    this.directory = join(pathPrefix, STATUS_DIRECTORY);
    this.#now = now;
  }

  /** Makes the directory hold exactly `wanted`; returns the names written and removed. */
  sync(wanted: readonly StatusFile[]): StatusSync {
    const now = this.#now();
    // Shared by both attempts: what the first wrote before it failed counts as written.
    const outcome: StatusSync = { written: [], removed: [] };
    if (now - this.#scanned < SCAN_MS) {
      try {
        return this.#write(wanted, outcome);
      } catch {
        // The directory is not as remembered (removed by hand?): read it again, and write again.
      }
    }
    this.#scan(now);
    return this.#write(wanted, outcome);
  }

  #scan(now: number): void {
    mkdirSync(this.directory, { recursive: true, mode: 0o755 });
    // Contents are read lazily: only the files still wanted are compared.
    this.#held = new Map(readdirSync(this.directory).map((name) => [name, undefined]));
    this.#scanned = now;
  }

  #write(wanted: readonly StatusFile[], outcome: StatusSync): StatusSync {
    const kept = new Set<string>();
    for (const { name, content } of wanted) {
      kept.add(name);
      if (this.#held.has(name)) {
        const held = this.#held.get(name) ?? contentOf(join(this.directory, name));
        if (held === content) {
          this.#held.set(name, content);
          continue;
        }
      }
      writeFileSync(join(this.directory, name), content, { mode: 0o644 });
      this.#held.set(name, content);
      if (!outcome.written.includes(name)) outcome.written.push(name);
    }
    for (const name of [...this.#held.keys()]) {
      if (kept.has(name)) continue;
      rmSync(join(this.directory, name), { force: true, recursive: true });
      this.#held.delete(name);
      if (!outcome.removed.includes(name)) outcome.removed.push(name);
    }
    return outcome;
  }
}

function contentOf(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
