// Who may post flow records to netplug-flows: the bearer token of a service account that
// NETPLUG_FLOWS_WRITERS names, issued for the audience netplug-flows, as the API server's
// TokenReview (authentication.k8s.io/v1) says. A pod-bound token names its pod's node
// (`authentication.kubernetes.io/node-name` in the review's extra): that writer may post only
// records of its node. A token's verdict is kept `ttlMs` (default 60 s; at most `maxEntries`
// tokens, the oldest forgotten first), by the token's hash, so that a node's every batch is not a
// TokenReview; concurrent requests with one token share one review. A review that fails (the API
// server unreachable, or refusing the aggregator's own credentials) is not kept: the write is
// answered 503 and the next one asks again.
//
// The same checks, with `role: 'read'`, say who may read records on the write listener
// (NETPLUG_FLOWS_READERS).
//
// API: `new Writers({ review, writers, role?, ttlMs?, maxEntries?, now? })`, verdict(token);
// `tokenReviewer(config)`: the review through @kubernetes/client-node.
import { createHash } from 'node:crypto';

import * as k8s from '@kubernetes/client-node';

import { shorten } from '../log/echo.ts';
import { FLOWS_AUDIENCE } from './settings.ts';

/** What the API server says of a token. */
export interface Review {
  authenticated: boolean;
  user?: string;
  extra?: Record<string, readonly string[]>;
  /** Why it is not authenticated, in the API server's words. */
  error?: string;
}

export type Reviewer = (token: string) => Promise<Review>;

export type Verdict =
  /** `node`: the writer's node, when its token names one. */
  | { allowed: true; user: string; node?: string }
  | { allowed: false; status: 401 | 403; reason: 'unauthenticated' | 'forbidden'; message: string };

/** The review's extra key naming the node of a pod-bound token. */
export const NODE_NAME_EXTRA = 'authentication.kubernetes.io/node-name';

interface Kept {
  verdict: Verdict;
  until: number;
}

export class Writers {
  readonly #review: Reviewer;
  readonly #writers: ReadonlySet<string>;
  readonly #role: 'write' | 'read';
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;
  readonly #kept = new Map<string, Kept>();
  readonly #asking = new Map<string, Promise<Verdict>>();

  constructor(options: {
    review: Reviewer;
    /** The API user names allowed. */
    writers: readonly string[];
    /** What they are allowed, for the refusal's words (default write). */
    role?: 'write' | 'read';
    ttlMs?: number;
    maxEntries?: number;
    now?: () => number;
  }) {
    this.#review = options.review;
    this.#writers = new Set(options.writers);
    this.#role = options.role ?? 'write';
    this.#ttlMs = options.ttlMs ?? 60_000;
    this.#maxEntries = options.maxEntries ?? 1024;
    this.#now = options.now ?? Date.now;
  }

  /** Tokens whose verdict is kept now. */
  get kept(): number {
    return this.#kept.size;
  }

  /** The verdict on `token`; rejects when the review itself fails. */
  async verdict(token: string): Promise<Verdict> {
    const key = createHash('sha256').update(token).digest('base64');
    const kept = this.#kept.get(key);
    if (kept && kept.until > this.#now()) return kept.verdict;
    if (kept) this.#kept.delete(key);
    const asking = this.#asking.get(key);
    if (asking) return asking;
    const ask = this.#review(token)
      .then((review) => {
        const verdict = this.#judge(review);
        this.#keep(key, verdict);
        return verdict;
      })
      .finally(() => this.#asking.delete(key));
    this.#asking.set(key, ask);
    return ask;
  }

  #judge(review: Review): Verdict {
    if (!review.authenticated || review.user === undefined) {
      const why = review.error ? `: ${shorten(review.error, 300)}` : '';
      return {
        allowed: false,
        status: 401,
        reason: 'unauthenticated',
        message: `the token is not a valid service account token for the audience ${FLOWS_AUDIENCE}${why}`,
      };
    }
    if (!this.#writers.has(review.user))
      return {
        allowed: false,
        status: 403,
        reason: 'forbidden',
        message: `${shorten(review.user, 300)} may not ${this.#role} flow records: it is not one of the service accounts ${this.#role === 'read' ? 'NETPLUG_FLOWS_READERS' : 'NETPLUG_FLOWS_WRITERS'} names`,
      };
    const node = review.extra?.[NODE_NAME_EXTRA]?.[0];
    return { allowed: true, user: review.user, ...(node ? { node } : {}) };
  }

  #keep(key: string, verdict: Verdict): void {
    this.#kept.delete(key);
    while (this.#kept.size >= this.#maxEntries) {
      const oldest = this.#kept.keys().next().value as string;
      this.#kept.delete(oldest);
    }
    this.#kept.set(key, { verdict, until: this.#now() + this.#ttlMs });
  }
}

/** TokenReviews with the program's own credentials (it needs `create` on tokenreviews). */
export function tokenReviewer(config: k8s.KubeConfig): Reviewer {
  const api = config.makeApiClient(k8s.AuthenticationV1Api);
  return async (token) => {
    const answer = await api.createTokenReview({ body: { spec: { token, audiences: [FLOWS_AUDIENCE] } } });
    const status = answer.status ?? {};
    // The API's advice: a client that asks for an audience checks that the answer names it (an
    // authenticator that ignores audiences names none, and would accept any service account token).
    const audienced = status.audiences?.includes(FLOWS_AUDIENCE) === true;
    const authenticated = status.authenticated === true;
    return {
      authenticated: authenticated && audienced,
      ...(status.user?.username ? { user: status.user.username } : {}),
      ...(status.user?.extra ? { extra: status.user.extra } : {}),
      ...(status.error ? { error: status.error } : {}),
      ...(authenticated && !audienced ? { error: `the API server's review does not name the audience ${FLOWS_AUDIENCE}` } : {}),
    };
  };
}
