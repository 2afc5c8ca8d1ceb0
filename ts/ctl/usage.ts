// A mistake in how netplugctl was called, or a request it refuses: one line, exit code 2 or 1.
export class UsageError extends Error {
  override readonly name = 'UsageError';
  readonly exitCode: number;

  constructor(message: string, exitCode = 2) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** A request the data makes impossible (the pool exists, has addresses...): exit code 1. */
export const refused = (message: string) => new UsageError(message, 1);
