// netplug-flow-viewer's one listener (NETPLUG_VIEWER_LISTEN, the loopback by default, reached by
// `kubectl port-forward`, so no login of its own):
//   GET /              the page (page/html.ts)
//   GET /viewer.css, /viewer.js, /graph.js   its style and scripts, from this bundle
//   GET /api/flows?namespace=&pod=&policy=&action=&since=&limit=&follow=   netplug-flows' records (proxy.ts)
// The page loads nothing from anywhere else: the Content-Security-Policy allows this origin only.
// On the loopback, a request must name a loopback host (Host): a web page elsewhere cannot reach
// the records by pointing a name of its own at 127.0.0.1 (DNS rebinding).
//
// API: `serveViewer({ listen, source, log })` resolves once listening, to its address and close().
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

import { type Address, close, listen, reject } from '../flows/http.ts';
import { describeError } from '../runtime/errors.ts';
import { isLoopback } from '../runtime/health-server.ts';
import type { Log } from '../runtime/log.ts';
import { GRAPH_SCRIPT } from './page/graph.ts';
import { PAGE_HTML } from './page/html.ts';
import { PAGE_SCRIPT } from './page/script.ts';
import { PAGE_STYLE } from './page/style.ts';
import { type FlowsSource, proxyFlows } from './proxy.ts';

const SECURITY_HEADERS = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};

const ASSETS: Record<string, { type: string; body: string }> = {
  '/': { type: 'text/html; charset=utf-8', body: PAGE_HTML },
  '/viewer.css': { type: 'text/css; charset=utf-8', body: PAGE_STYLE },
  '/viewer.js': { type: 'text/javascript; charset=utf-8', body: PAGE_SCRIPT },
  '/graph.js': { type: 'text/javascript; charset=utf-8', body: GRAPH_SCRIPT },
};

export interface ViewerServer {
  readonly address: Address;
  close(): Promise<void>;
}

/** Whether the Host header names the loopback: localhost, 127.x.y.z or [::1], any port. */
function loopbackHost(host: string | undefined): boolean {
  const name = /^(\[[^\]]+\]|[^:]+)(:\d+)?$/.exec(host ?? '')?.[1]?.replace(/^\[|\]$/g, '');
  return name === 'localhost' || isLoopback(name);
}

export async function serveViewer(options: { listen: Address; source: FlowsSource; log: Log }): Promise<ViewerServer> {
  const { source, log } = options;
  const guardHost = isLoopback(options.listen.host) || options.listen.host === 'localhost';
  const serve = async (request: IncomingMessage, response: ServerResponse) => {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) response.setHeader(name, value);
    if (guardHost && !loopbackHost(request.headers.host))
      return reject(
        request,
        response,
        421,
        `the viewer answers requests for localhost only, not for host ${JSON.stringify(request.headers.host ?? '')}`,
      );
    const path = new URL(request.url ?? '/', 'http://viewer').pathname;
    if (request.method !== 'GET' && request.method !== 'HEAD')
      return reject(request, response, 405, 'only GET is served here', { Allow: 'GET, HEAD' });
    if (path === '/api/flows') return proxyFlows(request, response, source);
    const asset = ASSETS[path === '/index.html' ? '/' : path];
    if (!asset) return reject(request, response, 404, `not found: ${path}`);
    response.writeHead(200, { 'Content-Type': asset.type, 'Cache-Control': 'no-cache' });
    response.end(request.method === 'HEAD' ? undefined : asset.body);
  };
  const server = createServer((request, response) => {
    serve(request, response).catch((err: unknown) => {
      log.error(`serving ${request.method} ${request.url}: ${describeError(err)}`);
      if (!response.headersSent) reject(request, response, 500, 'internal error');
      else response.destroy();
    });
  });
  const address = await listen(server, options.listen);
  return { address, close: () => close(server) };
}
