// A table description as `nft -f` text, for people (netplugctl, logs, docs) and tests: loading
// it with `nft -f` gives the table the writer writes from the same description.
import type {
  Atom,
  Chain,
  DataType,
  Element,
  Match,
  MapVerdict,
  NftMap,
  NftSet,
  Rule,
  Selector,
  Statement,
  Table,
  Verdict,
} from './model.ts';

export function renderTable(table: Table): string {
  const lines = [`table ${table.family} ${table.name} {`];
  const blocks: string[][] = [
    ...(table.counters ?? []).map((name) => [`counter ${name} {`, '}']),
    ...(table.sets ?? []).map(renderSet),
    ...(table.maps ?? []).map(renderMap),
    ...(table.chains ?? []).map(renderChain),
  ];
  blocks.forEach((block, i) => {
    if (i > 0) lines.push('');
    lines.push(...block.map((line) => `\t${line}`));
  });
  lines.push('}', '');
  return lines.join('\n');
}

function renderSet(set: NftSet): string[] {
  const types = typeList(set.type);
  const lines = [`set ${set.name} {`, `\ttype ${types.join(' . ')}`];
  if (set.flags?.includes('interval')) lines.push('\tflags interval');
  const elements = set.elements ?? [];
  if (elements.length > 0) lines.push(`\telements = { ${elements.map((e) => renderElement(types, e)).join(', ')} }`);
  lines.push('}');
  return lines;
}

function renderMap(map: NftMap): string[] {
  const types = typeList(map.type);
  const lines = [`map ${map.name} {`, `\ttype ${types.join(' . ')} : verdict`];
  const elements = map.elements ?? [];
  if (elements.length > 0)
    lines.push(`\telements = { ${elements.map((e) => `${renderElement(types, e.key)} : ${renderVerdict(e.verdict)}`).join(', ')} }`);
  lines.push('}');
  return lines;
}

function renderChain(chain: Chain): string[] {
  const lines = [`chain ${chain.name} {`];
  const base = chain.base;
  if (base) lines.push(`\ttype ${base.type} hook ${base.hook} priority ${base.priority}; policy ${base.policy ?? 'accept'};`);
  for (const rule of chain.rules ?? []) lines.push(`\t${renderRule(rule)}`);
  lines.push('}');
  return lines;
}

/** One rule as nft writes it: `ip saddr 10.0.0.0/8 th dport { 80, 443 } counter accept comment "..."`. */
export function renderRule(rule: Rule): string {
  const parts = [
    ...(rule.matches ?? []).map(renderMatch),
    ...(rule.statements ?? []).map(renderStatement),
    ...(rule.verdict !== undefined ? [renderVerdict(rule.verdict)] : []),
    ...(rule.comment !== undefined ? [`comment "${rule.comment}"`] : []),
  ];
  return parts.join(' ');
}

function renderMatch(m: Match): string {
  const keys = Array.isArray(m.key) ? m.key : [m.key];
  const left = keys.join(' . ');
  const op = m.op === '!=' ? '!= ' : '';
  const value = m.value;
  if (typeof value === 'object' && !Array.isArray(value)) return `${left} ${op}@${value.set}`;
  const key = keys[0] as Selector;
  if (key === 'ct state') return `${left} ${op}${(Array.isArray(value) ? value : [value]).join(',')}`;
  const atom = (a: Atom) => renderAtom(key, a);
  const right = Array.isArray(value) ? `{ ${value.map(atom).join(', ')} }` : atom(value);
  if (m.mask !== undefined) return `${left} & ${hex(m.mask)} ${m.op ?? '=='} ${right}`;
  return `${left} ${op}${right}`;
}

/** A value as nft reads it for `key`: interface names quoted, marks in hex, the rest as given. */
function renderAtom(key: Selector | DataType, atom: Atom): string {
  if (key === 'iifname' || key === 'oifname' || key === 'ifname') return `"${atom}"`;
  if (key === 'meta mark' || key === 'mark') return hex(atom);
  return String(atom);
}

function hex(atom: Atom): string {
  return typeof atom === 'number' ? `0x${atom.toString(16)}` : atom;
}

function renderElement(types: DataType[], element: Element): string {
  const atoms = Array.isArray(element) ? element : [element];
  return atoms.map((atom, i) => renderAtom(types[i] as DataType, atom)).join(' . ');
}

function typeList(type: DataType | DataType[]): DataType[] {
  return Array.isArray(type) ? type : [type];
}

function renderStatement(statement: Statement): string {
  if ('counter' in statement) return statement.counter.name === undefined ? 'counter' : `counter name "${statement.counter.name}"`;
  if ('limit' in statement) {
    const { rate, per, burst } = statement.limit;
    return `limit rate ${rate}/${per} burst ${burst ?? 5} packets`;
  }
  if ('log' in statement) {
    const { prefix, group, level } = statement.log;
    return [
      'log',
      ...(prefix !== undefined ? [`prefix "${prefix}"`] : []),
      ...(group !== undefined ? [`group ${group}`] : []),
      ...(level ? [`level ${level}`] : []),
    ].join(' ');
  }
  if ('mark' in statement) {
    const change = statement.mark;
    if ('or' in change) return `meta mark set meta mark | ${hex(change.or)}`;
    return `meta mark set meta mark & ${hex(~change.clear >>> 0)}`;
  }
  if ('ctMark' in statement) {
    const { clear, or } = statement.ctMark;
    return `ct mark set ct mark & ${hex(~clear >>> 0)} | ${hex(or)}`;
  }
  if ('masquerade' in statement) return statement.masquerade.fullyRandom ? 'masquerade fully-random' : 'masquerade';
  if ('dnat' in statement) return `dnat ${statement.dnat.to.includes(':') ? 'ip6' : 'ip'} to ${statement.dnat.to}`;
  if ('snat' in statement) return `snat ${statement.snat.to.includes(':') ? 'ip6' : 'ip'} to ${statement.snat.to}`;
  if ('notrack' in statement) return 'notrack';
  return 'reject';
}

function renderVerdict(verdict: Verdict | MapVerdict): string {
  if (typeof verdict === 'string') return verdict;
  if ('jump' in verdict) return `jump ${verdict.jump}`;
  if ('goto' in verdict) return `goto ${verdict.goto}`;
  return `${verdict.vmap.key} vmap @${verdict.vmap.map}`;
}
