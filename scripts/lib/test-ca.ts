// A throwaway certificate authority for test servers (etcd, kube-apiserver, the test cluster, HTTP
// servers), made with openssl: EC P-256 keys, two-day certificates. Each certificate gets a random
// serial of its own, so certificates can be signed concurrently (openssl's -CAcreateserial file
// cannot be shared).
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

export interface TestCa {
  dir: string;
  /** `<dir>/ca.pem`, and its key `<dir>/ca.key`. */
  ca: string;
  caKey: string;
  /** An EC key at `<dir>/<name>.key`. */
  key(name: string): Promise<void>;
  /** `<dir>/<name>.pem` (and its key) for `subject` (`/CN=...`), with openssl x509 `extensions`. */
  sign(name: string, subject: string, extensions: string): Promise<void>;
  /** The same, synchronously, for callers that are. */
  signSync(name: string, subject: string, extensions: string): void;
}

const keyArgs = (name: string) => ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', `${name}.key`];
const requestArgs = (name: string, subject: string) => ['req', '-new', '-key', `${name}.key`, '-out', `${name}.csr`, '-subj', subject];
const signArgs = (name: string) => [
  'x509',
  '-req',
  '-in',
  `${name}.csr`,
  '-CA',
  'ca.pem',
  '-CAkey',
  'ca.key',
  '-set_serial',
  `0x${randomBytes(8).toString('hex')}`,
  '-out',
  `${name}.pem`,
  '-days',
  '2',
  '-extfile',
  `${name}.ext`,
];

/** Makes the CA in `dir` (created if missing). */
export function makeTestCa(dir: string, commonName: string): TestCa {
  mkdirSync(dir, { recursive: true });
  const sslSync = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  const ssl = (args: string[]) => execFileAsync('openssl', args, { cwd: dir }).then(() => undefined);
  sslSync(keyArgs('ca'));
  sslSync(['req', '-x509', '-new', '-key', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', `/CN=${commonName}`]);
  return {
    dir,
    ca: join(dir, 'ca.pem'),
    caKey: join(dir, 'ca.key'),
    key: (name) => ssl(keyArgs(name)),
    async sign(name, subject, extensions) {
      await ssl(keyArgs(name));
      writeFileSync(join(dir, `${name}.ext`), extensions);
      await ssl(requestArgs(name, subject));
      await ssl(signArgs(name));
    },
    signSync(name, subject, extensions) {
      sslSync(keyArgs(name));
      writeFileSync(join(dir, `${name}.ext`), extensions);
      sslSync(requestArgs(name, subject));
      sslSync(signArgs(name));
    },
  };
}

/** A kubeconfig in YAML, as they usually are, with file references rather than embedded data. */
export function kubeconfigText(server: string, ca: string, user: string, cert: string, key: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: netplug-test',
    '  cluster:',
    `    server: ${server}`,
    `    certificate-authority: ${ca}`,
    'users:',
    `- name: ${user}`,
    '  user:',
    `    client-certificate: ${cert}`,
    `    client-key: ${key}`,
    'contexts:',
    '- name: netplug-test',
    '  context:',
    '    cluster: netplug-test',
    `    user: ${user}`,
    'current-context: netplug-test',
    '',
  ].join('\n');
}
