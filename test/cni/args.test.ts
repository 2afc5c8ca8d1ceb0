import test from 'ava';

import { parseCniArgs } from '../../ts/cni/args.ts';

test('Kubernetes runtimes: every key, in any order', (t) => {
  const args = parseCniArgs('K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u-1;IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0');
  t.deepEqual(args, { podNamespace: 'default', podName: 'web-0', podInfraContainerId: 'abc', podUid: 'u-1' });
});

test('IP is checked and kept', (t) => {
  t.deepEqual(parseCniArgs('IP=fd00::7'), { ip: 'fd00::7' });
  t.throws(() => parseCniArgs('IP=300.1.1.1'), { message: /IP "300\.1\.1\.1" is not an IP address/ });
});

test('unknown keys need IgnoreUnknown', (t) => {
  t.throws(() => parseCniArgs('K8S_POD_NAME=a;EXTRA=1'), { message: /unknown keys "EXTRA"/ });
  t.deepEqual(parseCniArgs('IgnoreUnknown=true;EXTRA=1'), {});
  t.throws(() => parseCniArgs('IgnoreUnknown=maybe'), { message: /IgnoreUnknown "maybe" is not a boolean/ });
});

test('malformed pairs', (t) => {
  t.deepEqual(parseCniArgs(''), {});
  t.deepEqual(parseCniArgs(undefined), {});
  t.throws(() => parseCniArgs('novalue'), { message: /"novalue" is not a KEY=VALUE pair/ });
  t.throws(() => parseCniArgs('a=b=c'), { message: /"a=b=c" is not a KEY=VALUE pair/ });
});
