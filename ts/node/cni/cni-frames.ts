// The framing between the `netplug` shim and netplug-node on the CNI socket. Our own, not HTTP:
// each frame is a 4-byte big-endian length, then that many bytes; single bytes (accept, decline,
// go) travel bare. The shim's side is crates/netplug-shim.
import type { Socket } from 'node:net';

/** Larger than any environment and netconf a runtime sends (CNI_ARGS is at most 128 KiB). */
const MAX_FRAME_BYTES = 16 * 1024 * 1024;

export const ACCEPT = 0x01;
export const DECLINE = 0x00;
export const GO = 0x01;

class ConnectionClosed extends Error {
  override readonly name = 'ConnectionClosed';
}

export const frame = (bytes: Buffer | string): Buffer => {
  const body = typeof bytes === 'string' ? Buffer.from(bytes) : bytes;
  const length = Buffer.alloc(4);
  length.writeUInt32BE(body.length);
  return Buffer.concat([length, body]);
};

/** Reads frames and bytes from a socket in order; a read fails with ConnectionClosed at its end. */
export class FrameReader {
  private buffered: Buffer = Buffer.alloc(0);
  private ended: Error | undefined;
  private waiters: (() => void)[] = [];

  constructor(socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
      this.wake();
    });
    const end = (err?: Error) => {
      this.ended ??= new ConnectionClosed(err ? `connection failed: ${err.message}` : 'connection closed by the peer');
      this.wake();
    };
    socket.on('end', () => end());
    socket.on('close', () => end());
    socket.on('error', end);
  }

  /** Whether the peer has gone. */
  get closed(): boolean {
    return this.ended !== undefined;
  }

  async byte(): Promise<number> {
    return (await this.take(1))[0] as number;
  }

  async frame(): Promise<Buffer> {
    const length = (await this.take(4)).readUInt32BE(0);
    if (length > MAX_FRAME_BYTES) throw new ConnectionClosed(`a frame of ${length} bytes is over the limit of ${MAX_FRAME_BYTES}`);
    return this.take(length);
  }

  /** Resolves when the peer goes. */
  async gone(): Promise<void> {
    while (!this.ended) await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  private async take(n: number): Promise<Buffer> {
    while (this.buffered.length < n) {
      if (this.ended) throw this.ended;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
    const taken = this.buffered.subarray(0, n);
    this.buffered = this.buffered.subarray(n);
    return taken;
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }
}
