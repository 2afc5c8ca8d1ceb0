// npm run build:chart: packages charts/netplug-operator into dist/charts/netplug-operator-<version>.tgz
// and writes dist/charts/index.yaml beside it, so that any static HTTP server of that directory is a
// chart repository (`helm repo add netplug http://<host>/`; the index names the package relative
// to the repository's address). Prints the package's path last. helm is built by scripts/helm.sh.
//
// Usage: node scripts/build-chart.ts [--out <dir>] (default dist/charts).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';

import { CHART, CHART_DIR, CHART_VERSION } from './lib/chart-files.ts';

const root = new URL('../', import.meta.url).pathname;
const { values } = parseArgs({ options: { out: { type: 'string', default: join(root, 'dist/charts') } } });
const outDir = resolve(values.out);

const helm = execFileSync('sh', [join(root, 'scripts/helm.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
const run = (...args: string[]) => execFileSync(helm, args, { stdio: ['ignore', 'ignore', 'inherit'] });
mkdirSync(outDir, { recursive: true });
run('package', join(root, CHART_DIR), '--destination', outDir);
const archive = join(outDir, `${CHART}-${CHART_VERSION}.tgz`);
if (!existsSync(archive)) throw new Error(`helm package wrote no ${archive}`);
run('repo', 'index', outDir);
console.log(`wrote ${relative(process.cwd(), join(outDir, 'index.yaml'))}`);
console.log(relative(process.cwd(), archive));
