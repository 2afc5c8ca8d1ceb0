// Which flow records a read of netplug-flows, or `netplugctl flows`, asks for (FlowFilter of
// ts/model/flow.ts; every filter given must hold), the query string that carries them, and the
// names netplugctl shows. Pure: no I/O, so that the aggregator and netplugctl check a value alike
// and say the same of a bad one.
//
// The query of `GET /v1/flows`: namespace, pod ([NS/]NAME), policy, action (Allow or Deny, any
// case), node, since (a duration back from now such as 15m, or a time: ms since the epoch or
// RFC 3339), limit (the newest N), follow (1 or true: stream records as they arrive).
import { parseDuration } from '../config/duration.ts';
import { shorten } from '../log/echo.ts';
import type { FlowEnd, FlowFilter, FlowRecord } from '../model/flow.ts';

/** Records a read returns when it gives no limit, and the most it may ask for. */
export const DEFAULT_LIMIT = 1000;
const MAX_LIMIT = 100_000;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** A filter's value that cannot be used: the message names the parameter (or flag) and the value. */
export class FilterError extends Error {
  override readonly name = 'FilterError';
}

/** What a read asks for. */
export interface FlowQuery {
  filter: FlowFilter;
  /** Undefined: none given (DEFAULT_LIMIT for a list; a follow sends no backlog). */
  limit?: number;
  follow: boolean;
}

/**
 * The display name of a policy key (`NetworkPolicy/<ns>/<name>` → `<ns>/<name>`,
 * `GlobalNetworkPolicy/<name>` and `Profile/<name>` → `<name>`); any other key (`default-deny`) as it is.
 */
export function policyDisplay(key: string): string {
  const slash = key.indexOf('/');
  if (slash < 0) return key;
  const kind = key.slice(0, slash);
  return kind === 'NetworkPolicy' || kind === 'GlobalNetworkPolicy' || kind === 'Profile' ? key.slice(slash + 1) : key;
}

/** Whether `record` holds every filter given. */
export function matchesFilter(record: FlowRecord, filter: FlowFilter): boolean {
  if (filter.action !== undefined && record.action !== filter.action) return false;
  if (filter.node !== undefined && record.node !== filter.node) return false;
  if (filter.since !== undefined && record.end <= filter.since) return false;
  if (filter.policy !== undefined && record.policy.policy !== filter.policy && policyDisplay(record.policy.policy) !== filter.policy)
    return false;
  const ends = [record.source, record.destination];
  if (filter.namespace !== undefined && !ends.some((end) => end.namespace === filter.namespace)) return false;
  if (filter.pod !== undefined) {
    const slash = filter.pod.indexOf('/');
    const namespace = slash < 0 ? filter.namespace : filter.pod.slice(0, slash);
    const name = slash < 0 ? filter.pod : filter.pod.slice(slash + 1);
    if (!ends.some((end) => isPod(end, namespace, name))) return false;
  }
  return true;
}

/** A pod end named `name`, in `namespace` when one is given. */
const isPod = (end: FlowEnd, namespace: string | undefined, name: string) =>
  end.kind === 'pod' && end.name === name && (namespace === undefined || end.namespace === namespace);

/**
 * The checks of each filter's text, shared by the query parser and netplugctl's flags: the
 * problem that follows `<name> "<value>" `, or undefined when the value is good.
 */
const CHECKS = {
  namespace: (value: string) => (DNS_LABEL.test(value) ? undefined : 'is not a namespace name'),
  pod: (value: string) => {
    const parts = value.split('/');
    if (parts.length > 2) return 'must be NAME or NAMESPACE/NAME';
    const [first = '', second] = parts;
    if (second !== undefined && !DNS_LABEL.test(first)) return `has "${shorten(first, 63)}", which is not a namespace name`;
    return DNS_SUBDOMAIN.test(second ?? first) ? undefined : 'is not a pod name (NAME or NAMESPACE/NAME)';
  },
  policy: (value: string) => (value.trim() === '' || value.length > 512 ? 'must be a policy name or key' : undefined),
  node: (value: string) => (DNS_SUBDOMAIN.test(value) ? undefined : 'is not a node name'),
  action: (value: string) => (/^(allow|deny)$/i.test(value) ? undefined : 'must be Allow or Deny'),
} as const satisfies Record<string, (value: string) => string | undefined>;

type Checked = keyof typeof CHECKS;

/**
 * The filter of the given texts (already present: the caller drops the absent ones); `label` says
 * how a message names each (`--namespace` for netplugctl, `namespace` for the query). Throws
 * FilterError naming the first bad one and its value.
 */
export function checkedFilter(
  given: Partial<Record<Checked | 'since', string>>,
  now: number,
  label: (name: Checked | 'since') => string = (name) => name,
): FlowFilter {
  const filter: FlowFilter = {};
  for (const name of Object.keys(CHECKS) as Checked[]) {
    const value = given[name];
    if (value === undefined) continue;
    const problem = CHECKS[name](value);
    if (problem !== undefined) throw new FilterError(`${label(name)} "${shorten(value, 100)}" ${problem}`);
    if (name === 'action') filter.action = value.toLowerCase() === 'allow' ? 'Allow' : 'Deny';
    else filter[name] = value;
  }
  if (given.since !== undefined) filter.since = sinceTime(given.since, now, label('since'));
  return filter;
}

/**
 * A `since`: a duration back from `now` (15m, 1h30m, or a number of seconds), or a time: RFC 3339
 * (2026-11-28T19:00:00Z), or ms since the epoch (a number of 10 digits or more).
 */
function sinceTime(value: string, now: number, label: string): number {
  const back = parseDuration(value);
  if (back !== undefined && !/^\d{10,}$/.test(value)) return now - back;
  if (/^\d{10,}$/.test(value)) return Number(value);
  if (/^\d{4}-\d{2}-\d{2}T/.test(value)) {
    const time = Date.parse(value);
    if (Number.isFinite(time)) return time;
  }
  throw new FilterError(
    `${label} "${shorten(value, 100)}" must be a duration such as 15m or 1h30m, or a time such as 2026-11-28T19:00:00Z`,
  );
}

/** `limit`: a whole number from 1 to MAX_LIMIT. */
export function checkedLimit(value: string, label = 'limit'): number {
  const limit = Number(value);
  if (!/^\d+$/.test(value) || limit < 1 || limit > MAX_LIMIT)
    throw new FilterError(`${label} "${shorten(value, 100)}" must be a whole number from 1 to ${MAX_LIMIT}`);
  return limit;
}

const QUERY_NAMES = ['namespace', 'pod', 'policy', 'action', 'node', 'since', 'limit', 'follow'] as const;

/** The read `params` ask for; FilterError names an unknown or repeated parameter, or a bad value. */
export function parseFlowQuery(params: URLSearchParams, now: number): FlowQuery {
  const given: Record<string, string> = {};
  for (const [name, value] of params) {
    if (!(QUERY_NAMES as readonly string[]).includes(name))
      throw new FilterError(`unknown parameter "${shorten(name, 100)}": the parameters are ${QUERY_NAMES.join(', ')}`);
    if (name in given) throw new FilterError(`parameter ${name} is given twice`);
    given[name] = value;
  }
  const { limit, follow, ...filters } = given;
  const present = Object.fromEntries(Object.entries(filters).filter(([, value]) => value !== ''));
  const query: FlowQuery = { filter: checkedFilter(present, now), follow: false };
  if (limit !== undefined && limit !== '') query.limit = checkedLimit(limit);
  if (follow !== undefined) {
    if (!/^(|1|true|0|false)$/i.test(follow)) throw new FilterError(`follow "${shorten(follow, 100)}" must be 1, true, 0 or false`);
    query.follow = /^(|1|true)$/i.test(follow);
  }
  return query;
}
