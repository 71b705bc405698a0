// SPDX-License-Identifier: MIT
// A manual check of issue 20, point 2 (not run by meson: it needs npm's speedscope and Chromium):
//
//   npm install --prefix DIR speedscope && cp PROFILE.json DIR/ && cp this file DIR/
//   (cd DIR && python3 -m http.server PORT --bind 127.0.0.1) &
//   SS_BASE=http://127.0.0.1:PORT timeout 300 node --experimental-websocket DIR/speedscope-shot.js \
//       PROFILE.json OUT.png DEADLINE_S
//
// Opens speedscope in headless Chromium (devtools protocol) on PROFILE, served over HTTP
// (speedscope refuses a profileURL from file:), in the sandwich view; waits, with a deadline,
// until the sandwich table shows rows, prints their text and saves a screenshot. While
// speedscope parses a big profile the page answers nothing, so the outer `timeout` is what
// stops a profile that does not load. A dialog (speedscope's load errors) is printed.
const { spawn } = require('child_process');
const path = require('path');
const fs = require('fs');
const [profile, out, deadline_s] = process.argv.slice(2);
const port = 9000 + Math.floor(Math.random() * 900);
const chrome = spawn('chromium', ['--headless', '--no-sandbox', '--disable-gpu',
  '--allow-file-access-from-files', '--window-size=1400,900', `--remote-debugging-port=${port}`,
  'about:blank'], { stdio: 'ignore' });
const t0 = Date.now();
const deadline = t0 + 1000 * Number(deadline_s || 120);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function targets() {
  for (;;) {
    try { return await (await fetch(`http://127.0.0.1:${port}/json/list`)).json(); }
    catch (e) { if (Date.now() > deadline) throw new Error('no devtools'); await sleep(100); }
  }
}
(async () => {
  let ws;
  try {
    const page = (await targets()).find((t) => t.type === 'page');
    ws = new WebSocket(page.webSocketDebuggerUrl);
    await new Promise((r) => ws.addEventListener('open', r));
    let id = 0; const pending = new Map();
    ws.addEventListener('message', (m) => { const d = JSON.parse(m.data); if (d.method === 'Page.javascriptDialogOpening') { console.log('DIALOG: ' + d.params.message); ws.send(JSON.stringify({ id: 99999, method: 'Page.handleJavaScriptDialog', params: { accept: true } })); } if (pending.has(d.id)) { pending.get(d.id)(d); pending.delete(d.id); } });
    const call = (method, params = {}) => new Promise((r) => { const i = ++id; pending.set(i, r); ws.send(JSON.stringify({ id: i, method, params })); });
    const base = process.env.SS_BASE; const url = `${base}/node_modules/speedscope/dist/release/index.html#profileURL=${encodeURIComponent(base + '/' + profile)}&view=sandwich`;
    await call('Page.enable'); await call('Page.navigate', { url });
    let text = '';
    const load0 = Date.now();
    for (;;) {
      const r = await call('Runtime.evaluate', { expression: 'document.body ? document.body.innerText : ""', returnByValue: true });
      text = (r.result && r.result.result && r.result.result.value) || '';
      if (/Self/.test(text) && /leaf/.test(text)) break;
      if (Date.now() > deadline) { console.log('TIMEOUT; page text: ' + text.slice(0, 500)); process.exitCode = 1; break; }
      await sleep(250);
    }
    console.log(`rendered after ${((Date.now() - load0) / 1000).toFixed(1)} s`);
    await sleep(500);
    const shot = await call('Page.captureScreenshot', { format: 'png' });
    fs.writeFileSync(out, Buffer.from(shot.result.data, 'base64'));
    console.log(text.slice(0, 1500));
  } catch (e) { console.log('error: ' + e); process.exitCode = 1; }
  finally { if (ws) ws.close(); chrome.kill(); }
})();
