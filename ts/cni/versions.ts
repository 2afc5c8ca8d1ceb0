// CNI specification versions: which this plugin speaks, and what each allows.

/** Every version a runtime may send, oldest first (containernetworking/cni pkg/version). */
export const SUPPORTED_VERSIONS = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;

export type CniVersion = (typeof SUPPORTED_VERSIONS)[number];

export const LATEST_VERSION: CniVersion = '1.1.0';

/** The version libcni assumes for a config without `cniVersion`. */
export const IMPLICIT_VERSION: CniVersion = '0.2.0';

export function isSupported(version: string): version is CniVersion {
  return (SUPPORTED_VERSIONS as readonly string[]).includes(version);
}

/** Negative, zero or positive as `a` is older than, equal to or newer than `b` (dotted numbers). */
export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

export const atLeast = (version: string, minimum: string): boolean => compareVersions(version, minimum) >= 0;

/** The verbs each spec version defines beyond ADD, DEL and VERSION. */
export function versionAllows(version: string, command: 'CHECK' | 'GC' | 'STATUS'): boolean {
  return atLeast(version, command === 'CHECK' ? '0.4.0' : '1.1.0');
}
