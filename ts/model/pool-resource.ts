// A pool document from the options a person or an installer gives (netplugctl pool create, the
// node agent's default pool), each checked so that no pool the allocator cannot use is written.
import { formatPrefix, parsePrefix, widthOf } from '../net/cidr.ts';
import { API_VERSION } from './entry.ts';
import { ENCAPSULATION_MODES, type EncapsulationMode, type PoolResource } from './ip-pool.ts';
import { parseSelector, SelectorError } from '../selectors/parse.ts';

/** An option a pool cannot have; the message names it as netplugctl's flag (--cidr, --block-size...). */
export class PoolOptionError extends Error {
  override readonly name = 'PoolOptionError';
}

const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

export interface PoolOptions {
  cidr?: string;
  'block-size'?: string;
  'node-selector'?: string;
  'ipip-mode'?: string;
  'vxlan-mode'?: string;
  'nat-outgoing'?: boolean;
  disabled?: boolean;
}

/** The pool `options` describe, validated: a PoolOptionError names the option and value at fault. */
export function poolResource(name: string, options: PoolOptions, now: Date): PoolResource {
  if (!NAME.test(name))
    throw new PoolOptionError(
      `pool name "${name}" must be lower-case letters, digits, '-' and '.', starting and ending with a letter or digit`,
    );
  if (!options.cidr) throw new PoolOptionError('pool create needs --cidr');
  const prefix = parsePrefix(options.cidr);
  if (!prefix) throw new PoolOptionError(`--cidr "${options.cidr}" is not a CIDR`);
  if (!parsePrefix(options.cidr, true))
    throw new PoolOptionError(`--cidr ${options.cidr} has host bits set; did you mean ${formatPrefix(prefix)}?`);
  const width = widthOf(prefix.family);
  const [minBlock, defaultBlock] = prefix.family === 4 ? [20, 26] : [116, 122];
  const blockSize = options['block-size'] === undefined ? Math.max(defaultBlock, prefix.length) : Number(options['block-size']);
  if (!Number.isInteger(blockSize) || blockSize < minBlock || blockSize > width) {
    throw new PoolOptionError(
      `--block-size ${options['block-size']} must be a whole number from ${minBlock} to ${width} for an IPv${prefix.family} pool`,
    );
  }
  if (blockSize < prefix.length) throw new PoolOptionError(`--block-size ${blockSize} is larger than the pool ${options.cidr}`);
  const nodeSelector = options['node-selector'] ?? 'all()';
  try {
    parseSelector(nodeSelector);
  } catch (err) {
    if (err instanceof SelectorError) throw new PoolOptionError(`--node-selector: ${err.message}`);
    throw err;
  }
  const mode = (flag: 'ipip-mode' | 'vxlan-mode'): EncapsulationMode => {
    const value = options[flag] ?? 'Never';
    if (!ENCAPSULATION_MODES.includes(value as EncapsulationMode))
      throw new PoolOptionError(`--${flag} "${value}" must be one of ${ENCAPSULATION_MODES.join(', ')}`);
    return value as EncapsulationMode;
  };
  const [ipipMode, vxlanMode] = [mode('ipip-mode'), mode('vxlan-mode')];
  if (ipipMode !== 'Never' && vxlanMode !== 'Never')
    throw new PoolOptionError('--ipip-mode and --vxlan-mode cannot both be enabled on one pool');
  if (prefix.family === 6 && ipipMode !== 'Never') throw new PoolOptionError('--ipip-mode is for IPv4 pools only');
  return {
    kind: 'IPPool',
    apiVersion: API_VERSION,
    metadata: { name, creationTimestamp: now.toISOString() },
    spec: {
      cidr: formatPrefix(prefix),
      blockSize,
      nodeSelector,
      ipipMode,
      vxlanMode,
      natOutgoing: options['nat-outgoing'] ?? false,
      disabled: options.disabled ?? false,
    },
  };
}
