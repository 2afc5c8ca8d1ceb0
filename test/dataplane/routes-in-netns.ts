// Runs calls of ts/dataplane/routes.ts in this process's network namespace, as netplug-node runs
// them in the node's: routes.test.ts starts it under `ip netns exec`. argv[2] is a JSON list of
// [function, ...arguments]; stdout is a JSON list of { value } or { error: { name, code, op, message } }.
import * as routes from '../../ts/dataplane/routes.ts';

type Call = [keyof typeof callable, ...unknown[]];

const callable = {
  ensureIpipDevice: routes.ensureIpipDevice,
  ensureVxlanDevice: routes.ensureVxlanDevice,
  deleteLink: routes.deleteLink,
  syncRoutes: routes.syncRoutes,
  syncNeighbors: routes.syncNeighbors,
  syncFdb: routes.syncFdb,
};

const calls = JSON.parse(process.argv[2] ?? '[]') as Call[];
const outcomes: unknown[] = [];
for (const [name, ...args] of calls) {
  try {
    const call = callable[name] as (...a: unknown[]) => Promise<unknown>;
    outcomes.push({ value: await call(...args) });
  } catch (err) {
    const { name: kind, code, op, message } = err as Error & { code?: string; op?: string };
    outcomes.push({ error: { name: kind, code, op, message } });
  }
}
process.stdout.write(JSON.stringify(outcomes));
