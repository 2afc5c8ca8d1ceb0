// Entry point of the bundle. The single executable's main script (sea-main.ts) calls main(); the
// build's code-cache training (scripts/code-cache.ts) drives the programs as functions instead.
export { main } from './main.ts';

export const programs = {
  plugin: () => import('../plugin/main.ts'),
  ctl: () => import('../ctl/main.ts'),
};
