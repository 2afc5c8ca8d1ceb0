// npm run generate:chart: writes the generated files of charts/netplug-operator (Chart.yaml,
// templates/operator.yaml, crds/) from ts/render/ and deploy/, and removes CRD copies whose
// source is gone.
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

import { CHART_DIR, chartFiles } from './lib/chart-files.ts';

const root = new URL('../', import.meta.url).pathname;
const chart = join(root, CHART_DIR);
const files = chartFiles(root);
mkdirSync(join(chart, 'crds'), { recursive: true });
for (const name of readdirSync(join(chart, 'crds'))) {
  if (!(`crds/${name}` in files)) {
    rmSync(join(chart, 'crds', name));
    console.log(`removed ${CHART_DIR}/crds/${name}`);
  }
}
for (const [name, text] of Object.entries(files)) {
  mkdirSync(dirname(join(chart, name)), { recursive: true });
  writeFileSync(join(chart, name), text);
  console.log(`wrote ${CHART_DIR}/${name}`);
}
