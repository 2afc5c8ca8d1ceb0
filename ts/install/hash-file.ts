import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';

/** The sha256 of a file's content, hex; undefined when there is no such file. */
export async function sha256OfFile(path: string): Promise<string | undefined> {
  const hash = createHash('sha256');
  try {
    for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  return hash.digest('hex');
}
