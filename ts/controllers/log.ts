// One line per event on stderr: `<ISO time> <level> <message>`.
export interface ControllerLog {
  info(message: string): void;
  warning(message: string): void;
  error(message: string): void;
}

export function lineLog(write: (line: string) => void): ControllerLog {
  const line = (level: string) => (message: string) => write(`${new Date().toISOString()} ${level} ${message.replaceAll('\n', ' ')}\n`);
  return { info: line('INFO'), warning: line('WARNING'), error: line('ERROR') };
}

/** An error for a log line: its message, without a stack. */
export const reason = (err: unknown): string => (err instanceof Error ? err.message : String(err));
