// The conflist from its template: placeholders (`__NAME__`) replaced by their values, as the
// reference's install-cni does, with one difference: a placeholder whose value is
// empty removes the field (or array element) holding it instead of writing "", and an `mtu` of 0
// or "" is dropped (absent means the node agent's MTU file). The result must be JSON.
import { randomUUID } from 'node:crypto';

/** Where a template came from, for messages: "ConfigMap kube-system/netplug-config key cni_network_config". */
export interface Template {
  text: string;
  source: string;
}

/** The template cannot make a conflist; the message names its source. */
export class TemplateError extends Error {}

const PLACEHOLDER = /__([A-Z0-9]+(?:_[A-Z0-9]+)*)__/y;
/** Marks, during rendering, where an empty value was: no template contains it (random per process). */
const REMOVED = `netplug-removed-${randomUUID()}`;

/** The conflist text (pretty JSON, newline-terminated) for `template` with `values` substituted. */
export function renderConflist(template: Template, values: Record<string, string>): string {
  const substituted = substitute(template.text, values);
  let parsed: unknown;
  try {
    parsed = JSON.parse(substituted);
  } catch (err) {
    throw new TemplateError(
      `the CNI network config template from ${template.source} is not valid JSON once its placeholders are substituted: ${(err as Error).message.slice(0, 200)}`,
    );
  }
  const conflist = prune(parsed);
  if (
    !isObject(conflist) ||
    !(Array.isArray(conflist.plugins)
      ? conflist.plugins.every((plugin) => isObject(plugin) && typeof plugin.type === 'string')
      : typeof conflist.type === 'string')
  ) {
    throw new TemplateError(
      `the CNI network config template from ${template.source} is not a CNI network configuration: it needs "plugins", a list of objects each with a "type" (or a single "type")`,
    );
  }
  for (const plugin of Array.isArray(conflist.plugins) ? conflist.plugins : [conflist]) {
    if (isObject(plugin) && (plugin.mtu === 0 || plugin.mtu === '')) delete plugin.mtu;
  }
  return `${JSON.stringify(conflist, null, 2)}\n`;
}

/** Replaces known placeholders, JSON-escaping values inside strings; unknown ones stay as written. */
function substitute(text: string, values: Record<string, string>): string {
  let out = '';
  let inString = false;
  for (let i = 0; i < text.length; ) {
    const char = text[i];
    if (inString && char === '\\') {
      out += text.slice(i, i + 2);
      i += 2;
      continue;
    }
    if (char === '"') inString = !inString;
    PLACEHOLDER.lastIndex = i;
    const match = char === '_' ? PLACEHOLDER.exec(text) : null;
    const value = match ? values[match[1] ?? ''] : undefined;
    if (match && value !== undefined) {
      if (value === '') out += inString ? REMOVED : JSON.stringify(REMOVED);
      else out += inString ? JSON.stringify(value).slice(1, -1) : value;
      i += match[0].length;
      continue;
    }
    out += char;
    i++;
  }
  return out;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const holdsRemoved = (value: unknown): boolean => typeof value === 'string' && value.includes(REMOVED);

/** `value` without the fields and elements an empty placeholder removed. */
function prune(value: unknown): unknown {
  if (Array.isArray(value)) return value.filter((item) => !holdsRemoved(item)).map(prune);
  if (!isObject(value)) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, item]) => !holdsRemoved(item))
      .map(([key, item]) => [key, prune(item)]),
  );
}
