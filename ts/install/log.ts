// The installer's log: one line per event on stderr, `<ISO time> <level> <message>`. Messages
// never carry a token or key (callers pass names and paths, not contents).

export type Level = 'DEBUG' | 'INFO' | 'WARNING' | 'ERROR';
export type Log = (level: Level, message: string) => void;

const ORDER: Level[] = ['ERROR', 'WARNING', 'INFO', 'DEBUG'];

/** A log that writes lines at or above LOG_LEVEL (default info) through `write`. */
export function makeLog(logLevel: string | undefined, write: (line: string) => void): Log {
  const wanted = ORDER.indexOf((logLevel ?? 'info').toUpperCase().replace(/^WARN$/, 'WARNING') as Level);
  const threshold = wanted < 0 ? ORDER.indexOf('INFO') : wanted;
  return (level, message) => {
    if (ORDER.indexOf(level) <= threshold) write(`${new Date().toISOString()} ${level} ${message}\n`);
  };
}
