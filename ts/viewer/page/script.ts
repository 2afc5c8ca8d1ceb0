// The viewer page's script (served as /viewer.js; plain JavaScript, no template literals, so that
// it sits in this String.raw unchanged): follows /api/flows as ndjson (held records first, then
// live ones) with the filters of the form, keeps the newest MAX_FLOWS, and draws the table and the
// graph (graph.js) at most once a frame. A stream that ends or fails is opened again after a
// pause; a filter the API refuses is shown, not retried.
export const PAGE_SCRIPT = String.raw`'use strict';
(() => {
  const MAX_FLOWS = 500;
  const RETRY_MS = 2000;
  const PROTOCOLS = { 1: 'ICMP', 6: 'TCP', 17: 'UDP', 58: 'ICMPv6', 132: 'SCTP' };
  const form = document.getElementById('filters');
  const status = document.getElementById('status');
  const rows = document.getElementById('flow-rows');
  const count = document.getElementById('flow-count');
  const empty = document.getElementById('empty');
  const graph = document.getElementById('graph');
  let flows = [];
  let following = null;
  let drawing = false;

  const say = (text, kind) => {
    status.textContent = text;
    status.className = 'status' + (kind ? ' ' + kind : '');
  };

  const cell = (text, className) => {
    const td = document.createElement('td');
    if (className) td.className = className;
    if (text !== undefined) td.textContent = text;
    return td;
  };

  const span = (text, className) => {
    const element = document.createElement('span');
    element.className = className;
    element.textContent = text;
    return element;
  };

  // NetworkPolicy/<ns>/<name> as <ns>/<name>; GlobalNetworkPolicy/<name> and Profile/<name> as <name>.
  const policyName = (key) => key.replace(/^(NetworkPolicy|GlobalNetworkPolicy|Profile)\//, '');
  const policyLabel = (policy) => (policy.tier ? policy.tier + '/' : '') + policyName(policy.policy);
  const ruleLabel = (policy) => {
    if (policy.rule !== undefined) return 'rule ' + policy.rule;
    return policy.policy === 'default-deny' ? 'no rule allowed it' : 'end of tier';
  };

  const endCell = (end) => {
    const td = cell(undefined, 'end');
    if (end.kind === 'pod' && end.name) {
      td.append(span((end.namespace || '') + '/', 'ns'), span(end.name, 'name'));
    } else {
      td.append(span(end.kind + ' ', 'ns'), span(end.name || end.address, 'name'));
    }
    if (end.port !== undefined) td.append(span(':' + end.port, 'port'));
    td.title = end.address + (end.port !== undefined ? ':' + end.port : '');
    return td;
  };

  const row = (flow) => {
    const tr = document.createElement('tr');
    const denied = flow.action === 'Deny';
    tr.className = denied ? 'denied' : 'allowed';
    tr.dataset.verdict = flow.action;
    tr.dataset.policy = flow.policy.policy;
    const time = new Date(flow.end).toISOString().slice(11, 19);
    const verdict = cell(undefined, 'verdict-cell');
    verdict.append(span(denied ? 'Denied' : 'Allowed', 'verdict ' + (denied ? 'deny' : 'allow')));
    const policy = cell(undefined, 'policy');
    if (denied) policy.append('denied by ');
    if (flow.policy.tier) policy.append(span(flow.policy.tier + '/', 'tier'));
    policy.append(policyName(flow.policy.policy));
    policy.title = flow.policy.policy + ' (' + flow.policy.action + ')';
    tr.append(
      cell(time, 'time'),
      verdict,
      endCell(flow.source),
      endCell(flow.destination),
      cell(PROTOCOLS[flow.protocol] || String(flow.protocol)),
      policy,
      cell(ruleLabel(flow.policy), 'rule'),
      cell(flow.reporter === 'src' ? 'source egress' : 'destination ingress'),
      cell(flow.node),
      cell(String(flow.flows), 'num'),
      cell(String(flow.packets), 'num'),
      cell(String(flow.bytes), 'num'),
    );
    return tr;
  };

  const draw = () => {
    drawing = false;
    rows.replaceChildren(...flows.map(row));
    count.textContent = flows.length === 0 ? '' : '(' + flows.length + (flows.length === MAX_FLOWS ? ', the newest' : '') + ')';
    empty.hidden = flows.length > 0;
    window.netplugGraph.draw(graph, flows);
  };

  const redraw = () => {
    if (drawing) return;
    drawing = true;
    requestAnimationFrame(draw);
  };

  const query = () => {
    const params = new URLSearchParams();
    for (const name of ['namespace', 'pod', 'policy', 'action']) {
      const value = form.elements[name].value.trim();
      if (value) params.set(name, value);
    }
    return params;
  };

  class Refused extends Error {}

  const follow = async (params, signal) => {
    params.set('follow', '1');
    params.set('limit', String(MAX_FLOWS));
    const answer = await fetch('api/flows?' + params, { signal, headers: { Accept: 'application/x-ndjson' } });
    if (!answer.ok) {
      const body = await answer.json().catch(() => ({}));
      const why = body.error || 'HTTP ' + answer.status;
      throw answer.status === 400 ? new Refused(why) : new Error(why);
    }
    say('Live: following flows as netplug-flows receives them', 'live');
    const reader = answer.body.getReader();
    const decoder = new TextDecoder();
    let pending = '';
    for (;;) {
      const { value, done } = await reader.read();
      // Aborted by a new filter: what was already read belongs to the old one.
      if (done || signal.aborted) return;
      pending += decoder.decode(value, { stream: true });
      const lines = pending.split('\n');
      pending = lines.pop();
      for (const line of lines) if (line.trim() !== '') flows.unshift(JSON.parse(line));
      if (flows.length > MAX_FLOWS) flows.length = MAX_FLOWS;
      redraw();
    }
  };

  const start = () => {
    if (following) following.abort();
    const stop = new AbortController();
    following = stop;
    flows = [];
    redraw();
    const params = query();
    const run = async () => {
      while (!stop.signal.aborted) {
        say('Connecting…');
        try {
          await follow(new URLSearchParams(params), stop.signal);
          if (stop.signal.aborted) return;
          say('The stream ended: connecting again…', 'error');
        } catch (err) {
          if (stop.signal.aborted) return;
          if (err instanceof Refused) return say(err.message, 'error');
          say('Cannot read flows: ' + err.message + '; trying again…', 'error');
        }
        // Held records come again with the next stream.
        flows = [];
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    };
    run();
  };

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    start();
  });
  form.addEventListener('reset', () => setTimeout(start, 0));
  form.elements.action.addEventListener('change', start);
  start();
})();
`;
