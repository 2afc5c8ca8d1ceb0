// The viewer's one page: the filters, the graph of namespaces and pods, the table of flows. Its
// style and scripts come from the same origin (server.ts); nothing is loaded from elsewhere, not
// even a font: the page uses the browser's own.
export const PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>netplug flow viewer</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="viewer.css">
<script src="graph.js" defer></script>
<script src="viewer.js" defer></script>
</head>
<body>
<header>
  <h1>netplug flow viewer</h1>
  <p id="status" class="status" role="status">Connecting…</p>
</header>
<form id="filters" autocomplete="off">
  <label>Namespace <input name="namespace" placeholder="any" spellcheck="false"></label>
  <label>Pod <input name="pod" placeholder="[namespace/]name" spellcheck="false"></label>
  <label>Policy <input name="policy" placeholder="namespace/name or name" spellcheck="false"></label>
  <label>Verdict
    <select name="action">
      <option value="">any</option>
      <option value="Allow">allowed</option>
      <option value="Deny">denied</option>
    </select>
  </label>
  <button type="submit">Apply</button>
  <button type="reset">Clear</button>
</form>
<main>
  <section class="graph-panel" aria-labelledby="graph-title">
    <h2 id="graph-title">Namespaces and pods</h2>
    <p class="legend"><span class="key allow"></span> allowed <span class="key deny"></span> denied</p>
    <div class="graph-frame"><svg id="graph" role="img" aria-label="Flows between pods, grouped by namespace"></svg></div>
  </section>
  <section aria-labelledby="flows-title">
    <h2 id="flows-title">Flows <span id="flow-count" class="count"></span></h2>
    <table id="flows">
      <thead>
        <tr>
          <th>Time (UTC)</th><th>Verdict</th><th>Source</th><th>Destination</th><th>Protocol</th>
          <th>Policy</th><th>Rule</th><th>Seen at</th><th>Node</th><th class="num">Flows</th><th class="num">Packets</th><th class="num">Bytes</th>
        </tr>
      </thead>
      <tbody id="flow-rows"></tbody>
    </table>
    <p id="empty" class="empty">No flows match yet.</p>
  </section>
</main>
</body>
</html>
`;
