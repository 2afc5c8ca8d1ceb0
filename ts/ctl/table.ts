// Plain-text tables for netplugctl's human output.

export function table(header: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  const cells = [header, ...rows].map((row) => row.map(String));
  const widths = header.map((_, column) => Math.max(...cells.map((row) => (row[column] ?? '').length)));
  return `${cells
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
}

/** Aligned `KEY  value` lines for one object. */
export function details(pairs: readonly (readonly [string, string | number | undefined])[]): string {
  const present = pairs.filter(([, value]) => value !== undefined && value !== '');
  const width = Math.max(...present.map(([key]) => key.length));
  return `${present.map(([key, value]) => `${key.padEnd(width)}  ${value}`).join('\n')}\n`;
}
