// One setting per CNI directory in the manifests: netplug-node mounts the runtime's CNI plugin and
// configuration directories at their host paths (the plugin's calls name host paths), so a node
// whose runtime keeps them elsewhere (k3s, OpenShift, Container-Optimized OS) must move the
// volume's hostPath and the agent's mount together. The manifest says each path once, as a YAML
// anchor on the volume's hostPath, and the agent's mount and install-cni's CNI_NET_DIR refer to it
// (aliases): editing the hostPath, as every CNI's instructions say, moves all of it. kubectl
// resolves anchors as it reads the file. dumpYaml writes no anchors on plain values, so they are
// put into its text here: the pod spec's volumes go first (an anchor comes before its aliases),
// and each change must apply exactly once, or generating the manifests fails.

/** The volumes whose host path is given once, by anchor name (the volume's name). */
const ANCHORED_VOLUMES = ['cni-bin-dir', 'cni-net-dir'] as const;

const COMMENT: Record<(typeof ANCHORED_VOLUMES)[number], string> = {
  'cni-bin-dir': "The runtime's CNI plugin directory (k3s: /var/lib/rancher/k3s/data/current/bin); netplug-node mounts it at the same path",
  'cni-net-dir':
    "The runtime's CNI configuration directory (k3s: /var/lib/rancher/k3s/agent/etc/cni/net.d); netplug-node mounts it at the same path",
};

const indentOf = (line: string) => line.length - line.trimStart().length;

/** `text` (one YAML document) with the anchors, if it is a DaemonSet with those volumes; else `text`. */
export function anchorHostPaths(text: string): string {
  if (!/^kind: DaemonSet$/m.test(text) || !ANCHORED_VOLUMES.some((name) => text.includes(`name: ${name}\n`))) return text;
  const lines = text.split('\n');
  const containers = lines.indexOf('      containers:');
  const volumes = lines.indexOf('      volumes:');
  if (containers < 0 || volumes < containers) throw new Error('anchorHostPaths: the pod spec is not laid out as expected');
  let end = volumes + 1;
  while (end < lines.length && (lines[end] === '' || indentOf(lines[end] as string) > 6)) end++;
  const volumeLines = lines.slice(volumes, end);
  const hostPaths = new Map<string, string>();
  // Each volume item: `- hostPath:` / `path: …` / `type: …` / `name: …`.
  for (let i = 0; i < volumeLines.length; i++) {
    const match = /^ {12}path: (.+)$/.exec(volumeLines[i] as string);
    if (!match) continue;
    let j = i + 1;
    while (j < volumeLines.length && !/^ {10}name: /.test(volumeLines[j] as string)) j++;
    const name = (volumeLines[j] ?? '').trim().slice('name: '.length) as (typeof ANCHORED_VOLUMES)[number];
    if (!ANCHORED_VOLUMES.includes(name)) continue;
    hostPaths.set(name, match[1] as string);
    volumeLines.splice(i, 1, `            # ${COMMENT[name]}.`, `            path: &${name} ${match[1]}`);
    i++;
  }
  const rest = [...lines.slice(0, volumes), ...lines.slice(end)];
  const uses = new Map<string, number>();
  const use = (name: string) => uses.set(name, (uses.get(name) ?? 0) + 1);
  for (let i = 0; i < rest.length; i++) {
    const line = rest[i] as string;
    // A mount of the volume at its host path: `- mountPath: …` then `name: …`.
    const mount = /^( +- mountPath: )(.+)$/.exec(line);
    if (mount) {
      const name = /^ +name: (.+)$/.exec(rest[i + 1] ?? '')?.[1] ?? '';
      if (hostPaths.get(name) === mount[2]) {
        rest[i] = `${mount[1]}*${name}`;
        use(name);
      }
      continue;
    }
    // A setting naming the host path (install-cni's CNI_NET_DIR): `- name: …` then `value: …`.
    const value = /^( +value: )(.+)$/.exec(line);
    const named = value && [...hostPaths].find(([, path]) => path === value[2]);
    if (value && named && /^ +- name: /.test(rest[i - 1] ?? '')) {
      rest[i] = `${value[1]}*${named[0]}`;
      use(named[0]);
    }
  }
  for (const name of hostPaths.keys())
    if (!uses.get(name)) throw new Error(`anchorHostPaths: nothing mounts volume ${name} at its host path`);
  const at = rest.indexOf('      containers:');
  return [...rest.slice(0, at), ...volumeLines, ...rest.slice(at)].join('\n');
}
