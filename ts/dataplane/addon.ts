// Loads the native addon. A direct require of the one file for this machine replaces napi-rs's
// generic loader, which probes libc and candidate packages on every start.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

import type * as Binding from './binding.d.ts';

export type { Binding };

const ARCH_SUFFIX: Record<string, string> = { x64: 'linux-x64-gnu', arm64: 'linux-arm64-gnu' };

let loaded: typeof Binding | undefined;

/** The addon's file: `$NETPLUG_ADDON_PATH`, else the build output in the repository. */
export function addonPath(env: NodeJS.ProcessEnv = process.env): string {
  const suffix = ARCH_SUFFIX[process.arch];
  if (env['NETPLUG_ADDON_PATH']) return env['NETPLUG_ADDON_PATH'];
  if (process.platform !== 'linux' || !suffix) {
    throw new Error(`netplug's data plane runs on Linux x64 or arm64, not ${process.platform}/${process.arch}`);
  }
  return fileURLToPath(new URL(`../../native/netplug-dataplane.${suffix}.node`, import.meta.url));
}

/** The addon, loaded on first use so that code paths without kernel work never pay for it. */
export function addon(): typeof Binding {
  loaded ??= createRequire(import.meta.url)(addonPath()) as typeof Binding;
  return loaded;
}
