// In-process fuzzing of every parser that takes outside input: 44,000 seeded cases in `npm test`
// (seed in every failure; NETPLUG_FUZZ_SEED replays a run; NETPLUG_FUZZ_SEED=random with
// NETPLUG_FUZZ_SCALE=5 explores 220,000 new ones). Each case returns, or throws the module's
// documented error (a CniError with the right code, a SelectorError) with a bounded message; never
// another exception, never a hang.
import test from 'ava';

import { parseCniArgs } from '../../ts/cni/args.ts';
import { parseEnvironment, readCommand } from '../../ts/cni/environment.ts';
import { declaredVersion, parseNetconf } from '../../ts/config/netconf.ts';
import { parseIp } from '../../ts/net/cidr.ts';
import { IpamError } from '../../ts/ipam/errors.ts';
import { cidrOfKey } from '../../ts/model/keys.ts';
import type { PoolResource } from '../../ts/model/ip-pool.ts';
import { choosePools, poolsOf } from '../../ts/ipam/pools.ts';
import { matches } from '../../ts/selectors/evaluate.ts';
import { formatSelector } from '../../ts/selectors/format.ts';
import { parseSelector, SelectorError } from '../../ts/selectors/parse.ts';
import { addressPlan, type AnnotationContext } from '../../ts/k8s/annotations.ts';
import { ANNOTATIONS } from '../../ts/model/pod-annotations.ts';
import { KINDS, kindOfKey, kindsOfPrefix, objectName } from '../../ts/store/kubernetes/resources.ts';
import { StoreError } from '../../ts/store/store.ts';
import { describeThrown, formatReport, fuzz, judgeCniError, MESSAGE_CAP, oversized, shorten, type FuzzReport } from './lib/harness.ts';
import { mutatedBytes, mutateValue, serialize } from './lib/mutate.ts';
import { FUZZ_SEED, Rng } from './lib/prng.ts';
import {
  ANNOTATION_VALUES,
  CNI_VARIABLES,
  COMMAND_WORDS,
  ENVIRONMENTS,
  NETCONF_FIELDS,
  NETCONFS,
  NODE,
  POOL,
  SELECTORS,
} from './lib/seeds.ts';
import { EDGE_STRINGS, hostileString } from './lib/values.ts';
import { mutatedArgs } from './lib/generators.ts';

// NETPLUG_FUZZ_SCALE shrinks or grows every target (the counts below are the suite's, scale 1). The
// suite's seed is fixed, so its cases are a regression corpus: more of the same cases on every run
// add CI time, not coverage (netconfs are the costliest: megabyte mutations through JSON.parse).
const SCALE = Number(process.env['NETPLUG_FUZZ_SCALE'] ?? 1);
const COUNTS = Object.fromEntries(
  Object.entries({
    netconf: 10_000,
    environment: 8_000,
    cniArgs: 6_000,
    annotations: 6_000,
    selector: 4_000,
    keys: 3_000,
    pools: 3_000,
  }).map(([k, v]) => [k, Math.max(1, Math.round(v * SCALE))]),
) as Record<'netconf' | 'environment' | 'cniArgs' | 'annotations' | 'selector' | 'keys' | 'pools', number>;

/**
 * Registers `total` cases of `target` as tests of CHUNK cases each: a test that holds the event
 * loop for minutes would trip ava's inactivity timeout on a loaded machine.
 */
const CHUNK = 5_000;

function fuzzTest<I>(title: string, target: string, total: number, ...rest: FuzzRest<I>): void {
  for (let from = 0; from < total; from += CHUNK) {
    const to = Math.min(total, from + CHUNK);
    const parts = Math.ceil(total / CHUNK);
    test(`${title}${parts > 1 ? ` [cases ${from}-${to - 1} of ${total}]` : ''}`, (t) => {
      verdict(t, fuzz(target, { from, to }, ...rest));
    });
  }
}

type FuzzRest<I> = Parameters<typeof fuzz<I>> extends [unknown, unknown, ...infer R] ? R : never;

function verdict(t: import('ava').ExecutionContext, report: FuzzReport): void {
  t.log(`${report.target}: ${report.cases} cases, ${report.findings.length} distinct findings (NETPLUG_FUZZ_SEED=${FUZZ_SEED})`);
  t.deepEqual(
    report.findings.map((f) => f.cause),
    [],
    formatReport(report),
  );
}

fuzzTest(
  `netconf: ${COUNTS.netconf} mutated netconfs through parseNetconf give a config or error 1, 6 or 7`,
  'netconf',
  COUNTS.netconf,
  (rng) => mutatedBytes(rng, rng.pick(NETCONFS), NETCONF_FIELDS),
  (bytes) => {
    declaredVersion(bytes); // main writes errors in the declared version: it must never throw
    return parseNetconf(bytes);
  },
  ({ error }) => (error === undefined ? undefined : judgeCniError(error, [1, 6, 7])),
  (bytes) => shorten(bytes.toString('utf8')),
);

function mutatedEnvironment(rng: Rng): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...rng.pick(ENVIRONMENTS) };
  for (let round = 1 + rng.int(3); round > 0; round--) {
    const name = rng.pick([...CNI_VARIABLES, 'CNI_COMMAND', 'CNI_COMMAND']);
    const op = rng.int(6);
    if (op === 0) delete env[name];
    else if (name === 'CNI_COMMAND' && op < 4) env[name] = rng.pick(COMMAND_WORDS);
    else env[name] = hostileString(rng, env[name] ?? '');
  }
  return env;
}

fuzzTest(
  `environment: ${COUNTS.environment} CNI environments through readCommand and parseEnvironment give error 4 at worst`,
  'environment',
  COUNTS.environment,
  mutatedEnvironment,
  (env) => {
    const command = readCommand(env);
    return command === undefined ? undefined : parseEnvironment(command, env);
  },
  ({ value, error }, env) => {
    if (error !== undefined) return judgeCniError(error, [4]);
    const parsed = value as ReturnType<typeof parseEnvironment> | undefined;
    if (parsed && ['ADD', 'CHECK', 'DEL'].includes(parsed.command) && Buffer.byteLength(parsed.ifname) > 15)
      return `accepted CNI_IFNAME of ${Buffer.byteLength(parsed.ifname)} bytes`;
    if (parsed && env['CNI_ARGS']?.includes('IP=') && parsed.args.ip !== undefined && !parseIp(parsed.args.ip))
      return `accepted CNI_ARGS IP that is no address`;
    return undefined;
  },
  (env) => shorten(JSON.stringify(env)),
);

fuzzTest(
  `cni-args: ${COUNTS.cniArgs} CNI_ARGS strings through parseCniArgs give error 4 at worst`,
  'cni-args',
  COUNTS.cniArgs,
  mutatedArgs,
  (text) => parseCniArgs(text),
  ({ value, error }) => {
    if (error !== undefined) return judgeCniError(error, [4]);
    const args = value as ReturnType<typeof parseCniArgs>;
    if (args.ip !== undefined && !parseIp(args.ip)) return 'accepted an IP that is no address';
    return undefined;
  },
  (text) => shorten(text),
);

/** An annotation value: a valid one, a mutated JSON array, or any string. */
function annotationValue(rng: Rng, key: string): string {
  const valid = rng.pick(ANNOTATION_VALUES[key] ?? ['[]']);
  const kind = rng.int(4);
  if (kind === 0) return valid;
  if (kind === 1) return serialize(mutateValue(rng, JSON.parse(valid) as string[]));
  if (kind === 2) return mutatedBytes(rng, JSON.parse(valid) as string[]).toString('utf8');
  return hostileString(rng, valid);
}

function annotations(rng: Rng): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of Object.values(ANNOTATIONS)) if (rng.chance(0.35)) out[key] = annotationValue(rng, key);
  return out;
}

function annotationContext(rng: Rng): AnnotationContext {
  return {
    pod: {
      namespace: rng.chance(0.9) ? 'default' : hostileString(rng, 'default'),
      name: rng.chance(0.9) ? 'web-0' : hostileString(rng, 'web-0'),
      annotations: annotations(rng),
    },
    namespaceAnnotations: rng.chance(0.5) ? annotations(rng) : {},
    ipamType: rng.pick(['netplug-ipam', 'netplug-ipam', 'host-local', 'dhcp', hostileString(rng, 'netplug-ipam')]),
    features: { ip_addrs_no_ipam: rng.chance(0.6), floating_ips: rng.chance(0.6) },
  };
}

fuzzTest(
  `annotations: ${COUNTS.annotations} pod and namespace annotation sets through addressPlan give a plan or error 7`,
  'annotations',
  COUNTS.annotations,
  annotationContext,
  (context) => addressPlan(context),
  ({ value, error }) => {
    if (error !== undefined) return judgeCniError(error, [7]);
    const plan = value as ReturnType<typeof addressPlan>;
    const bad = [...(plan.ips ?? []), ...(plan.ipsWithoutIpam ?? []), ...(plan.floatingIps ?? [])].find((ip) => !parseIp(ip));
    if (bad !== undefined) return `planned an address that is none: ${shorten(bad, 40)}`;
    if (Object.values(plan.pools ?? {}).some((pools) => pools.some((p) => typeof p !== 'string' || p === '')))
      return 'planned an empty pool name';
    return undefined;
  },
  (context) => shorten(JSON.stringify({ pod: context.pod.annotations, ns: context.namespaceAnnotations, ipam: context.ipamType })),
);

const SELECTOR_TOKENS = [
  '(',
  ')',
  '!',
  '&&',
  '||',
  '==',
  '!=',
  'in',
  'not',
  '{',
  '}',
  ',',
  '"x"',
  "'y'",
  'has',
  'all()',
  'rack',
  '"',
  '\\',
];

function mutatedSelector(rng: Rng): string {
  if (rng.chance(0.05)) {
    const depth = rng.pick([100, 5_000, 20_000]);
    const [open, close] = rng.pick([
      ['(', ')'],
      ['!', ''],
      ['!(', ')'],
    ]);
    return `${open.repeat(depth)}rack == "a"${close.repeat(depth)}`;
  }
  const tokens = rng.pick(SELECTORS).split(/(\s+)/);
  for (let round = 1 + rng.int(3); round > 0; round--) {
    const at = rng.int(tokens.length + 1);
    const insert = rng.chance(0.7) ? rng.pick(SELECTOR_TOKENS) : hostileString(rng).slice(0, 20_000);
    if (rng.chance(0.5)) tokens.splice(at, 0, ' ', insert);
    else tokens[at] = insert;
  }
  return tokens.join('');
}

const LABELS: Record<string, string>[] = [
  {},
  { ...NODE.metadata.labels },
  { rack: 'b', zone: 'a', name: 'web-0', gpu: '' },
  { x: 'y', '': '' },
];

fuzzTest(
  `selector: ${COUNTS.selector} node selectors through parseSelector give a selector or a SelectorError`,
  'selector',
  COUNTS.selector,
  mutatedSelector,
  (source) => {
    const selector = parseSelector(source);
    for (const labels of LABELS) matches(selector, labels);
  },
  ({ error }) => {
    if (error === undefined) return undefined;
    if (!(error instanceof SelectorError)) return `threw ${describeThrown(error)}`;
    if (error.message.length > MESSAGE_CAP) return oversized('SelectorError', error.message.length, error.message);
    return undefined;
  },
  (source) => shorten(source),
);

fuzzTest(
  `selector round trip: ${COUNTS.selector} mutated selectors that parse format to a text that parses back, formats the same and matches the same labels`,
  'selector-round-trip',
  COUNTS.selector,
  (rng) => {
    const source = mutatedSelector(rng);
    const global = rng.int(5);
    return {
      source: global === 0 ? `${source} || global()` : global === 1 ? `global() && (${source})` : source,
      allowGlobal: rng.chance(0.5),
    };
  },
  ({ source, allowGlobal }) => {
    let selector: ReturnType<typeof parseSelector>;
    try {
      selector = parseSelector(source, { allowGlobal });
    } catch (error) {
      if (error instanceof SelectorError) return undefined; // the target above judges refusals
      throw error;
    }
    const text = formatSelector(selector);
    const again = parseSelector(text, { allowGlobal });
    if (formatSelector(again) !== text) return `formats differently once parsed back: ${shorten(text)}`;
    const differs = LABELS.find((labels) => matches(again, labels) !== matches(selector, labels));
    return differs && `matches ${JSON.stringify(differs)} differently once formatted: ${shorten(text)}`;
  },
  ({ value, error }) => (error !== undefined ? `threw ${describeThrown(error)}` : (value as string | undefined)),
  ({ source }) => shorten(source),
);

/** Valid Kubernetes object names and label values (what the API server accepts). */
const OBJECT_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

function datastoreKey(rng: Rng): string {
  const kind = rng.pick(KINDS);
  const rest = rng.pick([
    'default',
    'default/web-0',
    'ipv4/block/10.70.0.0-26',
    'node-a/ipv6/block/fd00--122',
    'node-a/netplug-test.abc',
    'k8s-pod-network.0123456789abcdef',
  ]);
  const segments = rest.split('/');
  for (let round = 1 + rng.int(2); round > 0; round--) segments[rng.int(segments.length)] = hostileString(rng, rng.pick(segments));
  return `${kind.prefix}${segments.join(rng.chance(0.9) ? '/' : rng.pick(['//', '', '-']))}`;
}

fuzzTest(
  `datastore keys: ${COUNTS.keys} keys through the Kubernetes datastore's naming and cidrOfKey give valid names, never an exception`,
  'datastore-keys',
  COUNTS.keys,
  datastoreKey,
  (key) => {
    try {
      cidrOfKey(key);
    } catch (err) {
      // Not a block key: the documented refusal, naming the key.
      if (!(err instanceof IpamError)) throw err;
    }
    kindsOfPrefix(key);
    const found = kindOfKey(key);
    return found ? found.kind.place(found.rest) : undefined;
  },
  ({ value, error }) => {
    if (error !== undefined) return `threw ${describeThrown(error)}`;
    const placed = value as { name: string; labels: Record<string, string> } | undefined;
    if (!placed) return undefined;
    if (placed.name.length > 253 || !OBJECT_NAME.test(placed.name)) return `invalid object name ${shorten(placed.name, 60)}`;
    // Node names are DNS-1123 subdomains (what the plugin accepts): only those must make valid labels.
    const badLabel = Object.entries(placed.labels).find(
      ([k, v]) => !LABEL_VALUE.test(v) && (k !== 'projectnet.org/node' || DNS_SUBDOMAIN.test(v)),
    );
    if (badLabel) return `invalid label value for ${badLabel[0]}: ${shorten(badLabel[1], 60)}`;
    return undefined;
  },
  (key) => shorten(key),
);

// Keys come from validated names, which never hold a lone UTF-16 surrogate (the hash reads UTF-8,
// where every lone surrogate is U+FFFD): the property holds for well-formed strings.
test('datastore keys: distinct keys never share an object name (5,000 hostile well-formed rests of one kind)', (t) => {
  const names = new Map<string, string>();
  const clashes = new Set<string>();
  for (let i = 0; i < 5_000; i++) {
    const rest = hostileString(Rng.forCase('object-names', i), EDGE_STRINGS[i % EDGE_STRINGS.length] ?? 'x').toWellFormed();
    const name = objectName(rest);
    const other = names.get(name);
    if (other !== undefined && other !== rest) clashes.add(`${[shorten(other, 40), shorten(rest, 40)].sort().join(' and ')} → ${name}`);
    names.set(name, rest);
  }
  t.deepEqual([...clashes], [], `NETPLUG_FUZZ_SEED=${FUZZ_SEED}`);
});

fuzzTest(
  `pool documents: ${COUNTS.pools} mutated IPPool documents through poolsOf and choosePools give pools or a datastore error`,
  'pool-documents',
  COUNTS.pools,
  (rng) => {
    const documents = Array.from({ length: 1 + rng.int(3) }, () =>
      rng.chance(0.6) ? mutateValue(rng, POOL, ['cidr', 'nodeSelector']) : POOL,
    );
    return {
      documents: documents.map((value, i) => ({ key: `/netplug/resources/v3/projectnet.org/ippools/p${i}`, value, revision: '1' })),
    };
  },
  ({ documents }) => {
    const pools = poolsOf(documents as unknown as Parameters<typeof poolsOf>[0]);
    choosePools(pools, 4, undefined, NODE.metadata.labels, 'ipam.ipv4_pools');
    choosePools(pools, 6, undefined, {}, 'ipam.ipv6_pools');
    return pools;
  },
  ({ error }) => {
    if (error === undefined) return undefined;
    if (error instanceof IpamError || error instanceof StoreError || error instanceof SelectorError) return undefined;
    return `threw ${describeThrown(error)}`;
  },
  ({ documents }) => shorten(serialize(documents.map((d) => d.value as PoolResource))),
);
