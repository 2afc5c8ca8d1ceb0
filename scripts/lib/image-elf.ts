// What the dynamic loader reads of an ELF file: its interpreter (PT_INTERP) and the libraries it
// names (DT_NEEDED). Read from the file itself, so it holds for a foreign root (an image's layer)
// where ldd, which asks the host's loader, does not. 64-bit little-endian only: the x86-64 and
// arm64 builds.
import { closeSync, openSync, readSync } from 'node:fs';

export interface ElfDynamic {
  /** The program interpreter's path (the dynamic loader), for executables. */
  interpreter?: string;
  /** DT_NEEDED names in file order (sonames, as the loader looks them up). */
  needed: string[];
}

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const PT_INTERP = 3;
const DT_NULL = 0n;
const DT_NEEDED = 1n;
const DT_STRTAB = 5n;

/** undefined when the file is not an ELF object; a static executable gives { needed: [] }. */
export function readElfDynamic(path: string): ElfDynamic | undefined {
  const fd = openSync(path, 'r');
  try {
    const read = (offset: number, length: number) => {
      const buffer = Buffer.alloc(length);
      const got = readSync(fd, buffer, 0, length, offset);
      return buffer.subarray(0, got);
    };
    const header = read(0, 64);
    if (header.length < 64 || header.readUInt32BE(0) !== 0x7f454c46) return undefined;
    if (header[4] !== 2 || header[5] !== 1) throw new Error(`${path}: not a 64-bit little-endian ELF file`);
    const phoff = Number(header.readBigUInt64LE(0x20));
    const phentsize = header.readUInt16LE(0x36);
    const phnum = header.readUInt16LE(0x38);
    const table = read(phoff, phentsize * phnum);
    const segments = Array.from({ length: phnum }, (_, i) => {
      const at = i * phentsize;
      return {
        type: table.readUInt32LE(at),
        offset: Number(table.readBigUInt64LE(at + 8)),
        vaddr: Number(table.readBigUInt64LE(at + 16)),
        filesz: Number(table.readBigUInt64LE(at + 32)),
      };
    });
    const result: ElfDynamic = { needed: [] };
    const interp = segments.find((segment) => segment.type === PT_INTERP);
    if (interp) result.interpreter = cString(read(interp.offset, interp.filesz), 0);
    const dynamic = segments.find((segment) => segment.type === PT_DYNAMIC);
    if (!dynamic) return result;
    const entries = read(dynamic.offset, dynamic.filesz);
    const neededOffsets: number[] = [];
    let strtab: number | undefined;
    for (let at = 0; at + 16 <= entries.length; at += 16) {
      const tag = entries.readBigInt64LE(at);
      const value = Number(entries.readBigUInt64LE(at + 8));
      if (tag === DT_NULL) break;
      if (tag === DT_NEEDED) neededOffsets.push(value);
      if (tag === DT_STRTAB) strtab = value;
    }
    if (neededOffsets.length === 0) return result;
    if (strtab === undefined) throw new Error(`${path}: DT_NEEDED without DT_STRTAB`);
    // DT_STRTAB is an address in memory: the PT_LOAD segment that maps it gives its file offset.
    const address = strtab;
    const load = segments.find((s) => s.type === PT_LOAD && address >= s.vaddr && address < s.vaddr + s.filesz);
    if (!load) throw new Error(`${path}: the string table's address ${address} is in no loaded segment`);
    const start = address - load.vaddr + load.offset;
    const strings = read(start, load.offset + load.filesz - start);
    result.needed = neededOffsets.map((offset) => cString(strings, offset));
    return result;
  } finally {
    closeSync(fd);
  }
}

function cString(buffer: Buffer, offset: number): string {
  const end = buffer.indexOf(0, offset);
  return buffer.toString('latin1', offset, end === -1 ? buffer.length : end);
}
