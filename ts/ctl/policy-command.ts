// netplugctl's network policy commands, from parsed arguments: apply, get, delete, explain pod.
import { readFileSync } from 'node:fs';

import { NAMESPACE_NAME } from '../model/policy-schema.ts';
import type { Store } from '../store/store.ts';
import { applyDocuments, deleteTargets } from './policy-apply.ts';
import { kindOfName, readPolicyFiles } from './policy-documents.ts';
import { explainPod } from './policy-explain.ts';
import { deleteResource, getResources, type Output } from './policy-get.ts';
import { UsageError } from './usage.ts';

type Flags = Record<string, string | boolean | string[] | undefined>;

const stdin = () => readFileSync(0, 'utf8');

function namespaceFlag(flags: Flags): string | undefined {
  const namespace = flags['namespace'];
  if (namespace === undefined) return undefined;
  if (typeof namespace !== 'string' || !NAMESPACE_NAME.test(namespace))
    throw new UsageError(`-n "${String(namespace)}" is not a namespace name`);
  return namespace;
}

function files(flags: Flags, command: string): string[] {
  const given = flags['filename'];
  if (!Array.isArray(given) || given.length === 0) throw new UsageError(`${command} needs -f FILE (YAML or JSON; - for stdin)`);
  return given;
}

export async function runPolicyCommand(store: Store, command: string, names: string[], flags: Flags, output: Output): Promise<string> {
  const namespace = namespaceFlag(flags);
  switch (command) {
    case 'apply':
      return applyDocuments(store, readPolicyFiles(files(flags, 'apply'), namespace, stdin));
    case 'delete': {
      if (flags['filename'] !== undefined) {
        const documents = readPolicyFiles(files(flags, 'delete'), namespace, stdin);
        return (
          await deleteTargets(
            store,
            documents.map(({ key, label }) => ({ key, label })),
          )
        ).text;
      }
      const [kind, name] = names as [string, string];
      return deleteResource(store, kindOfName(kind), name, namespace ?? 'default');
    }
    case 'get': {
      if (flags['all-namespaces'] === true && namespace !== undefined) throw new UsageError('get takes -n NAMESPACE or -A, not both');
      const [kind, name] = names as [string, string | undefined];
      if (flags['all-namespaces'] === true && name !== undefined)
        throw new UsageError('get KIND NAME names one resource: give -n NAMESPACE, not -A');
      return getResources(
        store,
        kindOfName(kind),
        name,
        { namespace: flags['all-namespaces'] === true ? undefined : (namespace ?? 'default') },
        output,
      );
    }
    case 'explain pod':
      return explainPod(
        store,
        names[0] as string,
        {
          ...(typeof flags['peer'] === 'string' ? { peer: flags['peer'] } : {}),
          ...(typeof flags['port'] === 'string' ? { port: flags['port'] } : {}),
          ...(typeof flags['direction'] === 'string' ? { direction: flags['direction'] } : {}),
        },
        output === 'json',
      );
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}
