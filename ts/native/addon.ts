// Loads the native addon. A direct require of the one file for this machine replaces napi-rs's
// generic loader, which probes libc and candidate packages on every start.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import type * as Binding from './binding.d.ts';

export type { Binding };

const ARCH_SUFFIX: Record<string, string> = { x64: 'linux-x64-gnu', arm64: 'linux-arm64-gnu' };

let loaded: typeof Binding | undefined;

/**
 * Where the addon may be, in order: `$NETPLUG_ADDON_PATH`; beside the executable (the installed
 * single-executable layout, `/opt/cni/bin/netplug` next to its `.node`); beside the bundle; the
 * build output in the repository.
 */
export function addonCandidates(env: NodeJS.ProcessEnv = process.env): string[] {
  if (env['NETPLUG_ADDON_PATH']) return [env['NETPLUG_ADDON_PATH']];
  const suffix = ARCH_SUFFIX[process.arch];
  if (process.platform !== 'linux' || !suffix) {
    throw new Error(`netplug's data plane runs on Linux x64 or arm64, not ${process.platform}/${process.arch}`);
  }
  const file = `netplug-dataplane.${suffix}.node`;
  const candidates = [join(dirname(process.execPath), file)];
  if (typeof __dirname === 'string') candidates.push(join(__dirname, file));
  // Undefined in the CommonJS bundles (scripts/build.ts defines it so), where the lines above apply.
  const moduleUrl: string | undefined = import.meta.url;
  if (typeof moduleUrl === 'string') candidates.push(fileURLToPath(new URL(`../../native/${file}`, moduleUrl)));
  return candidates;
}

/** The addon, loaded on first use so that code paths without kernel work never pay for it. */
export function addon(): typeof Binding {
  if (loaded) return loaded;
  const candidates = addonCandidates();
  const path = candidates.find((candidate) => existsSync(candidate));
  if (!path) throw new Error(`netplug's data-plane addon is missing; looked for ${candidates.join(', ')}`);
  loaded = createRequire(path)(path) as typeof Binding;
  return loaded;
}
