// The viewer's API: GET /api/flows takes the query netplug-flows takes (ts/flows/filter.ts),
// checks it here, so that a bad filter is answered 400 with the one line netplugctl would print,
// and asks netplug-flows' write listener with the viewer's token (a reader's, NETPLUG_FLOWS_READERS).
// The answer, a list or a follow's ndjson stream, is passed on as it comes; the request to
// netplug-flows ends when the browser goes. What netplug-flows refuses because of the viewer's own
// token or state (401, 403, 5xx), or cannot be asked at all, is answered 502 naming why. Node's
// http rather than fetch: a follow may stay quiet for long, and fetch ends a body idle for 5 minutes.
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';

import { FilterError, parseFlowQuery } from '../flows/filter.ts';
import { reject } from '../flows/http.ts';
import { describeError } from '../runtime/errors.ts';
import type { Log } from '../runtime/log.ts';
import type { TokenFile } from './token-file.ts';

/** The most of a refusal's body read for its message. */
const ERROR_BODY_BYTES = 64 * 1024;

export interface FlowsSource {
  /** netplug-flows' write listener, e.g. http://10.96.0.12:9445. */
  url: string;
  token: Pick<TokenFile, 'current'>;
  log: Log;
}

/** GET `url` with `token`; resolves to the answer's head (its body unread), rejects when it cannot be asked. */
function ask(url: URL, token: string, signal: AbortSignal): Promise<IncomingMessage> {
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, fail) => {
    const outgoing = request(url, { headers: { Authorization: `Bearer ${token}`, Accept: 'application/json' }, signal }, resolve);
    outgoing.on('error', fail);
    outgoing.end();
  });
}

/** The `error` of a JSON refusal, else its status. */
async function refusal(answer: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of answer as AsyncIterable<Buffer>) {
    text += chunk.toString('utf8');
    if (text.length > ERROR_BODY_BYTES) break;
  }
  try {
    const said = (JSON.parse(text) as { error?: unknown }).error;
    if (typeof said === 'string') return said;
  } catch {
    // Not JSON: the status says it.
  }
  return `HTTP ${answer.statusCode}`;
}

export async function proxyFlows(request: IncomingMessage, response: ServerResponse, source: FlowsSource): Promise<void> {
  const asked = new URL(request.url ?? '/', 'http://viewer').searchParams;
  try {
    parseFlowQuery(asked, Date.now());
  } catch (err) {
    if (err instanceof FilterError) return reject(request, response, 400, err.message);
    throw err;
  }
  let token: string;
  try {
    token = source.token.current();
  } catch (err) {
    source.log.warning(describeError(err));
    return reject(request, response, 502, `the viewer has no token for netplug-flows: ${describeError(err)}`);
  }
  const gone = new AbortController();
  response.once('close', () => gone.abort());
  let answer: IncomingMessage;
  try {
    answer = await ask(new URL(`${source.url}/v1/flows?${asked}`), token, gone.signal);
  } catch (err) {
    if (gone.signal.aborted) return;
    return reject(request, response, 502, `cannot reach netplug-flows at ${source.url}: ${describeError(err)}`);
  }
  if (answer.statusCode !== 200) {
    const why = await refusal(answer).catch((err: unknown) => describeError(err));
    if (answer.statusCode === 400) return reject(request, response, 400, why);
    source.log.warning(`netplug-flows refused the viewer (${answer.statusCode}): ${why}`);
    return reject(request, response, 502, `netplug-flows refused the viewer (${answer.statusCode}): ${why}`);
  }
  response.writeHead(200, { 'Content-Type': answer.headers['content-type'] ?? 'application/json', 'Cache-Control': 'no-store' });
  response.flushHeaders();
  answer.on('error', () => response.destroy());
  answer.pipe(response);
}
