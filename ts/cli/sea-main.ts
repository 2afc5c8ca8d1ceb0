// The single executable's main script: runs the bundled program, kept as an asset of the
// executable, with a V8 code cache made at build time after a training run (scripts/code-cache.ts).
// Node's own SEA code cache holds only what compiling the script compiles, not the functions a
// command runs; those would be compiled again on every pod's path.
import { isClusterCommand } from '../ctl/cluster-command.ts';
import { programName } from './process-io.ts';

const { getAsset } = process.getBuiltinModule('node:sea');
const { Script } = process.getBuiltinModule('node:vm');
const { createRequire } = process.getBuiltinModule('node:module');
const { dirname } = process.getBuiltinModule('node:path');

// The long-running programs live in a bundle of their own (see ts/cli/agents.ts), with a code cache
// of its modules' initialisation (scripts/agents-code-cache.ts), not trained by running them.
const AGENT_NAMES = [
  'netplug-node',
  'netplug-install',
  'netplug-kube-controllers',
  'netplug-operator',
  'netplug-flows',
  'netplug-flow-viewer',
];
// netplugctl's cluster commands (upgrade, migrate, datastore migrate, flows) use the agents' libraries too.
// netplug-install's readiness probe (--check), run every few seconds on every node, does not: compiling
// the agents' bundle took it 0.3 s of CPU each time.
// As netplug-oneshot (the shim's fallback) it is the plugin, netplug.
const program = programName();
const installCheck = program === 'netplug-install' && process.argv[2] === '--check';
const agent = (AGENT_NAMES.includes(program) && !installCheck) || (program === 'netplugctl' && isClusterCommand(process.argv.slice(2)));

// The asset is a bundle wrapped as a function of CommonJS's module variables (see build.ts).
const script = agent
  ? new Script(getAsset('agents.cjs', 'utf8'), { filename: 'agents.cjs', cachedData: new Uint8Array(getAsset('agents.cache')) })
  : new Script(getAsset('netplug.cjs', 'utf8'), { filename: 'netplug.cjs', cachedData: new Uint8Array(getAsset('netplug.cache')) });
if (process.env['NETPLUG_REPORT_CODE_CACHE'])
  process.stderr.write(`code cache ${script.cachedDataRejected === false ? 'accepted' : 'rejected'}\n`);
const bundle = { exports: {} as { main(): void } };
script.runInThisContext()(bundle.exports, createRequire(process.execPath), bundle, process.execPath, dirname(process.execPath));
bundle.exports.main();
