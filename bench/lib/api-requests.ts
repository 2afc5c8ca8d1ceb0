// The API server's count of the requests it has handled (apiserver_request_total on its /metrics),
// by verb and resource: what a pod network adds on the API server while pods start.

/** `VERB group/resource[/subresource]` → requests (the core group has no prefix). */
export type RequestCounts = Map<string, number>;

/** Sums apiserver_request_total of a /metrics text by verb and resource (over codes, scopes, versions). */
export function requestCounts(metrics: string): RequestCounts {
  const counts: RequestCounts = new Map();
  for (const line of metrics.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const labels = new Map([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    const group = labels.get('group') ? `${labels.get('group')}/` : '';
    const subresource = labels.get('subresource') ? `/${labels.get('subresource')}` : '';
    const key = `${labels.get('verb')} ${group}${labels.get('resource')}${subresource}`;
    counts.set(key, (counts.get(key) ?? 0) + Number(line.split(' ').at(-1)));
  }
  return counts;
}

/** What grew from `before` to `after`, most first. */
export function requestsBetween(before: RequestCounts, after: RequestCounts): [string, number][] {
  return [...after]
    .map(([key, count]): [string, number] => [key, count - (before.get(key) ?? 0)])
    .filter(([, grown]) => grown > 0)
    .sort((a, b) => b[1] - a[1]);
}

export const totalRequests = (counts: Iterable<[string, number]>): number => [...counts].reduce((sum, [, n]) => sum + n, 0);
