// A CIDR as netplug writes it (10.0.0.0/16, fd00::/48), so that two spellings of one compare
// equal; text that is no CIDR is returned as it is (it then equals only itself).
import { formatPrefix, parsePrefix } from '../net/cidr.ts';

export function canonicalCidr(text: string): string {
  const prefix = parsePrefix(text);
  return prefix ? formatPrefix(prefix) : text;
}
