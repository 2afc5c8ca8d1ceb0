// What the kernel accepts as an interface name (dev_valid_name in net/core/dev.c): 1 to 15 bytes,
// not "." or "..", and no '/', ':' or byte the kernel's isspace() counts as white space. The
// kernel tests bytes, not characters: 0xA0 is white space to it (lib/ctype.c), so a name holding
// a character whose UTF-8 has that byte (U+6800 "栀" is E6 A0 80) is refused by the kernel
// although no Unicode white space is in it. And no '%' (see below).
export const MAX_IFNAME_BYTES = 15;

const KERNEL_SPACE_BYTES = new Set([0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0xa0]);

/** What is wrong with `name` as (part of) an interface name, or undefined if nothing. */
export function interfaceNameProblem(name: string): string | undefined {
  const bytes = Buffer.from(name);
  if (name === '.' || name === '..') return 'is a reserved name';
  if (bytes.some((byte) => byte === 0x2f || byte === 0x3a || KERNEL_SPACE_BYTES.has(byte)))
    return "contains '/', ':' or a byte the kernel counts as white space";
  if (bytes.includes(0)) return 'contains a NUL byte';
  // The kernel takes a name with '%' for a template ("eth%d": the first free number), so the
  // interface would not get the name asked for, or none ("%s": EINVAL).
  if (name.includes('%')) return "contains '%', which the kernel reads as a name template";
  return undefined;
}
