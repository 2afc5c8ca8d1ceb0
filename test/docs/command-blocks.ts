// The commands of a docs page, as the tests run them. A block fenced ```sh is a command block: a
// reader types it, and an end-to-end test runs it as written (test/docs/docs-shell.ts). Any other
// fence (```text, ```yaml ...) is not run: output samples, templates with placeholders, commands
// that build this repository. Pure: no file or process access beyond reading the page.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = new URL('../../', import.meta.url).pathname;

export interface Heading {
  level: number;
  title: string;
  /** GitHub's anchor for the heading: lower case, punctuation dropped, spaces as hyphens. */
  anchor: string;
}

export interface Section extends Heading {
  /** The section's command blocks in order (subsections included), each a list of commands. */
  blocks: string[][];
}

/** GitHub's anchor of a heading's text. */
export function anchorOf(title: string): string {
  return title
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .trim()
    .replace(/\s/g, '-');
}

/**
 * The commands of one fenced block: lines ending in a backslash joined with the next, the fence's
 * indentation removed, blank lines and whole-line comments dropped. A trailing comment stays: the
 * shell ignores it.
 */
export function commandsOf(lines: string[], indent: number): string[] {
  const commands: string[] = [];
  let pending = '';
  for (const raw of lines) {
    const line = raw.slice(Math.min(indent, raw.length - raw.trimStart().length));
    if (pending === '' && (line.trim() === '' || line.trimStart().startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trimEnd()} `;
      continue;
    }
    commands.push(pending + (pending ? line.trimStart() : line));
    pending = '';
  }
  if (pending) throw new Error(`a command ends in a backslash with nothing after it: ${pending}`);
  return commands;
}

/** Every section of a page, in order, with the command blocks under it. */
export function sections(markdown: string): Section[] {
  const result: Section[] = [];
  const lines = markdown.split('\n');
  // Blocks belong to every open section: a section's blocks include its subsections'.
  const open: Section[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const fence = /^(\s*)(`{3,})(\S*)\s*$/.exec(line);
    if (fence) {
      const [, indentText = '', ticks = '', info = ''] = fence;
      const end = lines.findIndex((candidate, j) => j > i && candidate.trim() === ticks);
      if (end < 0) throw new Error(`the block opened on line ${i + 1} is not closed`);
      if (info === 'sh') {
        const commands = commandsOf(lines.slice(i + 1, end), indentText.length);
        if (commands.length === 0) throw new Error(`the sh block on line ${i + 1} has no command`);
        for (const section of open) section.blocks.push(commands);
      }
      i = end;
      continue;
    }
    const heading = /^(#{1,6})\s+(.*?)\s*$/.exec(line);
    if (!heading) continue;
    const level = (heading[1] as string).length;
    const title = heading[2] as string;
    const section: Section = { level, title, anchor: anchorOf(title), blocks: [] };
    while (open.length > 0 && (open.at(-1) as Section).level >= level) open.pop();
    open.push(section);
    result.push(section);
  }
  return result;
}

/** The command blocks of the section titled `title`; throws when there is no such section or it has none. */
export function sectionBlocks(markdown: string, title: string): string[][] {
  const matches = sections(markdown).filter((section) => section.title === title);
  if (matches.length !== 1) throw new Error(`${matches.length} sections titled "${title}"`);
  const [section] = matches as [Section];
  if (section.blocks.length === 0) throw new Error(`the section "${title}" has no sh block`);
  return section.blocks;
}

/** docs/<page>'s section `title`: its command blocks, in order. */
export function docsBlocks(page: string, title: string): string[][] {
  return sectionBlocks(readFileSync(join(ROOT, 'docs', page), 'utf8'), title);
}

/** docs/<page>'s section `title`: its commands, in order. */
export function docsCommands(page: string, title: string): string[] {
  return docsBlocks(page, title).flat();
}
