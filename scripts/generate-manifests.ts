// npm run generate:manifests: writes deploy/manifests/ from the template source in ts/render/.
import { mkdirSync, writeFileSync } from 'node:fs';

import { releaseFiles } from '../ts/render/release.ts';

const root = new URL('../', import.meta.url).pathname;
mkdirSync(`${root}deploy/manifests`, { recursive: true });
for (const [name, text] of Object.entries(releaseFiles(`${root}deploy`))) {
  writeFileSync(`${root}deploy/manifests/${name}`, text);
  console.log(`wrote deploy/manifests/${name}`);
}
