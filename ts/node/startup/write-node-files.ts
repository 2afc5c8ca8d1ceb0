// The files the CNI plugin reads on every pod event instead of asking anyone: the node's name
// (nodename, when the netconf names none) and the MTU `"mtu": 0` means (that of the interface the
// host's default route leaves by). Each written by temp file + rename, so a reader sees the old
// content or the new, never a part; rewritten only when it differs (or was removed).
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { defaultRouteMtu, FALLBACK_MTU } from '../../config/mtu.ts';

/** Writes `<varDir>/nodename` and `<varDir>/mtu`; returns the names of the files it changed. */
export function writeNodeFiles(varDir: string, nodeName: string): string[] {
  mkdirSync(varDir, { recursive: true, mode: 0o755 });
  const mtu = defaultRouteMtu() ?? FALLBACK_MTU;
  const changed: string[] = [];
  for (const [name, content] of [
    ['nodename', nodeName],
    ['mtu', String(mtu)],
  ] as const) {
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
