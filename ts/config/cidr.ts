// CIDR parsing enough for validation and family checks (no arithmetic here).
import { parseIp } from '../net/cidr.ts';

export interface Cidr {
  address: string;
  prefix: number;
  family: 4 | 6;
}

function parseCidr(text: string): Cidr | undefined {
  const slash = text.lastIndexOf('/');
  if (slash <= 0) return undefined;
  const address = text.slice(0, slash);
  const prefixText = text.slice(slash + 1);
  const family = parseIp(address)?.family;
  if (family === undefined || !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  if (prefix > (family === 4 ? 32 : 128)) return undefined;
  return { address, prefix, family };
}

export const isCidr = (text: string): boolean => parseCidr(text) !== undefined;
