// What netplug presents to the API server, as the kubeconfig's user says: a bearer token (inline,
// or a tokenFile read at use and reread when it changes, so a long-running process follows the
// node agent's refreshes of projected tokens), a client certificate (fixed, part of the TLS
// settings), or whatever an exec plugin prints (exec-credential.ts, loaded only for such a user).
import { readFileSync, statSync } from 'node:fs';

export interface Credential {
  token?: string;
  /** A client certificate and its key (PEM), from an exec plugin; a fixed one is in the TLS settings. */
  cert?: Buffer;
  key?: Buffer;
  /** Where the certificate came from, for messages. */
  certOrigin?: string;
}

export interface CredentialSource {
  /** The credential for the next request. */
  current(): Promise<Credential>;
  /** The API server refused `used` (401): a different credential to retry with once, or undefined. */
  renew(used: Credential): Promise<Credential | undefined>;
  /** Whether credentials may carry a client certificate, only known once they are fetched. */
  readonly suppliesCertificates: boolean;
}

/** A fixed credential: an inline token, or none beyond a fixed client certificate. */
export class FixedCredential implements CredentialSource {
  readonly suppliesCertificates = false;
  private readonly credential: Credential;

  constructor(credential: Credential) {
    this.credential = credential;
  }

  current(): Promise<Credential> {
    return Promise.resolve(this.credential);
  }

  renew(): Promise<Credential | undefined> {
    return Promise.resolve(undefined);
  }
}

/**
 * `tokenFile`: read when first needed, then again whenever the file changes (a stat per request,
 * which costs microseconds) and after a 401. As client-go does, an inline `token` beside it is
 * used while the file cannot be read.
 */
export class TokenFile implements CredentialSource {
  readonly suppliesCertificates = false;
  private readonly path: string;
  private readonly fallback: string | undefined;
  private readonly fail: (message: string) => Error;
  private stamp = '';
  private credential: Credential | undefined;

  /** `fail` makes the error for a file that cannot be used, naming the kubeconfig and user. */
  constructor(path: string, fallback: string | undefined, fail: (message: string) => Error) {
    this.path = path;
    this.fallback = fallback;
    this.fail = fail;
  }

  current(): Promise<Credential> {
    try {
      return Promise.resolve(this.read(false));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  renew(used: Credential): Promise<Credential | undefined> {
    try {
      const fresh = this.read(true);
      return Promise.resolve(fresh.token !== used.token ? fresh : undefined);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private read(again: boolean): Credential {
    let token: string;
    let stamp: string;
    try {
      const stat = statSync(this.path);
      stamp = `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeMs}`;
      if (this.credential && stamp === this.stamp && !again) return this.credential;
      token = readFileSync(this.path, 'utf8').trim();
    } catch (err) {
      if (this.fallback) return { token: this.fallback };
      throw this.fail(`tokenFile ${this.path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    if (token === '') {
      if (this.fallback) return { token: this.fallback };
      throw this.fail(`tokenFile ${this.path} is empty`);
    }
    this.stamp = stamp;
    this.credential = { token };
    return this.credential;
  }
}
