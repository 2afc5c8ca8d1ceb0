// A stand-in for netplug-node's CNI socket that speaks the shim's protocol (crates/netplug-shim,
// agent.rs) and records what each shim sent: the request, stdin, whether go arrived, and anything
// after. How it answers is up to the test: serve a given answer, decline, stay silent, or hang up
// after go. Only the shim's side is under test here; the real agent is tested in test/node/.
import { spawn } from 'node:child_process';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';

import type { ExecutionContext } from 'ava';

import { tempDir } from '../helpers/cni.ts';

export interface ShimRequest {
  version: number;
  program: string;
  pid: number;
  env: Record<string, string>;
}

export type Answer =
  | { kind: 'serve'; exitCode: number; stdout: Buffer | string; stderr: Buffer | string }
  | { kind: 'decline' }
  | { kind: 'silent' }
  | { kind: 'hang-up-after-go' };

export interface Call {
  request: ShimRequest;
  stdin: Buffer;
  go: boolean;
  /** Bytes the shim sent beyond the protocol's (never any). */
  extra: Buffer;
}

export interface ProtocolAgent {
  socket: string;
  /** Connections accepted so far. */
  connections(): number;
  /** The calls of every connection, once each has closed. */
  settled(): Promise<Call[]>;
}

const frame = (bytes: Buffer | string): Buffer => {
  const body = Buffer.from(bytes);
  const header = Buffer.alloc(4);
  header.writeUInt32BE(body.length);
  return Buffer.concat([header, body]);
};

/** Listens on a socket in a temporary directory until the test ends. */
export async function startProtocolAgent(t: ExecutionContext, answer: (request: ShimRequest) => Answer): Promise<ProtocolAgent> {
  const socket = join(tempDir(t, 'shim'), 'cni.sock');
  const done: Promise<Call>[] = [];
  const server = createServer((conn) => done.push(converse(conn, answer)));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, resolve);
  });
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { socket, connections: () => done.length, settled: () => Promise.all(done) };
}

function converse(conn: Socket, answer: (request: ShimRequest) => Answer): Promise<Call> {
  return new Promise((resolve, reject) => {
    let buffer = Buffer.alloc(0);
    // Chunks not yet joined: a 16 MiB stdin arrives in many, and joining each time is quadratic.
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    const frames: Buffer[] = [];
    let reply: Answer | undefined;
    let go = false;
    let extra = Buffer.alloc(0);
    conn.on('data', (chunk: Buffer) => {
      pending.push(chunk);
      pendingBytes += chunk.length;
      const needed = buffer.length >= 4 ? 4 + buffer.readUInt32BE(0) : 4;
      if (frames.length < 2 && buffer.length + pendingBytes < needed) return;
      buffer = Buffer.concat([buffer, ...pending]);
      pending = [];
      pendingBytes = 0;
      while (frames.length < 2 && buffer.length >= 4 && buffer.length >= 4 + buffer.readUInt32BE(0)) {
        const length = buffer.readUInt32BE(0);
        frames.push(buffer.subarray(4, 4 + length));
        buffer = buffer.subarray(4 + length);
      }
      if (frames.length < 2) return;
      if (!reply) {
        reply = answer(JSON.parse((frames[0] as Buffer).toString('utf8')));
        if (reply.kind === 'decline') conn.end(Buffer.from([0x00]));
        if (reply.kind === 'serve' || reply.kind === 'hang-up-after-go') conn.write(Buffer.from([0x01]));
      }
      if (!go && buffer.length > 0 && (reply.kind === 'serve' || reply.kind === 'hang-up-after-go')) {
        go = buffer[0] === 0x01;
        buffer = buffer.subarray(1);
        if (reply.kind === 'hang-up-after-go') conn.destroy();
        else conn.end(Buffer.concat([frame(JSON.stringify({ exitCode: reply.exitCode })), frame(reply.stdout), frame(reply.stderr)]));
      }
      extra = Buffer.concat([extra, buffer]);
      buffer = Buffer.alloc(0);
    });
    conn.on('error', () => undefined);
    conn.on('close', () => {
      if (frames.length < 2) reject(new Error(`the shim closed after ${frames.length} frames`));
      else resolve({ request: JSON.parse((frames[0] as Buffer).toString('utf8')), stdin: frames[1] as Buffer, go, extra });
    });
  });
}

export interface Run {
  status: number | null;
  stdout: Buffer;
  stderr: Buffer;
  pid: number;
}

/** Runs `executable` as a runtime would, without blocking this process (the agent runs in it). */
export function run(executable: string, env: Record<string, string>, stdin: Buffer | string = '', args: string[] = []): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(executable, args, { env, stdio: ['pipe', 'pipe', 'pipe'], timeout: 60_000, killSignal: 'SIGKILL' });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    // A program that does not read stdin may close it before all is written.
    child.stdin.on('error', () => undefined);
    child.stdin.end(stdin);
    child.on('error', reject);
    child.on('close', (status) =>
      resolve({ status, stdout: Buffer.concat(stdout), stderr: Buffer.concat(stderr), pid: child.pid as number }),
    );
  });
}

/** Log lines without what differs between two runs of the same call: the time and the pid. */
export function logWithoutTimeAndPid(stderr: Buffer): string {
  return stderr.toString('utf8').replace(/^\S+Z \[(\w+)\]\[\d+\]/gm, '<time> [$1][<pid>]');
}
