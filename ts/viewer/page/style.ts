// The viewer page's style (served as /viewer.css): the system's fonts, no image but CSS.
export const PAGE_STYLE = `:root {
  --allow: #1a7f37;
  --deny: #cf222e;
  --deny-bg: #ffebe9;
  --line: #d0d7de;
  --muted: #57606a;
  --ink: #1f2328;
  font-family: system-ui, -apple-system, "Segoe UI", sans-serif;
  font-size: 14px;
  color: var(--ink);
  background: #f6f8fa;
}
body { margin: 0; }
header { display: flex; align-items: baseline; gap: 1.5em; padding: 0.8em 1.5em; background: #24292f; color: #fff; }
h1 { font-size: 1.3em; margin: 0; font-weight: 600; }
h2 { font-size: 1.05em; margin: 0 0 0.5em; }
.status { margin: 0; color: #d0d7de; }
.status.live::before { content: ""; display: inline-block; width: 0.6em; height: 0.6em; margin-right: 0.4em; border-radius: 50%; background: #2da44e; }
.status.error { color: #ffaba8; }
form { display: flex; flex-wrap: wrap; gap: 0.8em; align-items: end; padding: 0.8em 1.5em; background: #fff; border-bottom: 1px solid var(--line); }
label { display: flex; flex-direction: column; gap: 0.2em; font-size: 0.85em; color: var(--muted); }
input, select, button { font: inherit; font-size: 1rem; padding: 0.3em 0.5em; border: 1px solid var(--line); border-radius: 6px; background: #fff; color: var(--ink); }
input { width: 13em; }
button { cursor: pointer; background: #f6f8fa; }
button[type="submit"] { background: #1f883d; border-color: #1a7f37; color: #fff; }
main { padding: 1em 1.5em; display: grid; gap: 1em; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 0.8em 1em; overflow-x: auto; }
.legend { margin: 0 0 0.5em; color: var(--muted); font-size: 0.9em; }
.key { display: inline-block; width: 1.6em; height: 0; border-top: 3px solid var(--allow); vertical-align: middle; margin-left: 0.6em; }
.key.deny { border-top: 3px dashed var(--deny); }
.graph-frame { overflow-x: auto; }
#graph { display: block; min-height: 80px; }
#graph .namespace rect { fill: #f6f8fa; stroke: var(--line); }
#graph .namespace text.title { font-weight: 600; fill: var(--muted); font-size: 12px; }
#graph .endpoint circle { fill: #0969da; }
#graph .endpoint.outside circle { fill: #8c959f; }
/* A halo of the background behind names, so that an edge passing under one leaves it readable. */
#graph .endpoint text, #graph .edge-label { paint-order: stroke; stroke: #f6f8fa; stroke-width: 4px; stroke-linejoin: round; }
#graph .endpoint text { font-size: 12px; fill: var(--ink); }
#graph .edge { fill: none; stroke-width: 2; }
#graph .edge.allow { stroke: var(--allow); }
#graph .edge.deny { stroke: var(--deny); stroke-dasharray: 6 4; }
#graph .edge-label { font-size: 11px; fill: var(--deny); }
#graph marker.allow path { fill: var(--allow); }
#graph marker.deny path { fill: var(--deny); }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 0.35em 0.6em; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { font-size: 0.85em; color: var(--muted); font-weight: 600; }
.num { text-align: right; }
tr.denied td { background: var(--deny-bg); }
tr.denied td:first-child { box-shadow: inset 3px 0 0 var(--deny); }
.verdict { display: inline-block; padding: 0.05em 0.55em; border-radius: 1em; font-size: 0.85em; font-weight: 600; color: #fff; }
.verdict.allow { background: var(--allow); }
.verdict.deny { background: var(--deny); }
.policy .tier { color: var(--muted); }
tr.denied .policy { color: var(--deny); font-weight: 600; }
.end .ns { color: var(--muted); }
.count, .empty { color: var(--muted); font-weight: normal; }
.empty[hidden] { display: none; }
`;
