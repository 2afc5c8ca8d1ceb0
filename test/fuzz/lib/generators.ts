// Generators shared by the in-process and the executable fuzzers.
import type { Rng } from './prng.ts';
import { CNI_ARG_KEYS, CNI_ARGS } from './seeds.ts';
import { hostileString } from './values.ts';

/** CNI_ARGS: pairs dropped, added, with hostile keys or values, malformed, or joined oddly. */
export function mutatedArgs(rng: Rng): string {
  const pairs = rng.pick(CNI_ARGS).split(';').filter(Boolean);
  for (let round = 1 + rng.int(3); round > 0; round--) {
    const op = rng.int(6);
    const at = rng.int(pairs.length + 1);
    const [key = rng.pick(CNI_ARG_KEYS), value = ''] = (pairs[at] ?? '').split('=');
    if (op === 0) pairs.splice(at, 1);
    else if (op === 1) pairs.splice(at, 0, `${rng.pick(CNI_ARG_KEYS)}=${hostileString(rng, value)}`);
    else if (op === 2) pairs[at] = `${hostileString(rng, key)}=${value}`;
    else if (op === 3) pairs[at] = `${key}=${hostileString(rng, value)}`;
    else if (op === 4) pairs[at] = rng.pick(['', '=', 'x', '==', 'IP==1', `${key}=${value}=`, ';;;']);
    else pairs.push(`IgnoreUnknown=${rng.pick(['1', '0', 'true', 'false', 'yes', '', 'T', hostileString(rng)])}`);
  }
  return pairs.join(rng.chance(0.9) ? ';' : rng.pick([';;', ',', ' ; ', '\n']));
}
