// Headless Chromium against the S3 gateway: a page served from another
// origin uploads a file with a presigned POST (boto3's
// generate_presigned_post, SigV4) by fetch() and by a plain HTML form,
// and reads an object with fetch() and a custom header, which needs a
// CORS preflight: allowed from the bucket's configured origin, refused
// from another origin and for a header the rules do not name. Every
// upload is then read back through S3 by boto3. Run by run.sh.
import http from 'node:http';
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const python = process.env.QUILT_PYTHON || 'python3';
const py = (...args) => execFileSync(python, [join(here, 's3prep.py'), ...args], { encoding: 'utf8' });

const deadline = setTimeout(() => { console.error('browser test: timed out after 60 s'); process.exit(1); }, 60_000);

let presigned = null;
const done = [];
const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');

// A static page server on 127.0.0.1, port 0: another origin than the gateway.
function serve() {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    res.setHeader('Content-Type', 'text/html; charset=utf-8');
    if (url.pathname === '/done') {
      done.push(Object.fromEntries(url.searchParams));
      res.end('<!doctype html><title>done</title><p>uploaded</p>');
    } else if (url.pathname === '/form' && presigned) {
      const f = presigned.form;
      const hidden = Object.entries(f.fields).map(([k, v]) => `<input type="hidden" name="${esc(k)}" value="${esc(v)}">`).join('\n');
      res.end(`<!doctype html><title>form</title>
<form action="${esc(f.url)}" method="post" enctype="multipart/form-data">
${hidden}
<input type="file" name="file">
<button type="submit">Upload</button>
</form>`);
    } else {
      res.end('<!doctype html><title>page</title><p>test page</p>');
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () =>
    resolve({ server, origin: `http://127.0.0.1:${server.address().port}` })));
}

function check(cond, what) {
  if (!cond) throw new Error(what);
  console.log('ok:', what.split(':')[0]);
}

const allowed = await serve();
const other = await serve();
let browser;
try {
  presigned = JSON.parse(py('prep', allowed.origin));
  browser = await chromium.launch({
    executablePath: process.env.QUILT_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage();

  // 1. fetch() with FormData: the fields, then the file, last.
  await page.goto(allowed.origin + '/');
  const up = await page.evaluate(async (post) => {
    const fd = new FormData();
    for (const [k, v] of Object.entries(post.fields)) fd.append(k, v);
    fd.append('file', new Blob(['uploaded by chromium'], { type: 'text/plain' }), 'note.txt');
    const r = await fetch(post.url, { method: 'POST', body: fd });
    return { status: r.status, text: await r.text(), etag: r.headers.get('ETag') };
  }, presigned.post);
  check(up.status === 201 && up.text.includes('<Key>uploads/note.txt</Key>') && up.etag,
    `presigned POST by fetch: ${JSON.stringify(up)}`);
  process.stdout.write(py('check', 'uploads/note.txt', 'uploaded by chromium'));

  // 2. A plain HTML form, redirected back to the page's origin.
  await page.goto(allowed.origin + '/form');
  await page.setInputFiles('input[type=file]', { name: 'form.txt', mimeType: 'text/plain', buffer: Buffer.from('sent by a form') });
  await Promise.all([page.waitForURL(/\/done\?/, { timeout: 15_000 }), page.click('button[type=submit]')]);
  check(done.length === 1 && done[0].key === 'forms/form.txt' && done[0].bucket === 'browser',
    `HTML form with success_action_redirect: ${JSON.stringify(done)}`);
  process.stdout.write(py('check', 'forms/form.txt', 'sent by a form'));

  // 3. CORS: a custom header makes the browser send a preflight.
  const get = (url, header) => page.evaluate(async ([url, header]) => {
    try {
      const r = await fetch(url, { headers: { [header]: '1' } });
      return { status: r.status, text: await r.text() };
    } catch (e) {
      return { refused: String(e) };
    }
  }, [url, header]);
  let r = await get(presigned.get, 'x-custom-header');
  check(r.status === 200 && r.text === 'hello, browser', `allowed origin and header: ${JSON.stringify(r)}`);
  r = await get(presigned.get, 'x-not-allowed');
  check(r.refused, `header the rules do not allow: ${JSON.stringify(r)}`);
  await page.goto(other.origin + '/');
  r = await get(presigned.get, 'x-custom-header');
  check(r.refused, `another origin: ${JSON.stringify(r)}`);
  console.log('browser test passed');
} catch (e) {
  console.error('browser test failed:', e.message || e);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close();
  allowed.server.close();
  other.server.close();
  clearTimeout(deadline);
}
