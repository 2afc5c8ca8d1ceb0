// The release's files an upgrade applies, as the user gives them (the spec: download the release's
// manifest and reapply your edits): read, split into objects, and hashed so a resumed apply can
// check it is given the same files as the run it continues.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

import { dumpYaml } from '@kubernetes/client-node';
// Plain YAML (client-node's own parser, a dependency of it): its loadAllYaml maps objects onto its
// typed models, which renames fields (x-kubernetes-validations, enum) and drops unknown ones.
import { loadAll } from 'js-yaml';

import { UsageError } from '../ctl/usage.ts';
import { RELEASE_IMAGE } from '../render/release.ts';
import { renderOperator } from '../render/operator.ts';
import type { Json } from './kube.ts';

export interface ReleaseFile {
  /** Where it came from: a path, or `(rendered by netplugctl)`. */
  source: string;
  objects: Json[];
  sha256: string;
}

/** The objects of a YAML or JSON file (Lists flattened); a usage error naming the flag when it cannot be used. */
export function readReleaseFile(flag: string, path: string): ReleaseFile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`${flag} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let documents: unknown[];
  try {
    documents = loadAll(text);
  } catch (err) {
    throw new UsageError(`${flag} ${path}: not YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  const objects = documents.flatMap((doc) => (isList(doc) ? doc.items : [doc])).filter((doc) => doc !== null && doc !== undefined);
  for (const [i, object] of objects.entries()) {
    const o = object as Json;
    if (typeof o !== 'object' || typeof o.apiVersion !== 'string' || typeof o.kind !== 'string' || typeof o.metadata?.name !== 'string')
      throw new UsageError(
        `${flag} ${path}: document ${i + 1} is not a Kubernetes object (apiVersion, kind and metadata.name are required)`,
      );
  }
  if (objects.length === 0) throw new UsageError(`${flag} ${path}: no Kubernetes objects in it`);
  return { source: path, objects: objects as Json[], sha256: sha256(text) };
}

/** netplug-operator.yaml as this netplugctl's release renders it. */
export function renderedOperatorManifest(): ReleaseFile {
  const objects = renderOperator(RELEASE_IMAGE) as Json[];
  return { source: '(rendered by netplugctl)', objects, sha256: sha256(objects.map((o) => dumpYaml(o)).join('---\n')) };
}

export const isCrd = (object: Json) => object.kind === 'CustomResourceDefinition';

export const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

const isList = (doc: unknown): doc is { items: unknown[] } =>
  typeof doc === 'object' && doc !== null && (doc as Json).kind === 'List' && Array.isArray((doc as Json).items);
