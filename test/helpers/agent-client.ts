// A client of netplug-node's CNI socket in TypeScript, speaking the shim's protocol (frames of a
// 4-byte big-endian length then the bytes): the tests' view of the server, independent of the
// Rust shim. It can also stop where a shim that gave up would: before go, or right after it.
import { connect, type Socket } from 'node:net';

import { runtimeInput, type Invocation } from './cni.ts';
import { eventually } from './eventually.ts';

export interface AgentReply {
  /** False: the agent declined (or was not there); the shim would run the one-shot. */
  accepted: boolean;
  /** Accepted, but the connection ended before the result (the shim's ADD then fails with code 11). */
  lost?: boolean;
  exitCode?: number;
  stdout?: string;
  stderr?: string;
  json?: any;
}

export interface CallOptions {
  program?: string;
  pid?: number;
  /** Closes the connection after the accept byte, without go. */
  giveUpBeforeGo?: boolean;
  /** Closes the connection right after go, without waiting for the result. */
  leaveAfterGo?: boolean;
  /** A first frame other than the shim's (for malformed requests). */
  header?: Buffer;
}

const frame = (body: Buffer) => {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(body.length);
  return Buffer.concat([length, body]);
};

/** Sends `call` as a runtime would give it to the shim, to the agent at `socketPath`. */
export async function callAgent(socketPath: string, call: Invocation, options: CallOptions = {}): Promise<AgentReply> {
  const { env, input } = runtimeInput(call);
  const header =
    options.header ??
    Buffer.from(JSON.stringify({ version: 1, program: options.program ?? 'netplug', pid: options.pid ?? process.pid, env }));
  let socket: Socket;
  try {
    socket = await new Promise<Socket>((resolve, reject) => {
      const s = connect(socketPath, () => resolve(s));
      s.once('error', reject);
    });
  } catch {
    return { accepted: false };
  }
  const reader = bytesOf(socket);
  try {
    socket.write(Buffer.concat([frame(header), frame(Buffer.from(input))]));
    const answer = await reader.take(1).catch(() => undefined);
    if (answer?.[0] !== 0x01) return { accepted: false };
    if (options.giveUpBeforeGo) return { accepted: true };
    socket.write(Buffer.from([0x01]));
    if (options.leaveAfterGo) return { accepted: true };
    const next = async () => reader.take((await reader.take(4)).readUInt32BE(0));
    let exitCode: number;
    let stdout: string;
    let stderr: string;
    try {
      exitCode = (JSON.parse((await next()).toString('utf8')) as { exitCode: number }).exitCode;
      stdout = (await next()).toString('utf8');
      stderr = (await next()).toString('utf8');
    } catch {
      return { accepted: true, lost: true };
    }
    let json: unknown;
    try {
      json = stdout.trim() ? JSON.parse(stdout) : undefined;
    } catch {
      json = undefined;
    }
    return { accepted: true, exitCode, stdout, stderr, json };
  } finally {
    socket.destroy();
  }
}

/** Reads exact byte counts from a socket; rejects once it ends short. */
function bytesOf(socket: Socket) {
  let buffered = Buffer.alloc(0);
  let ended = false;
  let wake: (() => void) | undefined;
  const poke = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    poke();
  });
  for (const event of ['end', 'close', 'error'] as const)
    socket.on(event, () => {
      ended = true;
      poke();
    });
  return {
    async take(n: number): Promise<Buffer> {
      while (buffered.length < n) {
        if (ended) throw new Error('the agent closed the connection');
        await new Promise<void>((resolve) => (wake = resolve));
      }
      const taken = buffered.subarray(0, n);
      buffered = buffered.subarray(n);
      return taken;
    },
  };
}

/** Waits until the agent at `socketPath` accepts requests (it declines while it rolls back). */
export async function waitServing(socketPath: string, timeoutMs = 60_000): Promise<void> {
  await eventually(`the agent at ${socketPath} to serve`, async () => (await callAgent(socketPath, { command: 'VERSION' })).accepted, {
    timeoutMs,
    intervalMs: 100,
  });
}
