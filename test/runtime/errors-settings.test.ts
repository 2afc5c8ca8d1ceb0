// Pure parts of the runtime: one line per failure whatever threw it (ts/runtime/errors.ts), and
// settings whose errors name the variable and its value (ts/runtime/settings.ts).
import { ApiException } from '@kubernetes/client-node';
import test from 'ava';
import * as z from 'zod/mini';

import { Logger } from '../../ts/log/logger.ts';
import { apiStatus, describeError } from '../../ts/runtime/errors.ts';
import { LOG_LEVEL } from '../../ts/runtime/log.ts';
import { duration, flag, hostPort, integer, list, oneOf, parseEnv, SettingsError, text } from '../../ts/runtime/settings.ts';

test('API exceptions: the status code and the Status message, not the headers and body', (t) => {
  const body = JSON.stringify({ kind: 'Status', message: 'nodes "n1" is forbidden: User "x" cannot get resource "nodes"', code: 403 });
  const err = new ApiException(
    403,
    `HTTP-Code: 403\nMessage: Unknown API Status Code!\nBody: ${body}\nHeaders: {"authorization":"Bearer abc"}`,
    body,
    {
      authorization: 'Bearer abc',
    },
  );
  t.is(describeError(err), 'HTTP 403: nodes "n1" is forbidden: User "x" cannot get resource "nodes"');
  t.is(apiStatus(err), 403);
  t.is(describeError(new ApiException(502, 'x', '<html>\nbad gateway</html>', {})), 'HTTP 502');
});

test("Node, fetch and watch errors: one line with the cause; a watch's status", (t) => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:6443'), { code: 'ECONNREFUSED', syscall: 'connect' });
  t.is(describeError(new TypeError('fetch failed', { cause: refused })), 'fetch failed: connect ECONNREFUSED 10.0.0.1:6443');
  t.is(
    describeError(new AggregateError([new Error('connect ECONNREFUSED ::1:2379'), new Error('connect ECONNREFUSED 127.0.0.1:2379')])),
    'connect ECONNREFUSED ::1:2379; connect ECONNREFUSED 127.0.0.1:2379',
  );
  const watch = Object.assign(new Error('Forbidden'), { statusCode: 403 });
  t.is(describeError(watch), 'HTTP 403 Forbidden');
  t.is(apiStatus(watch), 403);
  t.is(
    apiStatus(Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14 })),
    undefined,
    'a gRPC code is no HTTP status',
  );
  t.is(
    describeError(new Error('first line\n    at Object.<anonymous> (/x.js:1:1)\n  second')),
    'first line at Object.<anonymous> (/x.js:1:1) second',
  );
  t.is(describeError('plain text'), 'plain text');
  t.is(describeError({ message: 'an object with a message' }), 'an object with a message');
});

test('no credential in a description', (t) => {
  t.is(
    describeError(new Error('GET https://admin:s3cret@10.0.0.1:6443/api?token=abc.def failed; Authorization: Bearer eyJhbGciOi.x.y')),
    'GET https://admin:[redacted]@10.0.0.1:6443/api?token=[redacted] failed; Authorization: Bearer [redacted]',
  );
  t.true(describeError(new Error('x'.repeat(5000))).length < 1100, 'shortened');
});

const schema = z.object({
  MODE: oneOf(['fast', 'slow'], { default: 'fast' }),
  KIND: oneOf(['etcdv3', 'kubernetes'], { default: 'etcdv3', problem: 'is not known; use "etcdv3" or "kubernetes"' }),
  ENABLED: list(['node', 'ipam'], 'node,ipam'),
  GRACE: duration('15m'),
  ADDR: hostPort('0.0.0.0:9094'),
  ON: flag(true),
  COUNT: integer(3, 1, 10),
  NAME: text(),
  LOG_LEVEL,
});

test('settings: defaults, and what each variable gives', (t) => {
  t.deepEqual(parseEnv(schema, {}), {
    MODE: 'fast',
    KIND: 'etcdv3',
    ENABLED: ['node', 'ipam'],
    GRACE: 900_000,
    ADDR: { host: '0.0.0.0', port: 9094 },
    ON: true,
    COUNT: 3,
    NAME: undefined,
    LOG_LEVEL: 'INFO',
  });
  t.like(
    parseEnv(schema, {
      MODE: 'slow',
      ENABLED: ' ipam ,',
      GRACE: '1h30m',
      ADDR: '[::1]:9000',
      ON: 'FALSE',
      COUNT: '10',
      NAME: ' n1 ',
      LOG_LEVEL: 'warn',
    }),
    {
      MODE: 'slow',
      ENABLED: ['ipam'],
      GRACE: 5_400_000,
      ADDR: { host: '::1', port: 9000 },
      ON: false,
      COUNT: 10,
      NAME: 'n1',
      LOG_LEVEL: 'WARNING',
    },
  );
  t.like(parseEnv(schema, { ADDR: ':9091', MODE: '' }), { ADDR: { host: '0.0.0.0', port: 9091 }, MODE: 'fast' }, 'empty is unset');
});

test('settings: every bad variable named, with its value', (t) => {
  const error = t.throws(
    () =>
      parseEnv(schema, {
        MODE: 'medium',
        KIND: 'consul',
        ENABLED: 'node,policy',
        GRACE: '15 minutes',
        ADDR: 'localhost',
        ON: 'yes',
        COUNT: '11',
        LOG_LEVEL: 'loud',
      }),
    { instanceOf: SettingsError },
  );
  t.is(
    error.message,
    [
      'MODE "medium" must be fast or slow',
      'KIND "consul" is not known; use "etcdv3" or "kubernetes"',
      'ENABLED names "policy": not one of node, ipam',
      'GRACE "15 minutes" is not a duration such as 15m, 90s or 1h30m',
      'ADDR "localhost" must be host:port, such as 0.0.0.0:9094',
      'ON "yes" must be true or false',
      'COUNT "11" must be a whole number from 1 to 10',
      'LOG_LEVEL "loud" must be error or warning or info or debug',
    ].join('; '),
  );
});

test("a program's log: one line per record, the part named for a child, newlines folded, fields redacted", (t) => {
  const lines: string[] = [];
  const log = Logger.forProgram('netplug-kube-controllers', (line) => lines.push(line), 'INFO');
  log.info('starting');
  log.child('leader').warning('lost\nthe lease', { token: 'abc' });
  log.debug('not shown');
  t.is(lines.length, 2);
  t.regex(lines[0] ?? '', /^\d{4}-\d\d-\d\dT[\d:.]+Z INFO starting\n$/);
  t.regex(lines[1] ?? '', /^\S+ WARNING leader: lost the lease token="\[redacted\]"\n$/);
});
