// The endpoint status files: one per local pod whose chains and dispatch entries are in the
// kernel, in `<endpointStatusPathPrefix>/endpoint-status/`, which the plugin's
// `policy_setup_timeout_seconds` waits for (ts/plugin/policy-wait.ts: it checks only that the file
// exists). Named and filled as the reference's agent does: `k8s <namespace%2Fpod> <container
// interface>`, one JSON object without a trailing newline (`ifaceName` the host side, `mac`,
// `ipv4Nets`, `ipv6Nets`; empty fields left out), mode 0644 in a directory of mode 0755.
// Each sync makes the directory equal what is wanted: files written or rewritten, the files of
// pods gone (and any other file: a stale one of a previous run) removed. Only ever called once the
// table is in step, so a sweep never removes the file of a pod still being programmed.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { statusFileName } from '../../plugin/policy-wait.ts';
import type { LocalPod } from './feed-engine.ts';

const STATUS_DIRECTORY = 'endpoint-status';

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

  constructor(pathPrefix: string) {
    this.directory = join(pathPrefix, STATUS_DIRECTORY);
  }

  /** Makes the directory hold exactly `wanted`; returns the names written and removed. */
  sync(wanted: readonly StatusFile[]): StatusSync {
    mkdirSync(this.directory, { recursive: true, mode: 0o755 });
    const present = new Set(readdirSync(this.directory));
    const outcome: StatusSync = { written: [], removed: [] };
    const kept = new Set<string>();
    for (const { name, content } of wanted) {
      kept.add(name);
      if (present.has(name) && contentOf(join(this.directory, name)) === content) continue;
      writeFileSync(join(this.directory, name), content, { mode: 0o644 });
      outcome.written.push(name);
    }
    for (const name of present) {
      if (kept.has(name)) continue;
      rmSync(join(this.directory, name), { force: true, recursive: true });
      outcome.removed.push(name);
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
