// Reading a kubeconfig as client-go does, without a server: the server URL and its path prefix,
// trust (CA data or file, else none given), which credential a user gets, the exec stanza's
// checks, an exec plugin's output, finding its command; and errors that name the kubeconfig, the
// user and the field, never a secret.
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { FixedCredential, TokenFile } from '../../ts/k8s/credentials.ts';
import { KubeSettingsError, KubeUnavailableError } from '../../ts/k8s/errors.ts';
import { execSettings } from '../../ts/k8s/exec-config.ts';
import { ExecCredentialSource, findCommand, parseExecCredential } from '../../ts/k8s/exec-credential.ts';
import { openKubeClient } from '../../ts/k8s/client.ts';
import { apiAccess } from '../../ts/k8s/kubeconfig.ts';
import { tempDir } from '../helpers/cni.ts';
import { eventually } from '../helpers/eventually.ts';

const SECRET = 'very-secret-token-text';
const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

function kubeconfig(
  t: ExecutionContext,
  user: Record<string, unknown>,
  cluster: Record<string, unknown> = { server: 'https://10.0.0.1:6443' },
): string {
  const dir = tempDir(t, 'kc');
  const path = join(dir, 'config');
  writeFileSync(
    path,
    JSON.stringify({
      clusters: [{ name: 'c', cluster }],
      users: [{ name: 'u', user }],
      contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'ctx',
    }),
  );
  return path;
}

/** apiAccess's KubeSettingsError: its field and message. */
async function refusal(t: ExecutionContext, path: string, settings: Record<string, string> = {}) {
  const error = await t.throwsAsync(apiAccess({ kubeconfig: path, ...settings }), { instanceOf: KubeSettingsError });
  t.is((error as KubeSettingsError).field, 'kubernetes.kubeconfig');
  t.true(error?.message.startsWith(`${path}: `), error?.message);
  t.false(error?.message.includes(SECRET));
  return error?.message ?? '';
}

test('the server keeps its path prefix; k8s_api_root overrides it and drops /api and after', async (t) => {
  const path = kubeconfig(t, { token: SECRET }, { server: 'https://rancher.example:443/k8s/clusters/c-1/' });
  t.is((await apiAccess({ kubeconfig: path })).server.href, 'https://rancher.example/k8s/clusters/c-1');
  const root = await apiAccess({ kubeconfig: path, k8s_api_root: 'https://10.96.0.1:443/k8s/clusters/c-2/api/v1' });
  t.is(root.server.href, 'https://10.96.0.1/k8s/clusters/c-2');
  t.is(root.user, 'u', 'credentials still come from the kubeconfig');
  t.is((await apiAccess({ k8s_api_root: 'https://10.96.0.1:443' })).server.pathname, '/');
  const bare = kubeconfig(t, {}, { server: '10.0.0.1:6443' });
  t.is((await apiAccess({ kubeconfig: bare })).server.href, 'https://10.0.0.1:6443/', 'no scheme means https, as in client-go');
});

test('trust: the CA as data or as a file relative to the kubeconfig, data first; none given without either', async (t) => {
  const withFile = kubeconfig(t, {}, { server: 'https://h', 'certificate-authority': 'ca.pem' });
  writeFileSync(join(withFile, '..', 'ca.pem'), CA);
  t.is((await apiAccess({ kubeconfig: withFile })).tls.ca?.toString(), CA);
  const both = kubeconfig(
    t,
    {},
    { server: 'https://h', 'certificate-authority': '/nonexistent', 'certificate-authority-data': Buffer.from(CA).toString('base64') },
  );
  t.is((await apiAccess({ kubeconfig: both })).tls.ca?.toString(), CA);
  const none = await apiAccess({ kubeconfig: kubeconfig(t, {}) });
  t.deepEqual(none.tls, {}, 'no CA: the HTTP layer trusts the system roots');
  const missing = kubeconfig(t, {}, { server: 'https://h', 'certificate-authority': 'gone.pem' });
  t.regex(await refusal(t, missing), /: cluster "c": certificate-authority \/.*\/gone\.pem: ENOENT$/);
});

test('insecure-skip-tls-verify is refused, saying what to give instead', async (t) => {
  const path = kubeconfig(t, { token: SECRET }, { server: 'https://h', 'insecure-skip-tls-verify': true });
  t.regex(
    await refusal(t, path),
    /cluster "c": insecure-skip-tls-verify is not supported: .*give certificate-authority-data or certificate-authority/,
  );
});

test('client certificate and key: data, or files relative to the kubeconfig', async (t) => {
  const path = kubeconfig(t, { 'client-certificate': 'tls/client.pem', 'client-key-data': Buffer.from('KEY').toString('base64') });
  mkdirSync(join(path, '..', 'tls'));
  writeFileSync(join(path, '..', 'tls', 'client.pem'), 'CERT');
  const access = await apiAccess({ kubeconfig: path });
  t.is(access.tls.cert?.toString(), 'CERT');
  t.is(access.tls.key?.toString(), 'KEY');
  t.regex(access.tlsOrigins.cert ?? '', /: user "u": client-certificate \/.*\/tls\/client\.pem$/);
  t.regex(access.tlsOrigins.key ?? '', /: user "u": client-key-data$/);
  t.deepEqual(await access.credentials.current(), {}, 'no token');
});

test('a token; a tokenFile read at use, relative to the kubeconfig, with the token beside it as a fallback', async (t) => {
  const inline = await apiAccess({ kubeconfig: kubeconfig(t, { token: SECRET }) });
  t.true(inline.credentials instanceof FixedCredential);
  t.deepEqual(await inline.credentials.current(), { token: SECRET });

  const path = kubeconfig(t, { tokenFile: 'token' });
  const access = await apiAccess({ kubeconfig: path });
  t.true(access.credentials instanceof TokenFile);
  const error = await t.throwsAsync(access.credentials.current(), { instanceOf: KubeSettingsError });
  t.regex(error?.message ?? '', /: user "u": tokenFile \/.*\/token: ENOENT$/);
  writeFileSync(join(path, '..', 'token'), `${SECRET}\n`);
  t.deepEqual(await access.credentials.current(), { token: SECRET });
  writeFileSync(join(path, '..', 'token'), 'second-token');
  t.deepEqual(await access.credentials.current(), { token: 'second-token' }, 'read again when it changes');
  writeFileSync(join(path, '..', 'token'), '');
  t.regex((await t.throwsAsync(access.credentials.current()))?.message ?? '', /tokenFile \/.*\/token is empty/);

  const fallback = await apiAccess({ kubeconfig: kubeconfig(t, { tokenFile: '/nonexistent', token: SECRET }) });
  t.deepEqual(await fallback.credentials.current(), { token: SECRET });
});

test('auth-provider and basic authentication are refused, naming the user', async (t) => {
  t.regex(
    await refusal(t, kubeconfig(t, { 'auth-provider': { name: 'gcp', config: { 'access-token': SECRET } } })),
    /user "u": auth-provider "gcp" is not supported .*use the provider's exec credential plugin, a token or a client certificate/,
  );
  t.regex(await refusal(t, kubeconfig(t, { username: 'admin', password: SECRET })), /user "u": username and password .* not supported/);
});

test('contexts, clusters and users that are missing are named', async (t) => {
  const dir = tempDir(t, 'kc');
  const write = (config: unknown) => {
    const path = join(dir, `config-${Math.random()}`);
    writeFileSync(path, JSON.stringify(config));
    return path;
  };
  t.regex(await refusal(t, write({ contexts: [] })), /no current-context$/);
  t.regex(await refusal(t, write({ 'current-context': 'x', contexts: [] })), /no context "x" in contexts$/);
  const context = { name: 'x', context: { cluster: 'c', user: 'u' } };
  t.regex(await refusal(t, write({ 'current-context': 'x', contexts: [context] })), /no cluster "c" in clusters$/);
  const cluster = { name: 'c', cluster: { server: 'https://h' } };
  t.regex(await refusal(t, write({ 'current-context': 'x', contexts: [context], clusters: [cluster] })), /no user "u" in users$/);
  t.regex(
    await refusal(
      t,
      write({ 'current-context': 'x', contexts: [context], clusters: [{ name: 'c', cluster: {} }], users: [{ name: 'u', user: {} }] }),
    ),
    /cluster "c": no server$/,
  );
  const yaml = join(dir, 'broken.yaml');
  writeFileSync(yaml, `users:\n- name: u\n  user:\n    token: ${SECRET}\n   bad: [\n`);
  t.regex(await refusal(t, yaml), /: not a kubeconfig: /);
});

test('exec: apiVersion, command, args, env and interactiveMode are checked as client-go checks them', (t) => {
  const check = (exec: unknown) => {
    try {
      return execSettings(exec, (message) => new Error(message));
    } catch (err) {
      return (err as Error).message;
    }
  };
  const v1 = { apiVersion: 'client.authentication.k8s.io/v1', command: 'aws', interactiveMode: 'Never' };
  t.like(
    check({ ...v1, args: ['eks', 'get-token'], env: [{ name: 'A', value: 'b' }], installHint: ' get it\n', provideClusterInfo: true }),
    {
      args: ['eks', 'get-token'],
      env: [['A', 'b']],
      installHint: 'get it',
      provideClusterInfo: true,
    },
  );
  t.like(check({ apiVersion: 'client.authentication.k8s.io/v1beta1', command: 'x' }), { args: [], provideClusterInfo: false });
  t.regex(check({ ...v1, interactiveMode: undefined }) as string, /interactiveMode must be given for client.authentication.k8s.io\/v1/);
  t.regex(check({ ...v1, interactiveMode: 'Always' }) as string, /Always, but netplug runs plugins without a terminal/);
  t.regex(check({ ...v1, interactiveMode: 'Sometimes' }) as string, /"Sometimes" is not one of Never, IfAvailable, Always/);
  t.regex(
    check({ ...v1, apiVersion: 'client.authentication.k8s.io/v1alpha1' }) as string,
    /apiVersion "client.authentication.k8s.io\/v1alpha1" is not supported/,
  );
  t.regex(check({ ...v1, command: '' }) as string, /exec.command is missing/);
  t.regex(check({ ...v1, args: [1] }) as string, /exec.args must be a list of strings/);
  t.regex(check({ ...v1, env: [{ name: 'A' }] }) as string, /exec.env must be a list of \{name, value\}/);
  t.regex(check('aws') as string, /exec is not a mapping/);
});

test('exec in a kubeconfig: a token beside it wins, as in client-go; a bad stanza names the user', async (t) => {
  const exec = { apiVersion: 'client.authentication.k8s.io/v1', command: 'aws', interactiveMode: 'Never' };
  t.true((await apiAccess({ kubeconfig: kubeconfig(t, { exec }) })).credentials instanceof ExecCredentialSource);
  t.true((await apiAccess({ kubeconfig: kubeconfig(t, { exec, token: SECRET }) })).credentials instanceof FixedCredential);
  t.regex(await refusal(t, kubeconfig(t, { exec: { ...exec, interactiveMode: 'Always' } })), /: user "u": exec.interactiveMode is Always/);
});

test("an exec plugin's output: token or certificate and key, expiry, and errors that never repeat it", (t) => {
  const v1 = 'client.authentication.k8s.io/v1';
  const parse = (output: unknown) => {
    try {
      return parseExecCredential(typeof output === 'string' ? output : JSON.stringify(output), v1, (message) => new Error(message));
    } catch (err) {
      t.false((err as Error).message.includes(SECRET));
      return (err as Error).message;
    }
  };
  const ok = (status: Record<string, unknown>) => ({ apiVersion: v1, kind: 'ExecCredential', status });
  t.deepEqual(parse(ok({ token: SECRET })), { credential: { token: SECRET }, expires: undefined });
  t.is(
    (parse(ok({ token: SECRET, expirationTimestamp: '2030-01-02T03:04:05Z' })) as { expires: number }).expires,
    Date.UTC(2030, 0, 2, 3, 4, 5),
  );
  const pair = parse(ok({ clientCertificateData: 'CERT', clientKeyData: SECRET })) as { credential: { cert: Buffer; key: Buffer } };
  t.is(pair.credential.cert.toString(), 'CERT');
  t.is(pair.credential.key.toString(), SECRET);
  t.is(parse(`token: ${SECRET}`), 'printed something that is not an ExecCredential (not JSON)');
  t.is(
    parse({ ...ok({ token: SECRET }), apiVersion: 'client.authentication.k8s.io/v1beta1' }),
    `is configured for ${v1} but returned client.authentication.k8s.io/v1beta1`,
  );
  t.is(parse({ ...ok({ token: SECRET }), kind: 'Secret' }), 'printed something that is not an ExecCredential (kind)');
  t.is(parse({ apiVersion: v1, kind: 'ExecCredential' }), 'returned no status');
  t.regex(parse(ok({ clientKeyData: SECRET })) as string, /certificate without its key, or a key without its certificate/);
  t.regex(parse(ok({})) as string, /returned neither status.token nor status.clientCertificateData and clientKeyData/);
  t.regex(parse(ok({ token: SECRET, expirationTimestamp: 'tomorrow' })) as string, /expirationTimestamp that is not an RFC 3339 time/);
});

test('an exec command: found on PATH by name, or a path relative to the kubeconfig; only executable files', (t) => {
  const dir = tempDir(t, 'kc');
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'plugin'), '#!/bin/sh\n');
  chmodSync(join(bin, 'plugin'), 0o755);
  writeFileSync(join(bin, 'not-executable'), '');
  t.is(findCommand('plugin', '/elsewhere', `/nonexistent:relative/dir:${bin}`), join(bin, 'plugin'));
  t.is(findCommand('bin/plugin', dir, ''), join(bin, 'plugin'), 'a command with a slash is relative to the base');
  t.is(findCommand(join(bin, 'plugin'), '/elsewhere', ''), join(bin, 'plugin'));
  t.is(findCommand('plugin', dir, '/nonexistent'), undefined);
  t.is(findCommand('not-executable', dir, bin), undefined);
  t.is(findCommand('bin', '/', dir), undefined, 'a directory is no command');
});

test('an exec plugin runs for a bounded time, with what it started; a failing one is "try again" and its output is not shown', async (t) => {
  const dir = tempDir(t, 'kc');
  const script = (name: string, body: string) => {
    writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`);
    chmodSync(join(dir, name), 0o755);
    return `./${name}`;
  };
  const source = (command: string, timeoutMs?: number) =>
    new ExecCredentialSource({
      settings: execSettings({ apiVersion: 'client.authentication.k8s.io/v1', command, interactiveMode: 'Never' }, (m) => new Error(m)),
      kubeconfig: join(dir, 'config'),
      user: 'u',
      ...(timeoutMs ? { timeoutMs } : {}),
    });
  const hung = source(script('hangs', `sleep 60 & echo $! > "${dir}/sleeper"; wait`), 300);
  const timedOut = await t.throwsAsync(hung.current(), { instanceOf: KubeUnavailableError });
  t.regex(timedOut?.message ?? '', /: user "u": exec plugin "\.\/hangs" did not finish within 0.3 s and was killed/);
  const sleeper = Number(readFileSync(join(dir, 'sleeper'), 'utf8'));
  await eventually('what the plugin started to be killed with it', () => gone(sleeper), { intervalMs: 50 });

  const failing = source(script('fails', `echo ${SECRET}; echo ${SECRET} >&2; exit 3`));
  const failed = await t.throwsAsync(failing.current(), { instanceOf: KubeUnavailableError });
  t.regex(failed?.message ?? '', /exec plugin "\.\/fails" failed with exit code 3 \(its output is not shown/);
  t.false(failed?.message.includes(SECRET));

  const garbled = source(script('garbled', `echo "${SECRET}"`));
  const refused = await t.throwsAsync(garbled.current(), { instanceOf: KubeSettingsError });
  t.regex(refused?.message ?? '', /exec plugin "\.\/garbled" printed something that is not an ExecCredential \(not JSON\)$/);
  t.false(refused?.message.includes(SECRET));
});

/** Whether process `pid` is gone (or a zombie about to be reaped). */
function gone(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z') ?? false;
  } catch {
    return true;
  }
}

test("a client certificate an exec plugin returns that TLS cannot use is a settings error naming the plugin's fields", async (t) => {
  const output = {
    apiVersion: 'client.authentication.k8s.io/v1',
    kind: 'ExecCredential',
    status: { clientCertificateData: 'CERT', clientKeyData: SECRET },
  };
  const path = kubeconfig(t, { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: './plugin', interactiveMode: 'Never' } });
  writeFileSync(join(path, '..', 'plugin'), `#!/bin/sh\necho '${JSON.stringify(output)}'\n`);
  chmodSync(join(path, '..', 'plugin'), 0o755);
  const client = await openKubeClient({ kubeconfig: path });
  t.teardown(() => client.close());
  const error = await t.throwsAsync(client.get('/api/v1/namespaces/default', 'get on namespaces'), { instanceOf: KubeSettingsError });
  t.regex(
    error?.message ?? '',
    /^the client (certificate|key) \(.*: user "u": exec plugin ".*\/plugin": status.clientCertificateData and clientKeyData\): /,
  );
  t.false(error?.message.includes(SECRET));
});
