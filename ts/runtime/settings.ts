// A resident program's settings: its environment parsed by one zod schema, an object keyed by
// variable name whose fields are the settings below. Every value is checked at start; an empty
// variable counts as unset. A bad value stops the program with one line naming the variable and
// the value given (`LEAK_GRACE_PERIOD "15 minutes" is not a duration such as 15m, 90s or 1h30m`),
// every bad variable at once.
//
// API: `parseEnv(schema, env)` (throws SettingsError); the settings: `text`, `oneOf`, `flag`,
// `duration`, `hostPort`, `list`, `integer`; `SettingsError`. A program's own check is a setting
// built with `setting(parse, default)`, whose `parse` throws `Invalid`.
import * as z from 'zod/mini';

import { parseDuration } from '../config/duration.ts';
import { shorten } from '../log/echo.ts';

/** A setting that cannot work: the message names the variable and its value. */
export class SettingsError extends Error {
  override readonly name = 'SettingsError';
}

/**
 * What a setting's `parse` throws: `problem` follows `NAME "value" ` (`is not a duration`), or
 * with `bare` follows `NAME ` alone (`names "policy": not one of node, ipam`).
 */
export class Invalid extends Error {
  readonly bare: boolean;
  constructor(problem: string, options: { bare?: boolean } = {}) {
    super(problem);
    this.bare = options.bare ?? false;
  }
}

type Setting<T> = z.ZodMiniType<T, string | undefined>;

/** A setting parsed from its variable's text (trimmed), or from `fallback` when it is unset or empty. */
export function setting<T>(parse: (text: string) => T, fallback: string): Setting<T>;
export function setting<T>(parse: (text: string) => T): Setting<T | undefined>;
export function setting<T>(parse: (text: string) => T, fallback?: string): Setting<T | undefined> {
  return z.pipe(
    z.optional(z.string()),
    z.transform((raw: string | undefined, context) => {
      const text = raw?.trim() || fallback;
      if (text === undefined) return undefined;
      try {
        return parse(text);
      } catch (err) {
        if (!(err instanceof Invalid)) throw err;
        context.issues.push({ code: 'custom', message: err.message, input: raw, params: { bare: err.bare } });
        return z.NEVER;
      }
    }),
  ) as unknown as Setting<T | undefined>;
}

/** Any text. */
export const text = (fallback?: string) => (fallback === undefined ? setting((value) => value) : setting((value) => value, fallback));

interface OneOfOptions<V> {
  default?: V;
  normalise?: (text: string) => string;
  /** What follows `NAME "value" ` when the value is none of them (default: `must be a or b`). */
  problem?: string;
}

/** One of `values` (after `normalise`), turned into what the program uses by `map`. */
export function oneOf<const V extends string, T = V>(
  values: readonly V[],
  options: OneOfOptions<V> & { default: V },
  map?: (value: V) => T,
): Setting<T>;
export function oneOf<const V extends string, T = V>(
  values: readonly V[],
  options?: OneOfOptions<V>,
  map?: (value: V) => T,
): Setting<T | undefined>;
export function oneOf<const V extends string, T = V>(
  values: readonly V[],
  options: OneOfOptions<V> = {},
  map: (value: V) => T = (value) => value as unknown as T,
): Setting<T | undefined> {
  const parse = (given: string) => {
    const value = (options.normalise?.(given) ?? given) as V;
    if (!values.includes(value)) throw new Invalid(options.problem ?? `must be ${values.join(' or ')}`);
    return map(value);
  };
  return options.default === undefined ? setting(parse) : setting(parse, options.default);
}

/** true or false, in any case. */
export const flag = (fallback: boolean) =>
  setting((given) => {
    const value = given.toLowerCase();
    if (value !== 'true' && value !== 'false') throw new Invalid('must be true or false');
    return value === 'true';
  }, String(fallback));

/** A Go duration (15m, 90s, 1h30m, 300ms) or a number of seconds, in milliseconds; at least `minMs`. */
export const duration = (fallback: string, options: { minMs?: number } = {}) =>
  setting((given) => {
    const ms = parseDuration(given);
    if (ms === undefined) throw new Invalid('is not a duration such as 15m, 90s or 1h30m');
    if (options.minMs !== undefined && ms < options.minMs) throw new Invalid(`must be at least ${options.minMs / 1000} s`);
    return ms;
  }, fallback);

/** `127.0.0.1:9099`, `[::1]:9099` or `:9099` (every address, 0.0.0.0). */
export const hostPort = (fallback: string) =>
  setting((given) => {
    const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(given);
    const port = Number(match?.[3]);
    if (!match || port > 65535) throw new Invalid(`must be host:port, such as ${fallback}`);
    return { host: match[1] ?? (match[2] || '0.0.0.0'), port };
  }, fallback);

/** A comma-separated list of some of `allowed` (spaces and empty items ignored). */
export const list = <const V extends string>(allowed: readonly V[], fallback: string) =>
  setting((given) => {
    const items = given
      .split(',')
      .map((item) => item.trim())
      .filter((item) => item !== '');
    const unknown = items.filter((item) => !(allowed as readonly string[]).includes(item));
    if (unknown.length > 0) throw new Invalid(`names "${unknown.join('", "')}": not one of ${allowed.join(', ')}`, { bare: true });
    return items as V[];
  }, fallback);

/** A whole number from `min` to `max`. */
export const integer = (fallback: number, min: number, max: number) =>
  setting((given) => {
    const value = Number(given);
    if (!/^-?\d+$/.test(given) || value < min || value > max) throw new Invalid(`must be a whole number from ${min} to ${max}`);
    return value;
  }, String(fallback));

/** The settings `schema` gives for `env`; SettingsError names every variable that is wrong and its value. */
export function parseEnv<S extends z.ZodMiniObject>(schema: S, env: NodeJS.ProcessEnv): z.output<S> {
  const input = Object.fromEntries(Object.keys(schema.shape).map((name) => [name, env[name]]));
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  throw new SettingsError(
    parsed.error.issues
      .map((issue) => {
        const name = String(issue.path[0] ?? '(the environment)');
        const given = env[name];
        const bare = issue.code === 'custom' && (issue.params as { bare?: boolean } | undefined)?.bare;
        if (bare) return `${name} ${issue.message}`;
        return given === undefined ? `${name} is required` : `${name} "${shorten(given)}" ${issue.message}`;
      })
      .join('; '),
  );
}
