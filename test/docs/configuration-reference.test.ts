// docs/configuration.md is the configuration reference: every environment variable a program
// reads, every key of the ConfigMap netplug-config, every field of the Installation and of the
// netconf must appear there (in backticks), so that a setting added to the code without a line in
// the reference fails here. The names come from the code and the shipped files themselves: each
// program's settings function is run on an environment that records what is read; the plugin's own
// variables are found in its sources; the ConfigMap in the release manifests; the Installation in
// the operator's CRD; the netconf in its schema's source.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { loadAllYaml } from '@kubernetes/client-node';
import test from 'ava';

import { controllersSettings } from '../../ts/controllers/settings.ts';
import { datastoreSettings } from '../../ts/ctl/datastore.ts';
import { flowsSettings } from '../../ts/flows/settings.ts';
import { placeholderValues } from '../../ts/install/placeholder-values.ts';
import { nodeName, readSettings } from '../../ts/install/settings.ts';
import { nodeSettings } from '../../ts/node/shared/settings.ts';
import { operatorSettings } from '../../ts/operator/settings.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const reference = readFileSync(join(ROOT, 'docs/configuration.md'), 'utf8');
const documented = (name: string) => reference.includes(`\`${name}\``);

/** The variables `read(env)` looks at: every name asked of an environment where nothing is set. */
function variablesRead(read: (env: NodeJS.ProcessEnv) => unknown): string[] {
  const names = new Set<string>();
  const env = new Proxy({} as NodeJS.ProcessEnv, {
    get(_target, name) {
      if (typeof name === 'string') names.add(name);
      return undefined;
    },
  });
  try {
    read(env);
  } catch {
    // A setting that needs a value (none is set here) stops the program; what it read is recorded already.
  }
  return [...names].filter((name) => /^[A-Z][A-Z0-9_]*$/.test(name));
}

function sourceFiles(dir: string, suffix: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith(suffix))
    .map((file) => join(ROOT, dir, file));
}

/** Names the TypeScript sources read as `env.NAME` or `env['NAME']`, and variable names they declare as constants. */
function variablesInSources(): string[] {
  const names = new Set<string>();
  for (const file of sourceFiles('ts', '.ts')) {
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(/\benv(?:\.([A-Z][A-Z0-9_]*)\b|\[['"]([A-Z][A-Z0-9_]*)['"]\])/g))
      names.add(match[1] ?? match[2] ?? '');
    for (const match of text.matchAll(/_VARIABLE = '([A-Z][A-Z0-9_]*)'/g)) names.add(match[1] ?? '');
  }
  // The shim's settings (crates/netplug-shim): `pub const SOCKET_VAR: &str = "NETPLUG_AGENT_SOCKET";`.
  for (const file of sourceFiles('crates/netplug-shim/src', '.rs')) {
    for (const match of readFileSync(file, 'utf8').matchAll(/const \w+_VAR: &str = "([A-Z][A-Z0-9_]*)"/g)) names.add(match[1] ?? '');
  }
  names.delete('');
  return [...names];
}

const undocumented = (names: Iterable<string>) => [...new Set(names)].filter((name) => !documented(name)).sort();

test("every environment variable of netplug-node's settings is in docs/configuration.md", (t) => {
  const names = variablesRead(nodeSettings);
  t.true(names.includes('NETPLUG_AGENT_SOCKET'), 'the settings were read');
  t.deepEqual(undocumented(names), []);
});

test("every environment variable of netplug-install (settings and the template's placeholders) is in docs/configuration.md", (t) => {
  const names = variablesRead((env) => {
    const settings = readSettings(env);
    placeholderValues(settings, true);
    nodeName(env);
  });
  t.true(names.includes('CNI_CONF_NAME') && names.includes('LOG_FILE_PATH'), 'the settings were read');
  t.deepEqual(undocumented(names), []);
});

test('every environment variable of netplug-kube-controllers and netplug-operator is in docs/configuration.md', (t) => {
  const controllers = variablesRead(controllersSettings);
  const operator = variablesRead(operatorSettings);
  t.true(controllers.includes('LEAK_GRACE_PERIOD') && operator.includes('NETPLUG_IMAGE'), 'the settings were read');
  t.deepEqual(undocumented([...controllers, ...operator]), []);
});

test('every environment variable of netplug-flows is in docs/configuration.md', (t) => {
  const names = variablesRead(flowsSettings);
  t.true(names.includes('NETPLUG_FLOWS_WRITERS') && names.includes('NETPLUG_FLOWS_MAX_BYTES'), 'the settings were read');
  t.deepEqual(undocumented(names), []);
});

test("every environment variable netplugctl's datastore flags fall back to is in docs/configuration.md", (t) => {
  const names = [
    ...variablesRead((env) => datastoreSettings({}, env)),
    ...variablesRead((env) => datastoreSettings({ 'datastore-type': 'kubernetes' }, env)),
  ];
  t.true(names.includes('ETCD_ENDPOINTS') && names.includes('KUBECONFIG'), 'the settings were read');
  t.deepEqual(undocumented(names), []);
});

test("every environment variable the plugin, the shim and the programs' libraries read is in docs/configuration.md", (t) => {
  const names = variablesInSources();
  t.true(names.includes('NETPLUG_DELEGATION_DEPTH') && names.includes('NETPLUG_AGENT_ACCEPT_TIMEOUT_MS'), 'the sources were read');
  t.deepEqual(undocumented(names), []);
});

type Doc = { kind?: string; metadata?: { name?: string }; data?: Record<string, string>; spec?: unknown };

test('every key of the ConfigMap netplug-config, in every release manifest, is in docs/configuration.md', (t) => {
  const keys = new Set<string>();
  for (const manifest of ['netplug.yaml', 'netplug-etcd.yaml', 'netplug-host-local.yaml', 'netplug-policy-only.yaml']) {
    const docs = loadAllYaml(readFileSync(join(ROOT, 'deploy/manifests', manifest), 'utf8')) as Doc[];
    const config = docs.find((doc) => doc?.kind === 'ConfigMap' && doc.metadata?.name === 'netplug-config');
    t.truthy(config, `${manifest} has netplug-config`);
    for (const key of Object.keys(config?.data ?? {})) keys.add(key);
  }
  t.true(keys.has('cni_network_config') && keys.has('etcd_endpoints'));
  t.deepEqual(undocumented(keys), []);
});

type Schema = { type?: string; properties?: Record<string, Schema>; items?: Schema };

/** `spec.cni.ipam.type`, `spec.calicoNetwork.ipPools[].cidr`: the path of every field under `schema` that holds a value. */
function fieldPaths(schema: Schema, path: string): string[] {
  if (schema.items?.properties) return fieldPaths(schema.items, `${path}[]`);
  if (!schema.properties) return [path];
  return Object.entries(schema.properties).flatMap(([name, child]) => fieldPaths(child, `${path}.${name}`));
}

test("every field of the Installation's spec (the operator's CRD) is in docs/configuration.md", (t) => {
  const [crd] = loadAllYaml(readFileSync(join(ROOT, 'deploy/operator-crds/installations.yaml'), 'utf8')) as Array<{
    spec: { versions: Array<{ name: string; schema: { openAPIV3Schema: Schema } }> };
  }>;
  const spec = crd?.spec.versions.find((version) => version.name === 'v1')?.schema.openAPIV3Schema.properties?.['spec'];
  t.truthy(spec);
  const paths = fieldPaths(spec ?? {}, 'spec');
  t.true(paths.includes('spec.calicoNetwork.ipPools[].cidr') && paths.includes('spec.logging.cni.logFileMaxSize'));
  t.deepEqual(undocumented(paths), []);
});

/** The top-level keys of `z.object({ ... })` after `declaration` in a schema's source (fields at `indent` spaces). */
function schemaKeys(file: string, declaration: string, indent: number): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const start = text.indexOf(declaration);
  const end = text.indexOf(`\n${' '.repeat(indent - 2)}}`, start);
  const body = text.slice(start, end);
  return [...body.matchAll(new RegExp(`^ {${indent}}(\\w+):`, 'gm'))].map((match) => match[1] ?? '');
}

test("every field of the netconf (the plugin's schema) and of netplug-ipam's ipam section is in docs/configuration.md", (t) => {
  const netconf = schemaKeys('ts/config/netconf.ts', 'const netconfSchema = z', 4);
  const ipam = schemaKeys('ts/config/ipam.ts', 'const netplugIpamSchema = z.object({', 2).map((key) => `ipam.${key}`);
  t.true(netconf.includes('policy_setup_timeout_seconds') && ipam.includes('ipam.assign_ipv6'), 'the schemas were read');
  t.deepEqual(undocumented([...netconf, ...ipam]), []);
});

// docs/operations.md lists each program's metrics and readiness checks; the same kind of check
// keeps that list whole: every metric name and every named check the sources register.
test('every metric and every named health check the programs register is in docs/operations.md', (t) => {
  const operations = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
  const metrics = new Set<string>();
  const checks = new Set<string>();
  for (const file of sourceFiles('ts', '.ts')) {
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(/\b(?:name|NAME)\s*[:=]\s*'(netplug_[a-z_]+)'/g)) metrics.add(match[1] ?? '');
    for (const match of text.matchAll(/\bhealth\.(?:add|poll|set)\(\s*'([a-z-]+)'/g)) checks.add(match[1] ?? '');
  }
  t.true(metrics.has('netplug_cni_requests_declined_total') && checks.has('start-up'), 'the sources were read');
  const missing = [...metrics, ...checks].filter((name) => !operations.includes(`\`${name}\``)).sort();
  t.deepEqual(missing, []);
});
