// The resident programs' log is the plugin's Logger (ts/log/logger.ts) in its program form: one
// line per record on stderr, `<ISO time> <LEVEL> [<part>: ]<message>`, credentials redacted from
// fields. The runtime's parts take any object with the four levels (`Log`), so tests can collect
// lines.
//
// API: `Log`; `programLog(program, write?, level?)`; `LOG_LEVEL`, the setting (settings.ts) that
// chooses the level.
import { LEVELS, type Level, Logger } from '../log/logger.ts';
import { oneOf } from './settings.ts';

export type Log = Pick<Logger, 'error' | 'warning' | 'info' | 'debug'>;

/** A program's logger writing through `write` (default: stderr). */
export function programLog(program: string, write: (text: string) => void = (text) => process.stderr.write(text), level: Level = 'INFO') {
  return Logger.forProgram(program, write, level);
}

/** LOG_LEVEL: error, warning (or warn), info (the default) or debug, in any case. */
export const LOG_LEVEL = oneOf(
  LEVELS.map((level) => level.toLowerCase()),
  { default: 'info', normalise: (text) => text.toLowerCase().replace(/^warn$/, 'warning') },
  (level) => level.toUpperCase() as Level,
);
