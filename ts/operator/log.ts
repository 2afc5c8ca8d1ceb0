// netplug-operator's log: one line per event on stderr, `<ISO time> <level> <message>`; never a token.
export interface OperatorLog {
  info(message: string): void;
  warning(message: string): void;
  error(message: string): void;
}

export function lineLog(write: (line: string) => void): OperatorLog {
  const line = (level: string) => (message: string) => write(`${new Date().toISOString()} ${level} ${message.replaceAll('\n', ' ')}\n`);
  return { info: line('INFO'), warning: line('WARNING'), error: line('ERROR') };
}

/** A failure for a log line or a condition: the API's status and message, or the error's message; never a stack. */
export function reason(err: unknown): string {
  const api = err as { code?: unknown; body?: unknown };
  if (typeof api?.code === 'number' && api.body !== undefined) {
    let body: unknown = api.body;
    if (typeof body === 'string') {
      try {
        body = JSON.parse(body);
      } catch {
        body = undefined;
      }
    }
    const message = (body as { message?: unknown } | undefined)?.message;
    return `HTTP ${api.code}${typeof message === 'string' ? `: ${message}` : ''}`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** The HTTP status of a failed API call, if it was one. */
export const statusOf = (err: unknown): number | undefined =>
  typeof (err as { code?: unknown })?.code === 'number' ? ((err as { code: number }).code as number) : undefined;
