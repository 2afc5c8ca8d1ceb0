// netplug-node as a process of its own (for tests that kill it): runNodeMain with this process's
// environment, stopped cleanly by SIGTERM, and exiting as the built program does (exitAfterStop).
import { exitAfterStop } from '../../ts/cli/agents.ts';
import { runNodeMain } from '../../ts/node/main.ts';

const stop = new AbortController();
process.once('SIGTERM', () => stop.abort());
exitAfterStop(await runNodeMain([], process.env, stop.signal));
