// Leveled logging to stderr, always, and to the netconf's log file when one is configured.
// Records are single lines: `2026-11-21T08:00:34.534Z [INFO][4242] netplug/add: message key="value"`,
// or for a resident program (Logger.forProgram, one process per container, whose pid and name the
// container runtime already records) `2026-11-21T08:00:34.534Z INFO routes: message key="value"`.
import { shorten } from './echo.ts';
import { redact } from './redact.ts';
import { RotatingFile, type RotationLimits } from './rotating-file.ts';

export const LEVELS = ['ERROR', 'WARNING', 'INFO', 'DEBUG'] as const;
export type Level = (typeof LEVELS)[number];

export type Fields = Record<string, unknown>;

export interface LogFileOptions extends RotationLimits {
  path: string;
}

/** A log file that outlives a command (a resident host's, shared by the commands it serves), for these options. */
export type SharedLogFile = (file: LogFileOptions) => RotatingFile;

interface Sinks {
  stderr: (text: string) => void;
  file: RotatingFile | undefined;
  /** The file is this logger's own, which close() closes (not a shared one). */
  ownsFile?: boolean;
  threshold: number;
  /** Fields every record carries (the plugin's `via`: which program served the command). */
  fields?: Fields;
  /** A resident program's records: `<time> <LEVEL> <part>: message`, the part omitted for the program itself. */
  program?: string;
}

export class Logger {
  private readonly sinks: Sinks;
  private readonly component: string;
  private readonly pid: number;

  constructor(component: string, stderr: (text: string) => void, pid: number, sinks?: Sinks) {
    this.component = component;
    this.pid = pid;
    this.sinks = sinks ?? { stderr, file: undefined, threshold: LEVELS.indexOf('INFO') };
  }

  /** A resident program's logger: records as `<time> <LEVEL> message`, at `level` and above. */
  static forProgram(program: string, write: (text: string) => void, level: Level = 'INFO'): Logger {
    return new Logger(program, write, process.pid, { stderr: write, file: undefined, threshold: LEVELS.indexOf(level), program });
  }

  /** A logger for a part of the program, sharing this one's destinations and level. */
  child(component: string): Logger {
    return new Logger(`${this.component}/${component}`, this.sinks.stderr, this.pid, this.sinks);
  }

  /**
   * Applies the netconf's level and log file, for this logger and all its children. With `shared`,
   * the file is the host's, kept open between commands (opened, and its old rotations pruned, once).
   */
  configure(level: Level, file: LogFileOptions | undefined, shared?: SharedLogFile): void {
    this.sinks.threshold = LEVELS.indexOf(level);
    if (this.sinks.ownsFile) this.sinks.file?.close();
    this.sinks.file = file ? (shared?.(file) ?? new RotatingFile(file.path, file)) : undefined;
    this.sinks.ownsFile = file !== undefined && shared === undefined;
  }

  /** Adds `fields` to every record of this logger and all its children. */
  always(fields: Fields): this {
    this.sinks.fields = { ...this.sinks.fields, ...fields };
    return this;
  }

  enabled(level: Level): boolean {
    return LEVELS.indexOf(level) <= this.sinks.threshold;
  }

  error(message: string, fields?: Fields): void {
    this.log('ERROR', message, fields);
  }

  warning(message: string, fields?: Fields): void {
    this.log('WARNING', message, fields);
  }

  info(message: string, fields?: Fields): void {
    this.log('INFO', message, fields);
  }

  debug(message: string, fields?: Fields): void {
    this.log('DEBUG', message, fields);
  }

  close(): void {
    if (this.sinks.ownsFile) this.sinks.file?.close();
  }

  private log(level: Level, message: string, fields?: Fields): void {
    if (!this.enabled(level)) return;
    const rest = `${message.replaceAll('\n', ' ')}${formatFields(this.sinks.fields ? { ...fields, ...this.sinks.fields } : fields)}`;
    const { program } = this.sinks;
    const line =
      program === undefined
        ? `${new Date().toISOString()} [${level}][${this.pid}] ${this.component}: ${rest}\n`
        : `${new Date().toISOString()} ${level} ${this.component === program ? '' : `${this.component.slice(program.length + 1)}: `}${rest}\n`;
    this.sinks.stderr(line);
    if (this.sinks.file) {
      try {
        this.sinks.file.write(line);
      } catch (err) {
        // A full or read-only disk must not fail pod networking: say so on stderr and go on.
        this.sinks.file = undefined;
        this.sinks.stderr(
          `${new Date().toISOString()} [WARNING][${this.pid}] ${this.component}: log file disabled: ${(err as Error).message}\n`,
        );
      }
    }
  }
}

/** A field's value in a record, at most: input such as CNI_ARGS can be 128 KiB. */
const FIELD_LIMIT = 2000;

function formatFields(fields: Fields | undefined): string {
  if (!fields) return '';
  const safe = redact(fields) as Fields;
  return Object.keys(safe)
    .sort()
    .map((key) => ` ${key}=${shorten(JSON.stringify(safe[key]) ?? 'undefined', FIELD_LIMIT)}`)
    .join('');
}
