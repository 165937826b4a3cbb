// The dashboard page; see dashboard.h. Plain HTML, CSS and JavaScript in one string.
#include "app/gateway/dashboard.h"

namespace sluice::app::gateway {

std::string_view dashboard_html() {
  static constexpr std::string_view kPage = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sluice gateway</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d232b}
header{background:#1d232b;color:#fff;padding:10px 20px;display:flex;justify-content:space-between}
main{padding:16px 20px;display:grid;gap:16px}
.service{background:#fff;border:1px solid #d9dde3;border-radius:6px;padding:12px 16px}
h2{margin:0 0 6px;font-size:17px}.hosts{color:#667;font-size:12px}
.numbers{display:flex;gap:18px;margin:8px 0;flex-wrap:wrap}.numbers div b{display:block;font-size:18px}
table{border-collapse:collapse;margin:6px 0;min-width:420px}td,th{padding:3px 10px 3px 0;text-align:left}
th{font-weight:600;color:#556;font-size:12px}
.state{padding:1px 6px;border-radius:3px;font-size:12px}
.state-ready{background:#d7f5dc}.state-starting{background:#fff3c4}.state-frozen{background:#d6e8ff}
.state-draining{background:#f3dcdc}.phase-failed{color:#b00}
.service.failing{border:2px solid #c62828}
.failed{background:#c62828;color:#fff;padding:6px 10px;border-radius:4px;margin:6px 0;white-space:pre-wrap}
details.logs summary{cursor:pointer;color:#445;font-size:12px}
pre{background:#1d232b;color:#e6e6e6;padding:6px 8px;margin:4px 0;max-height:220px;overflow:auto;font-size:12px}
#requests{margin:0 20px 20px;background:#fff;border:1px solid #d9dde3;border-radius:6px;padding:12px 16px}
#requests td{font-size:12px;font-family:ui-monospace,monospace}.s4{color:#a15c00}.s5{color:#b00}
svg{background:#fafbfc;border:1px solid #e3e6ea}
#error{color:#b00}
</style></head>
<body><header><span>sluice gateway</span><span id="updated">connecting…</span></header>
<main id="services"></main>
<section id="requests"><h2>last requests</h2><table><thead><tr><th>time</th><th>method</th><th>path</th><th>status</th>
<th>took</th><th>service</th><th>revision</th><th>instance</th><th>cold start</th></tr></thead><tbody id="request-rows"></tbody></table></section>
<div id="error"></div>
<script>
"use strict";
const esc = s => String(s).replace(/[&<>"]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;","\"":"&quot;"})[c]);
function spark(history) {
  if (!history.length) return '<span class="none">no cold starts yet</span>';
  const w = 360, h = 60, max = Math.max(...history.map(c => c.ms), 1);
  const t0 = history[0].at, span = Math.max(history[history.length - 1].at - t0, 1);
  const bars = history.map(c => {
    const x = history.length === 1 ? w / 2 : 4 + (c.at - t0) / span * (w - 8), y = h - 4 - (c.ms / max) * (h - 12);
    return `<line x1="${x}" x2="${x}" y1="${h - 4}" y2="${y}" stroke="#3b7ddd" stroke-width="3"><title>${esc(new Date(c.at).toLocaleTimeString())}: ${c.ms} ms</title></line>`;
  }).join("");
  return `<svg class="coldstarts" width="${w}" height="${h}" data-count="${history.length}">${bars}` +
         `<text x="4" y="12" font-size="10" fill="#667">max ${max} ms</text></svg>`;
}
function output(logs, id) {
  const l = logs[id];
  if (!l || !l.lines.length) return "";
  return `<details class="logs" data-logs="${esc(id)}"><summary>${esc(id)}: last ${l.lines.length === 1 ? "output line" : l.lines.length + " output lines"}${l.ended ? " (ended)" : ""}</summary>` +
    `<pre>${esc(l.lines.join("\n"))}</pre></details>`;
}
function render(status, logs, requests) {
  const open = new Set([...document.querySelectorAll("details.logs[open]")].map(d => d.dataset.logs));
  const out = status.services.map(s => {
    const lat = s.latency_ms || {};
    const revisions = s.revisions.map(r => `<tr class="revision phase-${esc(r.phase)}" data-revision="${esc(r.name)}">` +
      `<td>${esc(r.name)}</td><td>${esc(r.phase)}</td><td class="traffic">${r.traffic_percent}%</td>` +
      `<td>${esc((r.tags || []).join(", "))}</td><td>${esc(r.reason || "")}</td></tr>`).join("");
    const instances = s.instances.map(i => `<tr class="instance" data-instance="${esc(i.id)}" data-state="${esc(i.state)}">` +
      `<td>${esc(i.id)}</td><td>${esc(i.revision)}</td><td><span class="state state-${esc(i.state)}">${esc(i.state)}</span></td>` +
      `<td>${i.in_flight}</td><td>${i.requests}</td></tr>` +
      `<tr><td colspan="5">${output(logs, i.id)}</td></tr>`).join("");
    // Instances that ended lately (a failed start, a crash, a scale-down): their last words.
    const ended = Object.keys(logs).filter(id => logs[id].service === s.name && logs[id].ended)
      .map(id => output(logs, id)).join("");
    const cold = s.cold_start_history || [];
    return `<section class="service${s.failed ? " failing" : ""}" data-service="${esc(s.name)}"><h2>${esc(s.name)}</h2>` +
      `<div class="hosts">${esc(s.hosts.join(", "))}${s.default ? " (default)" : ""}</div>` +
      (s.failed ? `<div class="failed">failed: ${esc(s.failed)}</div>` : "") +
      `<div class="numbers"><div>in flight<b class="in-flight">${s.in_flight}</b></div>` +
      `<div>queued<b class="queued">${s.queued}</b></div><div>rps<b>${s.rps}</b></div>` +
      `<div>requests<b class="requests">${s.requests_total}</b></div>` +
      `<div>cold starts<b class="cold-starts">${s.cold_starts}</b></div>` +
      `<div>p50<b class="p50">${lat.p50 ?? "–"} ms</b></div><div>p90<b class="p90">${lat.p90 ?? "–"} ms</b></div>` +
      `<div>p99<b class="p99">${lat.p99 ?? "–"} ms</b></div></div>` +
      `<table><tr><th>revision</th><th>phase</th><th>traffic</th><th>tags</th><th>why</th></tr>${revisions}</table>` +
      `<table><tr><th>instance</th><th>revision</th><th>state</th><th>in flight</th><th>requests</th></tr>${instances}</table>` +
      ended +
      `<div>cold starts over time (duration):</div>${spark(cold)}</section>`;
  }).join("");
  document.getElementById("services").innerHTML = out;
  for (const d of document.querySelectorAll("details.logs")) if (open.has(d.dataset.logs)) d.open = true;
  document.getElementById("request-rows").innerHTML = requests.map(r =>
    `<tr class="request" data-status="${r.status}"><td>${esc(new Date(r.at).toLocaleTimeString())}</td><td>${esc(r.method)}</td>` +
    `<td>${esc(r.path)}</td><td class="s${String(r.status)[0]}">${r.status}</td><td>${r.duration_ms} ms</td>` +
    `<td>${esc(r.service)}</td><td>${esc(r.revision)}</td><td>${esc(r.instance)}</td><td>${r.cold_start ? "cold start" : ""}</td></tr>`).join("");
  document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
}
async function poll() {
  try {
    const get = async path => (await fetch(path, {cache: "no-store"})).json();
    const [status, logs, requests] = await Promise.all([get("/.sluice/status"), get("/.sluice/logs"), get("/.sluice/requests")]);
    render(status, logs, requests);
    document.getElementById("error").textContent = "";
  } catch (e) {
    document.getElementById("error").textContent = "gateway unreachable: " + e;
  }
  setTimeout(poll, 1000);
}
poll();
</script></body></html>
)HTML";
  return kPage;
}

}  // namespace sluice::app::gateway
