// Makes V8's code cache for the agents' bundle (the long-running programs and netplugctl's cluster
// commands, ts/cli/agents.ts): compiles the wrapped bundle the way sea-main.ts does, runs its
// top level (every module's initialisation, no program's main), then saves the cache of all the
// functions compiled by then. Without it each start compiled the 4 MB bundle again: 0.45 s of CPU
// for `netplugctl upgrade --help`, paid by every cluster command, every agent start and every
// container restart. No training run of the programs as for the plugin's cache (code-cache.ts):
// they are not on a pod's path, and their first calls compile the rest. Run by build.ts:
// node scripts/agents-code-cache.ts <wrapped bundle> <cache out>.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Script } from 'node:vm';

const [wrappedPath, cachePath] = process.argv.slice(2);
if (!wrappedPath || !cachePath) throw new Error('usage: node scripts/agents-code-cache.ts <wrapped bundle> <cache out>');

const script = new Script(readFileSync(wrappedPath, 'utf8'), { filename: 'agents.cjs' });
const bundle = { exports: {} as { main?: unknown } };
script.runInThisContext()(bundle.exports, createRequire(wrappedPath), bundle, wrappedPath, dirname(wrappedPath));
if (typeof bundle.exports.main !== 'function') throw new Error(`${wrappedPath} exports no main`);
writeFileSync(cachePath, script.createCachedData());
