// The viewer's service account token for netplug-flows: a projected token the kubelet replaces
// before it expires, so it is read again whenever the file changes (its modification time or
// size), and otherwise kept.
import { readFileSync, statSync } from 'node:fs';

export class TokenFile {
  readonly #path: string;
  #stamp = '';
  #token = '';

  constructor(path: string) {
    this.#path = path;
  }

  /** The token now; throws a one-line Error naming the file when it cannot be read or is empty. */
  current(): string {
    let stamp: string;
    try {
      const stats = statSync(this.#path);
      stamp = `${stats.mtimeMs}:${stats.size}:${stats.ino}`;
    } catch (err) {
      throw new Error(`cannot read the token file ${this.#path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
    if (stamp !== this.#stamp) {
      const token = readFileSync(this.#path, 'utf8').trim();
      if (token === '') throw new Error(`the token file ${this.#path} is empty`);
      this.#token = token;
      this.#stamp = stamp;
    }
    return this.#token;
  }
}
