// The files the CNI plugin reads on every pod event instead of asking anyone: the node's name
// (nodename, when the netconf names none) and the MTU `"mtu": 0` means (that of the interface the
// host's default route leaves by, less the pools' encapsulation overhead: ../shared/pod-mtu.ts).
// Each written by temp file + rename, so a reader sees the old content or the new, never a part;
// rewritten only when it differs (or was removed).
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { defaultRouteMtu, FALLBACK_MTU } from '../../config/mtu.ts';

/**
 * Writes `<varDir>/nodename` and `<varDir>/mtu`; returns the names of the files it changed.
 * `overhead` undefined (the pools not read yet): an MTU file there is kept as it is (a restarting
 * agent's), a missing one gets the underlay's.
 */
export function writeNodeFiles(varDir: string, nodeName: string, overhead: number | undefined): string[] {
  mkdirSync(varDir, { recursive: true, mode: 0o755 });
  const files: [string, string][] = [['nodename', nodeName]];
  if (overhead !== undefined || !existsSync(join(varDir, 'mtu')))
    files.push(['mtu', String((defaultRouteMtu() ?? FALLBACK_MTU) - (overhead ?? 0))]);
  const changed: string[] = [];
  for (const [name, content] of files) {
    if (writeIfChanged(join(varDir, name), content)) changed.push(`${name}=${content}`);
  }
  return changed;
}

/** Writes `content` to `path` by temp file + rename unless the file holds it already; true if written. */
export function writeIfChanged(path: string, content: string): boolean {
  try {
    if (readFileSync(path, 'utf8') === content) return false;
  } catch {
    // missing or unreadable: write it
  }
  const temp = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(temp, content, { mode: 0o644 });
    renameSync(temp, path);
  } catch (err) {
    rmSync(temp, { force: true });
    throw err;
  }
  return true;
}
