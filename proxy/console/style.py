"""The console's style sheet, inlined into every page: no external asset, no build step,
and a Content-Security-Policy that allows nothing but inline style and same-origin forms."""

CSS = """
:root { --fg: #1d232b; --muted: #5f6b7a; --line: #d9dee5; --bg: #f6f7f9; --accent: #1f5fa8;
        --ok: #1e7b3a; --bad: #b42318; --warn: #9a6700; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
       color: var(--fg); background: var(--bg); }
header { background: #fff; border-bottom: 1px solid var(--line); padding: 10px 24px;
         display: flex; gap: 20px; align-items: center; }
header .brand { font-weight: 600; }
header nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
header nav a.here { font-weight: 600; text-decoration: underline; }
header .who { margin-left: auto; color: var(--muted); display: flex; gap: 8px; align-items: center; }
main { padding: 16px 24px 40px; max-width: 1400px; }
h1 { font-size: 20px; margin: 4px 0 12px; }
h2 { font-size: 16px; margin: 22px 0 8px; }
table { border-collapse: collapse; background: #fff; border: 1px solid var(--line); width: 100%; }
th, td { text-align: left; padding: 5px 9px; border-bottom: 1px solid var(--line);
         vertical-align: top; }
th { background: #eef1f5; font-weight: 600; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
pre, code { font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
pre { background: #fff; border: 1px solid var(--line); padding: 10px; overflow-x: auto;
      white-space: pre-wrap; }
.badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px;
         border: 1px solid currentColor; white-space: nowrap; }
.ok { color: var(--ok); } .bad { color: var(--bad); } .warn { color: var(--warn); }
.muted { color: var(--muted); }
.note { background: #fff; border: 1px solid var(--line); border-left: 4px solid var(--accent);
        padding: 8px 12px; margin: 10px 0; }
.note.error { border-left-color: var(--bad); }
form.inline { display: inline; margin: 0 6px 6px 0; }
button { font: inherit; padding: 4px 12px; border: 1px solid var(--accent); border-radius: 4px;
         background: #fff; color: var(--accent); cursor: pointer; }
button.danger { border-color: var(--bad); color: var(--bad); }
button.primary { background: var(--accent); color: #fff; }
input, select { font: inherit; padding: 3px 6px; border: 1px solid var(--line); border-radius: 4px; }
.filters { display: flex; gap: 10px; align-items: end; margin-bottom: 12px; flex-wrap: wrap; }
.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
.login { max-width: 340px; margin: 60px auto; background: #fff; border: 1px solid var(--line);
         padding: 20px 24px; }
.login label { display: block; margin: 8px 0; }
.login input { width: 100%; }
.chart { background: #fff; border: 1px solid var(--line); }
.chart text { font: 11px system-ui, sans-serif; fill: var(--muted); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 16px; margin: 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; }
"""
