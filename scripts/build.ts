// npm run build: the self-contained executables a runtime runs from its CNI_PATH, no Node needed.
//
//   dist/cni/netplug          the native shim (crates/netplug-shim): forwards the call to netplug-node's
//                             socket, or runs netplug-oneshot beside it; static, loads no library
//   dist/cni/netplug-oneshot  Node 24 single executable application (SEA) with the bundled program,
//                             the one-shot plugin (it calls itself netplug)
//   dist/cni/netplug-ipam     the SEA, linked: the program dispatches on the name it runs as
//   dist/bin/netplugctl       the SEA again, for administrators; also netplug-node,
//                             netplug-install, netplug-kube-controllers, netplug-operator,
//                             netplug-flows, netplug-flow-viewer (own bundle)
//   dist/*/netplug-dataplane.linux-<arch>-gnu.node   the data-plane addon beside each
//
// The program is one esbuild bundle (CommonJS) in which each command's code is initialised on
// first use. The SEA's main script (ts/cli/sea-main.ts) runs it from an asset with a V8 code
// cache trained by running the programs (scripts/code-cache.ts): the functions a pod's ADD and
// DEL run arrive compiled. A V8 start-up snapshot of the initialised program, the alternative, is
// slower: its larger heap takes VERSION from 32.7 to 37.8 ms, and an ADD gains only 3 ms (60
// against 63 ms).
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, linkSync, mkdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { arch } from 'node:os';

import { build, type BuildOptions } from 'esbuild';

import { etcd3Protos } from './lib/etcd3-protos.ts';

const root = new URL('../', import.meta.url).pathname;
const out = (path: string) => `${root}dist/${path}`;
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
const addonFile = `netplug-dataplane.linux-${arch()}-gnu.node`;
// dist/bin: the administrator's tool and the long-running programs, all the same executable.
const BIN_NAMES = [
  'netplugctl',
  'netplug-node',
  'netplug-install',
  'netplug-kube-controllers',
  'netplug-operator',
  'netplug-flows',
  'netplug-flow-viewer',
];

rmSync(out(''), { recursive: true, force: true });
for (const dir of ['build', 'cni', 'bin']) mkdirSync(out(dir), { recursive: true });

const bundleOptions = {
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node24',
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
  // CommonJS has no import.meta: its url, which only locates the addon in the repository
  // (ts/native/addon.ts), is undefined in a bundle, which finds the addon beside itself.
  define: { 'import.meta.url': 'undefined' },
} as const;
/** Builds one bundle; a warning fails the build, so that the build stays free of them. */
async function bundle(options: BuildOptions): Promise<void> {
  const { warnings } = await build({ ...bundleOptions, ...options });
  if (warnings.length > 0) throw new Error(`esbuild warned ${warnings.length} time(s) bundling ${options.entryPoints}; see above`);
}
await bundle({ entryPoints: [`${root}ts/cli/run.ts`], outfile: out('build/netplug.cjs') });
await bundle({ entryPoints: [`${root}ts/cli/sea-main.ts`], outfile: out('build/sea-main.cjs') });
// The long-running programs (node agent, installer, controllers) and their libraries, apart.
await bundle({ entryPoints: [`${root}ts/cli/agents.ts`], outfile: out('build/agents.cjs'), plugins: [etcd3Protos()] });
writeFileSync(out('build/agents.wrapped.cjs'), wrap(readFileSync(out('build/agents.cjs'), 'utf8')));

// The bundle as a function of CommonJS's module variables, the one string both the training and
// the executable compile (V8 accepts a code cache only for the source it was made from).
function wrap(source: string): string {
  return `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
}
writeFileSync(out('build/netplug.wrapped.cjs'), wrap(readFileSync(out('build/netplug.cjs'), 'utf8')));
// Node and V8 flags of the executable (none so far; a larger young generation measured no gain).
// V8 accepts a code cache only under the flags it was made with, so training runs with them too.
// NODE_OPTIONS from the runtime's environment is ignored: the plugin behaves the same everywhere.
const EXEC_ARGV: string[] = [];
execFileSync(
  process.execPath,
  [...EXEC_ARGV, `${root}scripts/code-cache.ts`, out('build/netplug.wrapped.cjs'), out('build/netplug.cache')],
  { stdio: 'inherit' },
);
execFileSync(
  process.execPath,
  [...EXEC_ARGV, `${root}scripts/agents-code-cache.ts`, out('build/agents.wrapped.cjs'), out('build/agents.cache')],
  { stdio: 'inherit' },
);

writeFileSync(
  out('build/sea-config.json'),
  JSON.stringify({
    main: out('build/sea-main.cjs'),
    output: out('build/netplug.blob'),
    disableExperimentalSEAWarning: true,
    useCodeCache: true,
    execArgv: EXEC_ARGV,
    execArgvExtension: 'none',
    assets: {
      'netplug.cjs': out('build/netplug.wrapped.cjs'),
      'netplug.cache': out('build/netplug.cache'),
      'agents.cjs': out('build/agents.wrapped.cjs'),
      'agents.cache': out('build/agents.cache'),
    },
  }),
);
execFileSync(process.execPath, ['--experimental-sea-config', out('build/sea-config.json')], { stdio: 'ignore' });

// The SEA is a copy of this Node binary, symbols stripped, with the program injected.
const executable = out('cni/netplug-oneshot');
copyFileSync(realpathSync(process.execPath), executable);
chmodSync(executable, 0o755);
execFileSync('strip', [executable]);
execFileSync(`${root}node_modules/.bin/postject`, [executable, 'NODE_SEA_BLOB', out('build/netplug.blob'), '--sentinel-fuse', SEA_FUSE], {
  stdio: 'ignore',
});

linkSync(executable, out('cni/netplug-ipam'));
for (const name of BIN_NAMES) linkSync(executable, out(`bin/${name}`));
for (const dir of ['cni', 'bin']) copyFileSync(`${root}native/${addonFile}`, out(`${dir}/${addonFile}`));

// The shim, linked statically (scripts/build-shim.sh says why).
const shimTarget = { x64: 'x86_64-unknown-linux-gnu', arm64: 'aarch64-unknown-linux-gnu' }[arch() as 'x64' | 'arm64'];
const builtShim = execFileSync('sh', [`${root}scripts/build-shim.sh`, shimTarget], {
  cwd: root,
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'inherit'],
}).trim();
copyFileSync(builtShim, out('cni/netplug'));
chmodSync(out('cni/netplug'), 0o755);

// A rejected cache still runs, only slower on every command: refuse to build one.
const report = spawnSync(executable, [], { env: { CNI_COMMAND: 'VERSION', NETPLUG_REPORT_CODE_CACHE: '1' }, encoding: 'utf8' });
if (!report.stderr.includes('code cache accepted'))
  throw new Error(`the executable does not use its code cache: ${report.stderr}${report.stdout}`);
const agentsReport = spawnSync(out('bin/netplugctl'), ['upgrade', '--help'], { env: { NETPLUG_REPORT_CODE_CACHE: '1' }, encoding: 'utf8' });
if (!agentsReport.stderr.includes('code cache accepted'))
  throw new Error(`the agents' bundle does not use its code cache: ${agentsReport.stderr}${agentsReport.stdout}`);

const size = (readFileSync(executable).length / 1e6).toFixed(0);
const shimSize = (readFileSync(out('cni/netplug')).length / 1e6).toFixed(1);
console.log(
  `built dist/cni/netplug-oneshot (${size} MB, also as dist/cni/netplug-ipam and dist/bin/{${BIN_NAMES.join(',')}}), the shim dist/cni/netplug (${shimSize} MB) with ${addonFile}`,
);
