// npm run build: the self-contained executables a runtime runs from its CNI_PATH, no Node needed.
//
//   dist/cni/netplug        Node 24 single executable application (SEA) with the bundled program
//   dist/cni/netplug-ipam   the same file, linked: the program dispatches on the name it runs as
//   dist/bin/netplugctl     the same file again, for administrators
//   dist/*/netplug-dataplane.linux-<arch>-gnu.node   the data-plane addon beside each
//
// The program is one esbuild bundle (CommonJS, as Node 24's SEA requires) in which each command's
// code is initialised on first use, and the SEA carries V8's code cache for it. A V8 start-up
// snapshot of the initialised program was measured as the alternative and lost: its larger heap
// took VERSION from 32.7 to 37.8 ms, and an ADD gained only 3 ms (60 against 63 ms).
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, linkSync, mkdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { arch } from 'node:os';

import { build } from 'esbuild';

const root = new URL('../', import.meta.url).pathname;
const out = (path: string) => `${root}dist/${path}`;
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
const addonFile = `netplug-dataplane.linux-${arch()}-gnu.node`;

rmSync(out(''), { recursive: true, force: true });
for (const dir of ['build', 'cni', 'bin']) mkdirSync(out(dir), { recursive: true });

await build({
  entryPoints: [`${root}ts/cli/run.ts`],
  outfile: out('build/netplug.cjs'),
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node24',
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
  // import.meta.url only locates the addon in the repository; the bundle finds it beside itself.
  logOverride: { 'empty-import-meta': 'silent' },
});

writeFileSync(
  out('build/sea-config.json'),
  JSON.stringify({
    main: out('build/netplug.cjs'),
    output: out('build/netplug.blob'),
    disableExperimentalSEAWarning: true,
    useCodeCache: true,
  }),
);
execFileSync(process.execPath, ['--experimental-sea-config', out('build/sea-config.json')], { stdio: 'ignore' });

// The SEA is a copy of this Node binary, symbols stripped, with the program injected.
const executable = out('cni/netplug');
copyFileSync(realpathSync(process.execPath), executable);
chmodSync(executable, 0o755);
execFileSync('strip', [executable]);
execFileSync(`${root}node_modules/.bin/postject`, [executable, 'NODE_SEA_BLOB', out('build/netplug.blob'), '--sentinel-fuse', SEA_FUSE], {
  stdio: 'ignore',
});

linkSync(executable, out('cni/netplug-ipam'));
linkSync(executable, out('bin/netplugctl'));
for (const dir of ['cni', 'bin']) copyFileSync(`${root}native/${addonFile}`, out(`${dir}/${addonFile}`));

const size = (readFileSync(executable).length / 1e6).toFixed(0);
console.log(`built dist/cni/netplug (${size} MB, also as dist/cni/netplug-ipam and dist/bin/netplugctl) with ${addonFile}`);
