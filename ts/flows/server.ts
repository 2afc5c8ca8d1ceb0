// netplug-flows' two HTTP listeners:
//   writes (NETPLUG_FLOWS_LISTEN; TLS with NETPLUG_FLOWS_TLS_CERT_FILE and _KEY_FILE)
//     POST /v1/flows   a FlowBatch (JSON; `Content-Encoding: gzip` too), at most 4 MiB (decompressed),
//                      with `Authorization: Bearer <token>` of a writer (writers.ts):
//                      200 {"accepted": N}; 400 naming the field and the value; 401 no or a bad token;
//                      403 not a writer, or a record of another node than the token's; 413 too large;
//                      415 another encoding; 503 the TokenReview could not be made
//     GET /v1/flows    as on the read listener, with `Authorization: Bearer <token>` of a reader
//                      (NETPLUG_FLOWS_READERS: the flow viewer), answered 401, 403 and 503 as writes
//   reads (NETPLUG_FLOWS_READ_LISTEN, the loopback by default: whoever reaches it reads every record)
//     GET /v1/flows?namespace=&pod=&policy=&action=&node=&since=&limit=   {"records": [...]}, newest
//                      last (filter.ts says the parameters); 400 naming a bad one
//     GET /v1/flows?follow=1&...   the matching records as they arrive, one JSON object a line
//                      (application/x-ndjson), until the client goes; with since or limit, the
//                      matching records held first
// Errors are JSON, {"error": "<one line>"}. A follower that does not read (8 MiB waiting) is
// dropped.
//
// API: `serveFlows(options)` resolves once both listen, to their addresses and close().
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type OutgoingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { createGunzip } from 'node:zlib';

import type * as z from 'zod/mini';

import { fieldPath } from '../config/issues.ts';
import { describeValue } from '../log/echo.ts';
import { type FlowBatch, flowBatchSchema, type FlowFilter, type FlowRecord } from '../model/flow.ts';
import { describeError } from '../runtime/errors.ts';
import type { Log } from '../runtime/log.ts';
import { DEFAULT_LIMIT, FilterError, matchesFilter, parseFlowQuery } from './filter.ts';
import { type Address, bearerToken, close, listen, reject, send } from './http.ts';
import type { FlowsMetrics, RefusedReason } from './metrics.ts';
import { FLOWS_AUDIENCE } from './settings.ts';
import type { FlowWindow } from './window.ts';
import type { Verdict, Writers } from './writers.ts';

/** The largest batch taken, decompressed. */
const MAX_BATCH_BYTES = 4 * 1024 * 1024;
/** A follower with this much not yet sent is dropped. */
const FOLLOWER_BACKLOG_BYTES = 8 * 1024 * 1024;
const PATH = '/v1/flows';

export interface FlowsServerOptions {
  write: Address;
  read: Address;
  tls?: { cert: string; key: string } | undefined;
  window: FlowWindow;
  writers: Pick<Writers, 'verdict'>;
  /** Who may also read on the write listener (NETPLUG_FLOWS_READERS); none: reads on the read listener only. */
  readers?: Pick<Writers, 'verdict'>;
  metrics: FlowsMetrics;
  log: Log;
  now?: () => number;
}

export interface FlowsServers {
  /** Where each listens (the port chosen when 0 was asked). */
  readonly write: Address;
  readonly read: Address;
  close(): Promise<void>;
}

interface Follower {
  filter: FlowFilter;
  response: ServerResponse;
}

export async function serveFlows(options: FlowsServerOptions): Promise<FlowsServers> {
  const { window, writers, metrics, log } = options;
  const now = options.now ?? Date.now;
  const followers = new Set<Follower>();
  /** The last TokenReview failure logged: the same one is logged once while it lasts. */
  let reviewProblem: string | undefined;

  const publish = (records: readonly FlowRecord[]) => {
    for (const follower of followers) {
      const lines = records.filter((record) => matchesFilter(record, follower.filter)).map((record) => `${JSON.stringify(record)}\n`);
      if (lines.length === 0) continue;
      follower.response.write(lines.join(''));
      if (follower.response.writableLength > FOLLOWER_BACKLOG_BYTES) {
        log.warning(`dropped a follower that does not read: ${follower.response.writableLength} bytes waited`);
        followers.delete(follower);
        follower.response.destroy();
      }
    }
    metrics.followers(followers.size);
  };

  const refuse = (reason: RefusedReason, request: IncomingMessage, response: ServerResponse, status: number, message: string) => {
    metrics.refused(reason);
    const headers: OutgoingHttpHeaders = status === 401 ? { 'WWW-Authenticate': `Bearer realm="${FLOWS_AUDIENCE}"` } : {};
    reject(request, response, status, message, headers);
  };

  /**
   * The verdict on the request's bearer token by `accounts`, or undefined once the request is
   * answered: 401 without a token or with a bad one, 403 not one of `accounts`, 503 no review.
   */
  const authorize = async (
    accounts: Pick<Writers, 'verdict'>,
    request: IncomingMessage,
    refused: (reason: RefusedReason, status: number, message: string) => void,
  ): Promise<(Verdict & { allowed: true }) | undefined> => {
    const token = bearerToken(request);
    if (token === undefined) {
      refused(
        'unauthenticated',
        401,
        `no bearer token: send Authorization: Bearer <a service account token for the audience ${FLOWS_AUDIENCE}>`,
      );
      return undefined;
    }
    let verdict: Verdict;
    try {
      verdict = await accounts.verdict(token);
      reviewProblem = undefined;
    } catch (err) {
      const problem = describeError(err);
      if (problem !== reviewProblem) log.warning(`cannot verify tokens (TokenReview): ${problem}`);
      reviewProblem = problem;
      refused('review-failed', 503, `cannot verify the token now: ${problem}`);
      return undefined;
    }
    if (verdict.allowed) return verdict;
    refused(verdict.reason, verdict.status, verdict.message);
    return undefined;
  };

  // The write listener: writers post; readers (NETPLUG_FLOWS_READERS) read, as on the read listener.
  const write = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const url = new URL(request.url ?? '/', 'http://flows');
    if (url.pathname !== PATH) return reject(request, response, 404, `not found: ${PATH} is served here`);
    const readers = options.readers;
    if (request.method === 'GET' && readers) {
      // Refused reads are not counted with the writes: that metric tells nodes' troubles.
      const reader = await authorize(readers, request, (_reason, status, message) =>
        reject(request, response, status, message, status === 401 ? { 'WWW-Authenticate': `Bearer realm="${FLOWS_AUDIENCE}"` } : {}),
      );
      if (reader) read(request, response);
      return;
    }
    if (request.method !== 'POST')
      return reject(request, response, 405, `only POST is served on ${PATH}${readers ? ', and GET to readers' : ''}`, {
        Allow: readers ? 'GET, POST' : 'POST',
      });
    const verdict = await authorize(writers, request, (reason, status, message) => refuse(reason, request, response, status, message));
    if (!verdict) return;

    const declared = Number(request.headers['content-length']);
    if (declared > MAX_BATCH_BYTES && request.headers['content-encoding'] === undefined)
      return refuse('too-large', request, response, 413, `the batch is ${declared} bytes: at most ${MAX_BATCH_BYTES} are taken`);
    const body = await readBody(request);
    if (body === 'too-large')
      return refuse(
        'too-large',
        request,
        response,
        413,
        `the batch is larger than ${MAX_BATCH_BYTES} bytes (decompressed): post smaller batches`,
      );
    if (body === 'unsupported-encoding')
      return refuse('unsupported-encoding', request, response, 415, 'Content-Encoding must be gzip or none');
    if (body instanceof Error) return refuse('malformed', request, response, 400, `the body cannot be read: ${describeError(body)}`);
    let value: unknown;
    try {
      value = JSON.parse(body.toString('utf8'));
    } catch (err) {
      return refuse('malformed', request, response, 400, `the body is not JSON: ${(err as Error).message}`);
    }
    const parsed = flowBatchSchema.safeParse(value);
    if (!parsed.success) return refuse('malformed', request, response, 400, batchProblem(parsed.error.issues, value));
    const { records }: FlowBatch = parsed.data;
    if (verdict.node !== undefined) {
      const at = records.findIndex((record) => record.node !== verdict.node);
      const other = records[at];
      if (other)
        return refuse(
          'node-mismatch',
          request,
          response,
          403,
          `field "records[${at}].node" is ${describeValue(other.node)}, but the token is of a pod on node ${describeValue(verdict.node)}: a node posts its own records only`,
        );
    }
    const dropped = window.add(records, now());
    metrics.received(records.length);
    metrics.dropped(dropped);
    metrics.held(window.records, window.bytes);
    log.debug(`took ${records.length} records from ${verdict.user}${verdict.node ? ` (node ${verdict.node})` : ''}`);
    publish(records);
    send(response, 200, { accepted: records.length });
  };

  const read = (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? '/', 'http://flows');
    if (url.pathname !== PATH) return reject(request, response, 404, `not found: GET ${PATH} is served here`);
    if (request.method !== 'GET') return reject(request, response, 405, `only GET is served on ${PATH}`, { Allow: 'GET' });
    let query: ReturnType<typeof parseFlowQuery>;
    try {
      query = parseFlowQuery(url.searchParams, now());
    } catch (err) {
      if (err instanceof FilterError) return reject(request, response, 400, err.message);
      throw err;
    }
    if (!query.follow) return send(response, 200, { records: window.query(query.filter, query.limit ?? DEFAULT_LIMIT) });
    response.writeHead(200, { 'Content-Type': 'application/x-ndjson', 'Cache-Control': 'no-store' });
    response.flushHeaders();
    if (query.limit !== undefined || query.filter.since !== undefined) {
      const held = window.query(query.filter, query.limit ?? DEFAULT_LIMIT);
      if (held.length > 0) response.write(held.map((record) => `${JSON.stringify(record)}\n`).join(''));
    }
    const follower: Follower = { filter: query.filter, response };
    followers.add(follower);
    metrics.followers(followers.size);
    response.on('close', () => {
      followers.delete(follower);
      metrics.followers(followers.size);
    });
  };

  const handle =
    (serve: (request: IncomingMessage, response: ServerResponse) => void | Promise<void>) =>
    (request: IncomingMessage, response: ServerResponse) => {
      Promise.resolve()
        .then(() => serve(request, response))
        .catch((err: unknown) => {
          log.error(`serving ${request.method} ${request.url}: ${describeError(err)}`);
          if (!response.headersSent) reject(request, response, 500, 'internal error');
          else response.destroy();
        });
    };

  const tls = options.tls;
  const writeServer = tls
    ? createTlsServer({ cert: readFileSync(tls.cert), key: readFileSync(tls.key) }, handle(write))
    : createServer(handle(write));
  const readServer = createServer(handle(read));
  const servers: Server[] = [];
  try {
    const writeAddress = await listen(writeServer, options.write);
    servers.push(writeServer);
    const readAddress = await listen(readServer, options.read);
    servers.push(readServer);
    return {
      write: writeAddress,
      read: readAddress,
      close: async () => {
        for (const follower of followers) follower.response.end();
        followers.clear();
        await Promise.all(servers.map(close));
      },
    };
  } catch (err) {
    await Promise.all(servers.map(close));
    throw err;
  }
}

/** The body, decompressed; `too-large` past MAX_BATCH_BYTES; an Error when it cannot be read (bad gzip). */
async function readBody(request: IncomingMessage): Promise<Buffer | Error | 'too-large' | 'unsupported-encoding'> {
  const encoding = (request.headers['content-encoding'] ?? 'identity').toLowerCase();
  if (encoding !== 'identity' && encoding !== 'gzip') return 'unsupported-encoding';
  const source = encoding === 'gzip' ? request.pipe(createGunzip()) : request;
  // A client gone before the end: the gunzip stream would wait for more forever.
  if (source !== request)
    request.once('close', () => {
      if (!request.complete) source.destroy(new Error('the client went away before the end of the body'));
    });
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BATCH_BYTES) {
        if (source !== request) source.destroy();
        request.unpipe();
        return 'too-large';
      }
      chunks.push(chunk);
    }
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
  return Buffer.concat(chunks);
}

/** `field "records[0].protocol" must be a number, got "tcp"`: the first issue, with the value found. */
function batchProblem(issues: readonly z.core.$ZodIssue[], body: unknown): string {
  const [issue] = issues;
  if (!issue) return 'the batch is not a FlowBatch';
  const field = fieldPath(issue.path);
  const got = issue.path.reduce<unknown>((value, key) => (value as Record<PropertyKey, unknown> | undefined)?.[key], body);
  const found = got === undefined ? '' : `, got ${describeValue(got, 100)}`;
  let rule: string;
  switch (issue.code) {
    case 'invalid_type':
      rule = got === undefined ? 'is required' : `must be ${/^[aeiou]/.test(issue.expected) ? 'an' : 'a'} ${issue.expected}`;
      break;
    case 'invalid_value':
      rule = `must be ${issue.values.map((v) => JSON.stringify(v)).join(' or ')}`;
      break;
    default:
      rule = `is invalid (${issue.message})`;
  }
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more problems)` : '';
  return `field "${field}" ${rule}${found}${more}`;
}
