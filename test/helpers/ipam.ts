// netplug-ipam tests: netconfs on a test etcd, netplugctl run as an administrator would, and an
// independent view of what etcd holds through the etcd3 package (not netplug's own client).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import type { ExecutionContext } from 'ava';
import { Etcd3 } from 'etcd3';

import { invoke, ROOT, runtimeInput, type Invocation, type Outcome } from './cni.ts';
import type { EtcdServer } from './etcd.ts';

export const NETPLUGCTL = join(ROOT, 'dist/bin/netplugctl');
export const NETPLUG_IPAM = join(ROOT, 'dist/cni/netplug-ipam');

let networks = 0;

/** A netplug netconf with netplug-ipam on `etcd`, for `node`. */
export function ipamNetconf(
  etcd: EtcdServer,
  options: { node?: string; name?: string; version?: string; ipam?: Record<string, unknown>; extra?: Record<string, unknown> } = {},
) {
  return {
    cniVersion: options.version ?? '1.1.0',
    name: options.name ?? `ipamtest${networks++}`,
    type: 'netplug',
    nodename: options.node ?? 'node-a',
    ...etcd.netconf,
    ipam: { type: 'netplug-ipam', ...options.ipam },
    ...options.extra,
  };
}

export interface CtlOutcome {
  status: number | null;
  stdout: string;
  stderr: string;
  json: any;
}

/** netplugctl with the datastore of `etcd` given as flags (TLS files too). */
export function ctl(etcd: EtcdServer, ...args: string[]): CtlOutcome {
  const { etcd_endpoints, etcd_ca_cert_file, etcd_cert_file, etcd_key_file } = etcd.netconf;
  const flags = [
    `--etcd-endpoints=${etcd_endpoints}`,
    ...(etcd_ca_cert_file
      ? [`--etcd-ca-cert-file=${etcd_ca_cert_file}`, `--etcd-cert-file=${etcd_cert_file}`, `--etcd-key-file=${etcd_key_file}`]
      : []),
  ];
  const run = spawnSync(NETPLUGCTL, [...flags, ...args], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' }, timeout: 60_000 });
  let json: unknown;
  try {
    json = args.includes('json') ? JSON.parse(run.stdout) : undefined;
  } catch {
    json = undefined;
  }
  return { status: run.status, stdout: run.stdout, stderr: run.stderr, json };
}

/** netplugctl that must succeed. */
export function ctlOk(t: ExecutionContext, etcd: EtcdServer, ...args: string[]): CtlOutcome {
  const outcome = ctl(etcd, ...args);
  if (outcome.status !== 0) t.fail(`netplugctl ${args.join(' ')} exited ${outcome.status}: ${outcome.stderr}${outcome.stdout}`);
  return outcome;
}

/** Addresses allocated per pool, as `netplugctl ipam show -o json` reports them. */
export function allocatedByPool(t: ExecutionContext, etcd: EtcdServer): Record<string, number> {
  const shown = ctlOk(t, etcd, 'ipam', 'show', '-o', 'json').json as { pools: { name: string; allocated: number }[] };
  return Object.fromEntries(shown.pools.map((p) => [p.name, p.allocated]));
}

export const totalAllocated = (t: ExecutionContext, etcd: EtcdServer) => Object.values(allocatedByPool(t, etcd)).reduce((a, b) => a + b, 0);

/**
 * An etcd client of its own (the etcd3 package, over gRPC): what etcd holds, seen without netplug's
 * code. Closed at the test's teardown.
 */
function observer(t: ExecutionContext, etcd: EtcdServer): Etcd3 {
  const { etcd_ca_cert_file, etcd_cert_file, etcd_key_file } = etcd.netconf;
  const client = new Etcd3({
    hosts: etcd.endpoints,
    ...(etcd_ca_cert_file && etcd_cert_file && etcd_key_file
      ? {
          credentials: {
            rootCertificate: readFileSync(etcd_ca_cert_file),
            certChain: readFileSync(etcd_cert_file),
            privateKey: readFileSync(etcd_key_file),
          },
        }
      : {}),
  });
  t.teardown(() => client.close());
  return client;
}

/** The keys under `prefix`. */
export function etcdKeys(t: ExecutionContext, etcd: EtcdServer, prefix: string): Promise<string[]> {
  return observer(t, etcd).getAll().prefix(prefix).keys();
}

/** The JSON value at `key`, if any. */
export async function etcdValue(t: ExecutionContext, etcd: EtcdServer, key: string): Promise<any> {
  return (await observer(t, etcd).get(key).json()) ?? undefined;
}

/** Deletes `key` behind netplug's back (as a lost update or an operator's mistake would). */
export async function etcdDelete(t: ExecutionContext, etcd: EtcdServer, key: string): Promise<void> {
  await observer(t, etcd).delete().key(key);
}

/** Writes `value` as JSON at `key` behind netplug's back (what a process killed mid-write leaves). */
export async function etcdPut(t: ExecutionContext, etcd: EtcdServer, key: string, value: unknown): Promise<void> {
  await observer(t, etcd).put(key).value(JSON.stringify(value));
}

/** The address (without prefix length) of each IP in a CNI result. */
export const addressesOf = (result: any): string[] => (result?.ips ?? []).map((ip: { address: string }) => ip.address.split('/')[0]);

/** An ADD that must succeed. */
export function added(t: ExecutionContext, call: Omit<Invocation, 'command'>): Outcome {
  const outcome = invoke({ ...call, command: 'ADD' });
  if (outcome.status !== 0) t.fail(`ADD exited ${outcome.status}: ${outcome.stdout}${outcome.stderr}`);
  return outcome;
}

/** The built executable run asynchronously, as a runtime running many pods at once does. */
export function startInvocation(call: Invocation): { child: ChildProcess; outcome: Promise<Outcome> } {
  const { env, input } = runtimeInput(call);
  const child = spawn(call.executable ?? join(ROOT, 'dist/cni/netplug'), [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  const outcome = new Promise<Outcome>((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (status) => {
      let json: unknown;
      try {
        json = stdout.trim() ? JSON.parse(stdout) : undefined;
      } catch {
        json = undefined;
      }
      resolve({ status, stdout, stderr, json });
    });
  });
  child.stdin?.on('error', () => undefined); // a child killed before reading its stdin
  child.stdin?.end(input);
  return { child, outcome };
}

export const invokeAsync = (call: Invocation): Promise<Outcome> => startInvocation(call).outcome;
