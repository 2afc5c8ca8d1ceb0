// The built-in profile projectnet-default-allow: the name automatic host endpoints carry, no labels,
// one Allow rule each way (so every packet is allowed, whatever its family, protocol or ports); a
// valid document, as apply's check reads one; a fresh copy on each call.
import test from 'ava';

import { DEFAULT_ALLOW_PROFILE } from '../../ts/model/host-endpoint.ts';
import { checkPolicyDocument } from '../../ts/model/policy-check.ts';
import { defaultAllowProfile, isDefaultAllowProfile } from '../../ts/policy/default-allow.ts';
import { type Packet, policyDecision, type Resolver } from '../../ts/policy/evaluate.ts';
import { profileProgram } from '../../ts/policy/program.ts';

test('projectnet-default-allow is a Profile with one Allow rule each way and no labels', (t) => {
  const profile = defaultAllowProfile();
  t.deepEqual(profile, {
    kind: 'Profile',
    apiVersion: 'projectnet.org/v3',
    metadata: { name: 'projectnet-default-allow' },
    spec: { ingress: [{ action: 'Allow' }], egress: [{ action: 'Allow' }] },
  });
  t.is(profile.metadata.name, DEFAULT_ALLOW_PROFILE, 'the name automatic host endpoints carry');
  t.false('labelsToApply' in profile.spec);
  t.deepEqual(checkPolicyDocument(profile), profile, 'a valid document, unchanged by the check');
});

test('each call gives a copy of its own', (t) => {
  const first = defaultAllowProfile();
  first.spec.ingress?.push({ action: 'Deny' });
  first.metadata.labels = { changed: 'yes' };
  t.deepEqual(defaultAllowProfile().spec.ingress, [{ action: 'Allow' }]);
  t.is(defaultAllowProfile().metadata.labels, undefined);
});

test('it allows every packet, both ways', (t) => {
  const program = profileProgram(defaultAllowProfile());
  const resolver: Resolver = { selected: () => false, namedPort: () => false };
  const packets: Packet[] = [
    { family: 4, source: 0x0a000001n, destination: 0x0a000002n, protocol: 6, sourcePort: 40000, destinationPort: 22 },
    { family: 4, source: 0xc0a80001n, destination: 0x08080808n, protocol: 17, sourcePort: 53, destinationPort: 53 },
    { family: 4, source: 1n, destination: 2n, protocol: 1, icmpType: 8, icmpCode: 0 },
    { family: 6, source: 1n, destination: 2n, protocol: 58, icmpType: 128, icmpCode: 0 },
    { family: 6, source: 1n, destination: 2n, protocol: 132, sourcePort: 1, destinationPort: 65535 },
  ];
  for (const direction of ['ingress', 'egress'] as const)
    for (const packet of packets) t.is(policyDecision(program, direction, packet, resolver).rule?.action, 'Allow', direction);
});

test('isDefaultAllowProfile names the built-in profile only', (t) => {
  t.true(isDefaultAllowProfile('projectnet-default-allow'));
  for (const name of ['projectcalico-default-allow', 'projectnet-default-allow-2', 'kns.default', ''])
    t.false(isDefaultAllowProfile(name), name);
});
