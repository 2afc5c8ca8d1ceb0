// The viewer page's graph (served as /graph.js; plain JavaScript, no template literals): an SVG of
// the flows shown, one column per namespace (ends outside any pod in a column of their own), a dot
// per pod, an arrow per source and destination, green where flows were allowed, dashed red where
// denied, labelled with the policies that denied them. Drawn anew from the flows each time.
export const GRAPH_SCRIPT = String.raw`'use strict';
(() => {
  const SVG = 'http://www.w3.org/2000/svg';
  const PAD = 12;
  const COLUMN = 210;
  const GAP = 110;
  const HEAD = 34;
  const ROW = 36;
  const DOT = 7;
  const OUTSIDE = '(outside pods)';

  const make = (name, attributes, parent) => {
    const element = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
    if (parent) parent.append(element);
    return element;
  };
  const titled = (element, text) => {
    make('title', {}, element).textContent = text;
    return element;
  };
  const short = (text, length) => (text.length > length ? text.slice(0, length - 1) + '…' : text);
  const policyName = (key) => key.replace(/^(NetworkPolicy|GlobalNetworkPolicy|Profile)\//, '');

  const endpointOf = (end) =>
    end.kind === 'pod' && end.name
      ? { key: 'pod:' + end.namespace + '/' + end.name, group: end.namespace || OUTSIDE, label: end.name, outside: false }
      : { key: end.kind + ':' + end.address, group: OUTSIDE, label: end.name || end.address, outside: true };

  // The namespaces and their endpoints, and the edges: per source and destination, allowed and denied counts and the denying policies.
  const model = (flows) => {
    const groups = new Map();
    const edges = new Map();
    const place = (end) => {
      const endpoint = endpointOf(end);
      if (!groups.has(endpoint.group)) groups.set(endpoint.group, new Map());
      groups.get(endpoint.group).set(endpoint.key, endpoint);
      return endpoint.key;
    };
    for (const flow of flows) {
      const from = place(flow.source);
      const to = place(flow.destination);
      const key = from + ' -> ' + to;
      if (!edges.has(key)) edges.set(key, { from, to, allowed: 0, denied: 0, policies: new Set() });
      const edge = edges.get(key);
      if (flow.action === 'Deny') {
        edge.denied += flow.flows;
        edge.policies.add(policyName(flow.policy.policy));
      } else edge.allowed += flow.flows;
    }
    const names = [...groups.keys()].sort((a, b) => (a === OUTSIDE) - (b === OUTSIDE) || a.localeCompare(b));
    return { names, groups, edges: [...edges.values()] };
  };

  const markers = (svg) => {
    const defs = make('defs', {}, svg);
    for (const kind of ['allow', 'deny']) {
      const marker = make('marker', { id: 'arrow-' + kind, class: kind, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, defs);
      make('path', { d: 'M0,0 L10,5 L0,10 z' }, marker);
    }
  };

  // A curve from a to b bent by bend (pixels, to the left of a→b), ending short of b's dot.
  const curve = (a, b, bend) => {
    const dx = b.x - a.x;
    const dy = b.y - a.y;
    const length = Math.hypot(dx, dy) || 1;
    const control = { x: (a.x + b.x) / 2 - (dy / length) * bend, y: (a.y + b.y) / 2 + (dx / length) * bend };
    const cx = b.x - control.x;
    const cy = b.y - control.y;
    const back = Math.hypot(cx, cy) || 1;
    const end = { x: b.x - (cx / back) * (DOT + 3), y: b.y - (cy / back) * (DOT + 3) };
    const middle = { x: 0.25 * a.x + 0.5 * control.x + 0.25 * b.x, y: 0.25 * a.y + 0.5 * control.y + 0.25 * b.y };
    return { d: 'M' + a.x + ',' + a.y + ' Q' + control.x + ',' + control.y + ' ' + end.x + ',' + end.y, middle };
  };

  const draw = (svg, flows) => {
    svg.replaceChildren();
    const { names, groups, edges } = model(flows);
    const rows = Math.max(1, ...names.map((name) => groups.get(name).size));
    const width = Math.max(PAD * 2 + names.length * COLUMN + Math.max(0, names.length - 1) * GAP, 320);
    const height = PAD * 2 + HEAD + rows * ROW;
    svg.setAttribute('viewBox', '0 0 ' + width + ' ' + height);
    svg.setAttribute('width', width);
    svg.setAttribute('height', height);
    if (names.length === 0) {
      make('text', { x: PAD, y: PAD + 16, class: 'edge-label' }, svg).textContent = 'No flows to draw yet.';
      return;
    }
    markers(svg);
    const at = new Map();
    names.forEach((name, column) => {
      const x = PAD + column * (COLUMN + GAP);
      const group = titled(make('g', { class: 'namespace', 'data-namespace': name }, svg), name);
      make('rect', { x, y: PAD, width: COLUMN, height: height - PAD * 2, rx: 8 }, group);
      make('text', { x: x + 10, y: PAD + 20, class: 'title' }, group).textContent = short(name, 28);
      [...groups.get(name).values()]
        .sort((a, b) => a.label.localeCompare(b.label))
        .forEach((endpoint, index) => at.set(endpoint.key, { x: x + 32, y: PAD + HEAD + ROW / 2 + index * ROW, endpoint }));
    });
    const lines = make('g', { class: 'edges' }, svg);
    for (const edge of edges) {
      const a = at.get(edge.from);
      const b = at.get(edge.to);
      const sameColumn = a.x === b.x;
      for (const kind of ['allow', 'deny']) {
        const flowsOf = kind === 'allow' ? edge.allowed : edge.denied;
        if (flowsOf === 0) continue;
        // Within a column, bend out to the left, clear of the names; an allowed and a denied edge apart, one to each side.
        const bend = sameColumn ? (a.y < b.y ? 1 : -1) * (40 + Math.abs(a.y - b.y) / 4) + (kind === 'deny' ? 16 : 0) : kind === 'deny' ? 24 : -12;
        const path = curve(a, b, bend);
        const line = make('path', { d: path.d, class: 'edge ' + kind, 'marker-end': 'url(#arrow-' + kind + ')', 'data-from': edge.from, 'data-to': edge.to }, lines);
        const policies = [...edge.policies].join(', ');
        titled(line, a.endpoint.label + ' → ' + b.endpoint.label + ': ' + flowsOf + (kind === 'allow' ? ' allowed' : ' denied by ' + policies));
        if (kind === 'deny') make('text', { x: path.middle.x + 4, y: path.middle.y - 4, class: 'edge-label' }, lines).textContent = '✕ ' + short(policies, 36);
      }
    }
    for (const { x, y, endpoint } of at.values()) {
      const dot = titled(make('g', { class: 'endpoint' + (endpoint.outside ? ' outside' : ''), 'data-key': endpoint.key }, svg), endpoint.key);
      make('circle', { cx: x, cy: y, r: DOT }, dot);
      make('text', { x: x + DOT + 6, y: y + 4 }, dot).textContent = short(endpoint.label, 24);
    }
  };

  window.netplugGraph = { draw };
})();
`;
