// netplug-node as a process of its own (for tests that kill it): runNodeMain with this process's
// environment, stopped cleanly by SIGTERM.
import { runNodeMain } from '../../ts/node/main.ts';

const stop = new AbortController();
process.once('SIGTERM', () => stop.abort());
process.exitCode = await runNodeMain([], process.env, stop.signal);
