// Headless Chromium against the web app of `quilt up` (run by run.sh):
// a failed login, then a login; a folder uploaded by a drop event whose
// DataTransfer carries the folder's File objects, with the progress
// watched to 100%; the files listed; one downloaded and compared byte
// for byte; a rename; a delete to the trash and a restore; a 20 MiB
// upload broken off by a page reload and resumed from the chunk the
// server has; share links made in the share dialog and opened in a
// second, logged-out browser context (a read-only link's download
// compared byte for byte, its QR code loaded, the link revoked on the
// Shares page and then refused with the 404 page; a password link
// refusing a wrong password and downloading after the right one; an
// upload-only link taking a file that then shows in the owner's folder);
// the Shares page's rows; another user (bob, an account made by `quilt
// user add`) changing the URL to reach the first user's files; shares
// with bob and with his group (read-only and read-write) made in the
// share dialog, browsed, downloaded from and uploaded into on bob's
// Shared with me page, one removed on the Shares page; the
// admin's grid and storage pages; the app at a phone's viewport
// (390x844); a flow by the keyboard only; and the admin's Users page
// (carol added by keyboard, her key shown once, her login, her password
// changed, her account removed).
//
// The drop: Playwright cannot start an operating system drag, and a
// DataTransfer made by a script gives no FileSystemEntry
// (webkitGetAsEntry() is null). So the script picks the folder with
// setInputFiles on a <input webkitdirectory> of its own, which gives the
// browser's File objects with their webkitRelativePath, puts them in a
// new DataTransfer, and dispatches dragenter, dragover and drop on the
// app's drop zone: the app's drop handler runs as for a real drop, and
// takes the folder's paths from webkitRelativePath.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const base = process.env.QUILT_WEB_URL.replace(/\/$/, '');
const user = process.env.QUILT_USER;
const password = process.env.QUILT_PASSWORD;
const bobPassword = process.env.QUILT_BOB_PASSWORD;
const work = process.env.QUILT_WORK;

const deadline = setTimeout(() => { console.error('browser test: timed out after 200 s'); process.exit(1); }, 200_000);

function check(cond, what) {
  if (!cond) throw new Error(what);
  console.log('ok:', what.length > 160 ? what.slice(0, 157) + '...' : what);
}

// The folder to upload: a text file, a binary of several chunks' worth of
// progress events, and a file in a subfolder.
const dir = join(work, 'album');
mkdirSync(join(dir, 'sub'), { recursive: true });
const files = {
  'album/notes.txt': Buffer.from('notes from the browser <b>bold</b>\n'),
  'album/photo.bin': randomBytes(3 * 1024 * 1024 + 17),
  'album/sub/deep.txt': Buffer.from('deep\n'),
};
for (const [p, d] of Object.entries(files)) writeFileSync(join(work, p), d);

async function login(page, name, pw) {
  await page.goto(base + '/login');
  await page.fill('#user', name);
  await page.fill('#password', pw);
  await Promise.all([page.waitForNavigation(), page.click('form.login button[type=submit]')]);
}

let browser;
try {
  browser = await chromium.launch({
    executablePath: process.env.QUILT_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  const ctx = await browser.newContext({ acceptDownloads: true });
  const page = await ctx.newPage();
  page.setDefaultTimeout(60_000);

  // 1. Not logged in: the login form. A wrong password: a clear error.
  let r = await page.goto(base + '/files/' + user + '/');
  check(page.url().startsWith(base + '/login?next='), `not logged in: sent to the login form: ${page.url()}`);
  await page.fill('#user', user);
  await page.fill('#password', 'not the password');
  await Promise.all([page.waitForNavigation(), page.click('form.login button[type=submit]')]);
  const err = await page.textContent('#login-error');
  check(err.includes('Wrong user name or password.'), `failed login shows an error: ${err}`);

  // 2. Log in: back to where we were going.
  await page.fill('#password', password);
  await Promise.all([page.waitForNavigation(), page.click('form.login button[type=submit]')]);
  check(page.url() === base + '/files/' + user + '/', `login: at the drive: ${page.url()}`);

  // 3. A folder dropped: the drop event carries the folder's files.
  await page.evaluate(() => {
    const i = document.createElement('input');
    i.type = 'file';
    i.id = 'test-folder';
    i.webkitdirectory = true;
    i.multiple = true;
    i.style.display = 'none';
    document.body.append(i);
  });
  await page.setInputFiles('#test-folder', dir);
  const seen = [];
  await page.exposeFunction('quiltProgress', (v) => seen.push(v));
  const n = await page.evaluate(() => {
    const files = document.getElementById('test-folder').files;
    const dt = new DataTransfer();
    for (const f of files) dt.items.add(f);
    new MutationObserver(() => window.quiltProgress(document.getElementById('total-progress').value))
      .observe(document.getElementById('total-text'), { childList: true, characterData: true, subtree: true });
    const zone = document.getElementById('dropzone');
    for (const type of ['dragenter', 'dragover', 'drop']) {
      zone.dispatchEvent(new DragEvent(type, { bubbles: true, cancelable: true, dataTransfer: dt }));
    }
    return files.length;
  });
  check(n === 3, `the drop carries the folder's 3 files: ${n}`);
  await page.waitForFunction(() => document.getElementById('total-progress').value === 100, null, { timeout: 120_000 });
  const total = await page.textContent('#total-text');
  check(total.includes('3 of 3 files') && total.includes('(100%)') && !total.includes('failed'), `upload progress reaches 100%: ${total}`);
  const fileBars = await page.$$eval('#file-progress progress', (ps) => ps.map((p) => p.value));
  check(fileBars.length === 3 && fileBars.every((v) => v === 100), `every file's progress at 100%: ${fileBars}`);
  check(seen.some((v) => v > 0 && v < 100), `progress seen between 0 and 100%: ${[...new Set(seen)].join(',')}`);

  // 4. The files listed (the listing refreshed in place, then the folder).
  await page.waitForSelector(`#listing a[href="/files/${user}/album/"]`);
  await page.click(`#listing a[href="/files/${user}/album/"]`);
  await page.waitForURL(base + `/files/${user}/album/`);
  const names = await page.$$eval('#listing td.name a', (as) => as.map((a) => a.textContent));
  check(JSON.stringify(names) === JSON.stringify(['sub/', 'notes.txt', 'photo.bin']), `the folder lists its files: ${names}`);

  // 5. Download one and compare bytes.
  await page.click('#listing a:text("photo.bin")');
  await page.waitForURL(base + `/files/${user}/album/photo.bin`);
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
  const got = readFileSync(await dl.path());
  check(got.equals(files['album/photo.bin']), `download is byte for byte the upload: ${got.length} bytes`);
  await page.goto(base + `/files/${user}/album/notes.txt`);
  const pre = await page.textContent('#text-preview');
  check(pre === files['album/notes.txt'].toString() && (await page.$('#text-preview b')) === null, `text preview, escaped: ${pre}`);

  // 6. Rename.
  await page.goto(base + `/files/${user}/album/`);
  await page.click('a.act:has-text("Rename notes.txt")');
  await page.fill('#to', '/album/renamed.txt');
  await Promise.all([page.waitForNavigation(), page.click('form.stack button[type=submit]')]);
  let listed = await page.$$eval('#listing td.name a', (as) => as.map((a) => a.textContent));
  check(listed.includes('renamed.txt') && !listed.includes('notes.txt'), `rename: ${listed}`);

  // 7. Delete to the trash, then restore.
  await Promise.all([page.waitForNavigation(), page.click('button.danger:has-text("Delete renamed.txt")')]);
  listed = await page.$$eval('#listing td.name a', (as) => as.map((a) => a.textContent));
  check(!listed.includes('renamed.txt'), `delete: gone from the folder: ${listed}`);
  await page.goto(base + '/trash');
  const trashRow = await page.textContent('#trash tbody');
  check(trashRow.includes('renamed.txt') && trashRow.includes('/album/renamed.txt'), `delete: in the trash with where it was`);
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Restore renamed.txt")')]);
  check(page.url() === base + `/files/${user}/album/`, `restore: back in its folder: ${page.url()}`);
  listed = await page.$$eval('#listing td.name a', (as) => as.map((a) => a.textContent));
  check(listed.includes('renamed.txt'), `restore: listed again: ${listed}`);
  const back = await page.evaluate(async (u) => (await fetch(u)).text(), base + `/download/${user}/album/renamed.txt`);
  check(back === files['album/notes.txt'].toString(), `restore: the same bytes`);

  // 7b. A large upload broken off by a page reload resumes where the
  // server is: the first 8 MiB chunk arrives, the second is cut (the
  // requests aborted, the page's retries too) and the page reloaded; picking the same file again
  // goes on from 8 MiB (the upload's ID kept in localStorage).
  const bigPath = join(work, 'big.bin');
  const big = randomBytes(20 * 1024 * 1024 + 5);
  writeFileSync(bigPath, big);
  await page.goto(base + `/files/${user}/album/`);
  let cut = null;
  await page.route('**/api/uploads/*?offset=*', (route) => {
    const off = Number(new URL(route.request().url()).searchParams.get('offset'));
    if (off > 0) {
      cut = cut || off;
      route.abort();
      return;
    }
    route.continue();
  });
  await page.setInputFiles('#pick-files', bigPath);
  await page.waitForFunction(() => Object.keys(localStorage).some((k) => k.startsWith('quilt-upload:')));
  for (let i = 0; i < 600 && !cut; i++) await new Promise((res) => setTimeout(res, 100));
  check(cut === 8 * 1024 * 1024, `large upload cut at the second chunk: offset ${cut}`);
  await page.reload();
  await page.unroute('**/api/uploads/*?offset=*');
  await page.setInputFiles('#pick-files', bigPath);
  await page.waitForFunction(() => document.getElementById('total-progress').value === 100, null, { timeout: 120_000 });
  const resumed = await page.getAttribute('#file-progress li', 'data-resumed');
  check(resumed === String(8 * 1024 * 1024), `after the reload the upload resumed at 8 MiB: ${resumed}`);
  check(await page.evaluate(() => !Object.keys(localStorage).some((k) => k.startsWith('quilt-upload:'))), `the finished upload's ID left localStorage`);
  const bigBack = await page.evaluate(async (u) => {
    const b = new Uint8Array(await (await fetch(u)).arrayBuffer());
    const d = await crypto.subtle.digest('SHA-256', b);
    return [b.length, Array.from(new Uint8Array(d)).map((x) => x.toString(16).padStart(2, '0')).join('')];
  }, base + `/download/${user}/album/big.bin`);
  const { createHash } = await import('node:crypto');
  check(bigBack[0] === big.length && bigBack[1] === createHash('sha256').update(big).digest('hex'), `the resumed upload is byte for byte the file: ${bigBack[0]} bytes`);

  // 7c. Share links, made in the UI and opened logged out in a second
  // browser context (its own cookies: no session).
  const anon = await browser.newContext({ acceptDownloads: true });
  const ap = await anon.newPage();
  ap.setDefaultTimeout(60_000);
  // makeLink opens the share dialog of the page's button sel, fills it and
  // returns the link shown, after its QR code image has loaded.
  async function makeLink(sel, mode, linkPassword, expires) {
    await page.click(sel);
    await page.waitForSelector('#share-dialog[open]');
    await page.check(`#share-form input[name=mode][value=${mode}]`);
    if (linkPassword) await page.fill('#share-password', linkPassword);
    if (expires) await page.fill('#share-expires', expires);
    const [qr] = await Promise.all([
      page.waitForResponse((res) => /\/api\/shares\/[A-Za-z0-9_-]+\/qr\.svg$/.test(res.url())),
      page.click('#share-create'),
    ]);
    await page.waitForSelector('#share-result', { state: 'visible' });
    const link = await page.inputValue('#share-url');
    check(new RegExp('^' + base + '/s/[A-Za-z0-9_-]{24}$').test(link), `share dialog shows the ${mode} link: ${link}`);
    check(qr.status() === 200 && qr.headers()['content-type'].startsWith('image/svg+xml') && qr.url().includes(link.split('/s/')[1]),
      `the link's QR code is served: ${qr.status()} ${qr.headers()['content-type']}`);
    await page.waitForFunction(() => { const i = document.getElementById('share-qr'); return i.complete && i.naturalWidth > 0; });
    const qrSize = await page.$eval('#share-qr', (i) => [i.naturalWidth, i.getBoundingClientRect().width]);
    check(qrSize[0] > 0 && qrSize[1] >= 100, `the QR code image loads and shows: ${qrSize}`);
    await page.click('#share-close');
    return link;
  }

  // An upload-only link to a file is refused in the dialog, with the
  // reason, and no link is shown.
  await page.goto(base + `/files/${user}/album/photo.bin`);
  await page.click('button.share-open');
  await page.check('#share-form input[name=mode][value=upload]');
  await page.click('#share-create');
  await page.waitForSelector('#share-error', { state: 'visible' });
  const shareErr = await page.textContent('#share-error');
  check(shareErr.includes('an upload link needs a folder') && !(await page.isVisible('#share-result')), `share dialog: an upload link to a file refused: ${shareErr}`);
  await page.click('#share-close');

  // A read-only link to a file: its page, and the download byte for byte.
  const readLink = await makeLink('button.share-open', 'read');
  r = await ap.goto(readLink);
  check(r.status() === 200 && (await ap.textContent('h1')) === 'photo.bin', `logged out, the link opens the file's page: ${r.status()}`);
  const [sdl] = await Promise.all([ap.waitForEvent('download'), ap.click('a.button:has-text("Download")')]);
  const shared = readFileSync(await sdl.path());
  check(sdl.suggestedFilename() === 'photo.bin' && shared.equals(files['album/photo.bin']), `logged out, the link downloads the file byte for byte: ${shared.length} bytes`);
  r = await ap.goto(base + `/files/${user}/album/`);
  check(ap.url().startsWith(base + '/login?next='), `the link gives no way into the drive: ${ap.url()}`);

  // The Shares page lists it; Revoke; the link is refused.
  await page.goto(base + '/shares');
  await page.waitForSelector('#shares', { state: 'visible' });
  let row = await page.textContent('#shares tbody');
  check(row.includes('/album/photo.bin') && row.includes(readLink) && row.includes('read-only'), `the Shares page lists the link`);
  await page.click('button[aria-label="Revoke the link to /album/photo.bin"]');
  await page.waitForFunction(() => document.getElementById('shares-status').textContent.includes('Revoked the link to /album/photo.bin'));
  await page.reload();
  await page.waitForFunction(() => !document.getElementById('shares-status').textContent.includes('Loading'));
  check(!(await page.textContent('main')).includes(readLink), `revoked: gone from the Shares page`);
  r = await ap.goto(readLink);
  let anonBody = await ap.textContent('body');
  check(r.status() === 404 && anonBody.includes('This link does not work'), `revoked: the link is refused logged out: ${r.status()}`);
  r = await ap.request.get(readLink + '/download');
  check(r.status() === 404 && !(await r.body()).includes(files['album/photo.bin'].subarray(0, 64)), `revoked: its download is refused: ${r.status()}`);

  // A link with a password: nothing before it, a wrong one refused, the
  // right one opens and downloads.
  await page.goto(base + `/files/${user}/album/renamed.txt`);
  const linkPassword = 'a password of the link';
  const pwLink = await makeLink('button.share-open', 'read', linkPassword);
  r = await ap.goto(pwLink);
  check(r.status() === 403 && (await ap.$('#pw')) !== null && !(await ap.textContent('body')).includes('renamed.txt'), `password link: the password form first: ${r.status()}`);
  r = await ap.request.get(pwLink + '/download');
  check(r.status() === 403 && !(await r.text()).includes('notes from the browser'), `password link: no download before the password: ${r.status()}`);
  await ap.fill('#pw', 'not the password');
  let [nav] = await Promise.all([ap.waitForNavigation(), ap.click('main form button[type=submit]')]);
  check(nav.status() === 403 && (await ap.textContent('.error')).includes('Wrong password.'), `password link: a wrong password is refused: ${nav.status()}`);
  await ap.fill('#pw', linkPassword);
  [nav] = await Promise.all([ap.waitForNavigation(), ap.click('main form button[type=submit]')]);
  check(nav.status() === 200 && (await ap.textContent('h1')) === 'renamed.txt', `password link: the right password opens it: ${nav.status()}`);
  const [pdl] = await Promise.all([ap.waitForEvent('download'), ap.click('a.button:has-text("Download")')]);
  check(readFileSync(await pdl.path()).equals(files['album/notes.txt']), `password link: downloads the file byte for byte`);

  // An upload-only link to the folder: the stranger's file lands in it
  // and the owner sees it; the link shows and gives nothing of the folder.
  await page.goto(base + `/files/${user}/album/`);
  // (With an expiry date, a month from now, chosen in the dialog.)
  const upExpires = new Date(Date.now() + 30 * 86400_000).toISOString().slice(0, 10);
  const upLink = await makeLink('button.share-open:has-text("Share this folder")', 'upload', '', upExpires);
  r = await ap.goto(upLink);
  anonBody = await ap.textContent('body');
  check(r.status() === 200 && anonBody.includes('Send files to album') && !anonBody.includes('photo.bin'), `upload link: the form, and none of the folder's names: ${r.status()}`);
  r = await ap.request.get(upLink + '/download');
  check(r.status() === 403, `upload link: no download: ${r.status()}`);
  const gift = randomBytes(300 * 1024 + 7);
  await ap.setInputFiles('#files', { name: 'from a stranger.bin', mimeType: 'application/octet-stream', buffer: gift });
  await ap.click('#upload button[type=submit]');
  await ap.waitForFunction(() => document.getElementById('result').textContent.includes('Uploaded'));
  const upResult = await ap.textContent('#result');
  check(upResult === 'Uploaded: from a stranger.bin', `upload link: the file sent: ${upResult}`);
  await page.goto(base + `/files/${user}/album/`);
  listed = await page.$$eval('#listing td.name a', (as) => as.map((a) => a.textContent));
  check(listed.includes('from a stranger.bin'), `upload link: the file is in the owner's folder: ${listed}`);
  const giftBack = await page.evaluate(async (u) => Array.from(new Uint8Array(await (await fetch(u)).arrayBuffer())), base + `/download/${user}/album/from%20a%20stranger.bin`);
  check(Buffer.from(giftBack).equals(gift), `upload link: the owner reads it byte for byte: ${giftBack.length} bytes`);
  await anon.close();

  // The Shares page says what each link is: one made through the API by
  // the page's own session (an upload link with a password) beside the two
  // made in the dialog.
  const made = await page.evaluate(async () => {
    const res = await fetch('/api/shares', {
      method: 'POST', credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', 'X-Requested-With': 'quilt', 'X-CSRF-Token': document.body.dataset.csrf },
      body: JSON.stringify({ path: '/album/sub', mode: 'upload', password: 'another link password' }),
    });
    return [res.status, (await res.json()).url];
  });
  check(made[0] === 201, `an upload link with a password made through the API: ${made}`);
  await page.goto(base + '/shares');
  await page.waitForSelector('#shares', { state: 'visible' });
  const rows = await page.$$eval('#shares tbody tr', (trs) => trs.map((tr) => Array.from(tr.cells).slice(0, 4).map((td) => td.textContent)));
  // (Newest first, but links made within a second sort by token: compare
  // them sorted by path.)
  rows.sort((a, b) => a[0].localeCompare(b[0]));
  const upEnd = await page.evaluate((d) => new Date(d + 'T23:59:59').toLocaleString(), upExpires);
  const want = [['/album', 'upload-only', upLink, upEnd], ['/album/renamed.txt', 'read-only, password', pwLink, 'never'],
    ['/album/sub', 'upload-only, password', made[1], 'never']];
  check(JSON.stringify(rows) === JSON.stringify(want), `the Shares page: path, mode, link and expiry of each: ${JSON.stringify(rows)}`);
  check((await page.textContent('#shares-status')) === '3 links.', `the Shares page counts the links`);

  // 8. Another user changes the URL: refused, and nothing of the file shows.
  const bobCtx = await browser.newContext();
  const bob = await bobCtx.newPage();
  await login(bob, 'bob', bobPassword);
  check(bob.url() === base + '/files/bob/', `bob logs in to his own drive: ${bob.url()}`);
  for (const path of [`/files/${user}/album/`, `/files/${user}/album/renamed.txt`, `/download/${user}/album/photo.bin`, `/zip/${user}/album/`]) {
    r = await bob.goto(base + path);
    const body = await bob.textContent('body');
    check(r.status() === 403 && body.includes('These are not your files.') && !body.includes('renamed.txt'), `another user's URL ${path}: ${r.status()}`);
  }
  const bobList = await bob.goto(base + '/files/bob/').then(() => bob.textContent('#listing'));
  check(bobList.includes('This folder is empty.'), `bob's drive does not show the other's files`);
  r = await bob.goto(base + '/grid');
  check(r.status() === 403, `the grid page is for admins: bob gets ${r.status()}`);
  await bobCtx.close();

  // 8a. Shares between users and groups. The admin shares the album with
  // bob read-only and a new folder, inbox, with the group crew (bob is in
  // it: run.sh) read and write, both in the share dialog; the Shares page
  // lists them. Bob, on a phone's screen, finds both under Shared with me,
  // downloads a file of the album (bytes compared), uploads into the inbox
  // (the admin sees the file), and has no upload control in the album (a
  // PUT there is refused with 403). The admin removes the album's share
  // and bob no longer sees it.
  await page.goto(base + `/files/${user}/`);
  await page.fill('#newdir', 'inbox');
  await Promise.all([page.waitForNavigation(), page.click('form.mkdir button[type=submit]')]);
  // grant shares the page's folder in the dialog and returns the dialog's
  // message; refuse: an error is wanted; pending: an error may come (and
  // is returned).
  async function grant(kind, name, perm, refuse, pending) {
    await page.click('button.share-open:has-text("Share this folder")');
    await page.waitForSelector('#share-dialog[open]');
    await page.selectOption('#grant-kind', kind);
    await page.fill('#grant-name', name);
    await page.check(`#grant-form input[name=perm][value=${perm}]`);
    await page.click('#grant-create');
    await page.waitForFunction(() => !document.getElementById('grant-error').hidden || document.getElementById('grant-done').textContent !== '');
    const failed = await page.isVisible('#grant-error');
    if (!pending || !failed) check(failed === !!refuse, `share dialog: ${refuse ? 'an error' : 'no error'} sharing with ${kind} ${name}`);
    const msg = await page.textContent(failed ? '#grant-error' : '#grant-done');
    await page.click('#share-close');
    return msg;
  }
  await page.goto(base + `/files/${user}/album/`);
  let msg = await grant('user', 'nobody-at-all', 'read', true);
  check(msg.includes('no such user or group'), `share dialog: a share with a user who does not exist is refused: ${msg}`);
  msg = await grant('user', 'bob', 'write');
  check(msg === 'Shared /album with the user bob, read and write.', `share dialog: the album shared with bob: ${msg}`);
  msg = await grant('user', 'bob', 'read');
  check(msg === '/album was shared with the user bob already: now read-only.', `share dialog: shared again, the album's share made read-only: ${msg}`);
  await page.goto(base + `/files/${user}/inbox/`);
  // The group reaches the running gateway through its registry's sync
  // (run.sh made it just before): until then the dialog says there is no
  // such group.
  for (let i = 0; i < 30; i++) {
    msg = await grant('group', 'crew', 'write', false, i < 29);
    if (!msg.includes('no such user or group')) break;
    await page.waitForTimeout(1000);
  }
  check(msg === 'Shared /inbox with the group crew, read and write.', `share dialog: the inbox shared with the group crew, read and write: ${msg}`);
  await page.goto(base + '/shares');
  await page.waitForSelector('#grants', { state: 'visible' });
  let grantRows = await page.$$eval('#grants tbody tr', (trs) => trs.map((tr) => Array.from(tr.cells).slice(0, 3).map((td) => td.textContent)));
  grantRows.sort((a, b) => a[0].localeCompare(b[0]));
  check(JSON.stringify(grantRows) === JSON.stringify([['/album', 'user bob', 'read-only'], ['/inbox', 'group crew', 'read and write']]),
    `the Shares page lists the shares with users and groups: ${JSON.stringify(grantRows)}`);
  check((await page.textContent('#grants-status')) === '2 shares.', `the Shares page counts the shares`);

  const bobPhone = await browser.newContext({ acceptDownloads: true, viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 3 });
  const bp = await bobPhone.newPage();
  bp.setDefaultTimeout(60_000);
  await login(bp, 'bob', bobPassword);
  // Bob's membership of crew reaches the gateway through the same sync.
  let withMe = [];
  for (let i = 0; i < 30; i++) {
    await bp.goto(base + '/shared');
    await bp.waitForSelector('#shared-status:not(:has-text("Loading"))');
    withMe = await bp.$$eval('#with-me tbody tr', (trs) => trs.map((tr) => Array.from(tr.cells).slice(0, 3).map((td) => td.textContent)));
    if (withMe.length >= 2) break;
    await bp.waitForTimeout(1000);
  }
  withMe.sort((a, b) => a[0].localeCompare(b[0]));
  check(JSON.stringify(withMe) === JSON.stringify([['album/', user, 'read-only'], ['inbox/', user, 'read and write (group crew)']]),
    `bob's Shared with me lists both shares: ${JSON.stringify(withMe)}`);
  let bw = await bp.evaluate(() => document.documentElement.scrollWidth);
  check(bw <= 390, `phone: Shared with me without sideways scrolling: ${bw}px`);
  // Into the album by the keyboard: its link focused, Enter.
  await bp.focus('#with-me a:has-text("album/")');
  await Promise.all([bp.waitForNavigation(), bp.keyboard.press('Enter')]);
  check(/\/shared\?id=[A-Za-z0-9_-]+$/.test(bp.url()), `keyboard: bob opens the shared album: ${bp.url()}`);
  await bp.waitForSelector('#shared-listing', { state: 'visible' });
  const albumRows = await bp.$$eval('#shared-listing tbody td.name', (tds) => tds.map((td) => td.textContent));
  check(albumRows.includes('photo.bin') && albumRows.includes('sub/'), `bob lists the shared album: ${albumRows}`);
  check((await bp.textContent('#shared-meta')) === `Shared by ${user}, read-only.` && !(await bp.isVisible('#shared-upload')) && (await bp.$('#shared-pick:visible, label[for=shared-pick]:visible')) === null,
    `a read-only share shows no upload control`);
  check((await bp.$$('#shared-listing button:has-text("Delete")')).length === 0, `a read-only share shows no Delete`);
  const [bdl] = await Promise.all([bp.waitForEvent('download'), bp.click('#shared-listing a.file:has-text("photo.bin")')]);
  const bobGot = readFileSync(await bdl.path());
  check(bdl.suggestedFilename() === 'photo.bin' && bobGot.equals(files['album/photo.bin']), `bob downloads photo.bin from the share byte for byte: ${bobGot.length} bytes`);
  const albumID = new URL(bp.url()).searchParams.get('id');
  const putRead = await bp.evaluate(async (id) => {
    const res = await fetch(`/api/shares/with-me/${id}/files/from-bob.txt`, { method: 'PUT', credentials: 'same-origin', headers: { 'X-Requested-With': 'quilt' }, body: 'no' });
    return [res.status, (await res.json()).error];
  }, albumID);
  check(putRead[0] === 403 && putRead[1].includes('read-only'), `an upload into the read-only share is refused: ${putRead}`);
  // A file's path typed in as a folder's: its download offered instead.
  await bp.goto(base + '/shared?id=' + albumID + '&path=photo.bin');
  await bp.waitForSelector('#shared-status a:has-text("download photo.bin")');
  check(!(await bp.isVisible('#shared-listing')), `a file's path on Shared with me offers its download, no listing`);
  await bp.click('#shared-crumbs a:has-text("Shared with me")');
  await bp.waitForSelector('#with-me', { state: 'visible' });
  await Promise.all([bp.waitForNavigation(), bp.click('#with-me a:has-text("inbox/")')]);
  await bp.waitForSelector('#shared-upload', { state: 'visible' });
  const fromBob = randomBytes(100_000);
  await bp.setInputFiles('#shared-pick', { name: 'from bob.bin', mimeType: 'application/octet-stream', buffer: fromBob });
  await bp.waitForSelector('#shared-up-text:has-text("1 of 1 files uploaded.")');
  await bp.waitForSelector('#shared-listing a.file:has-text("from bob.bin")');
  const upBox = await bp.locator('label[for=shared-pick]').boundingBox();
  check(upBox && upBox.x >= 0 && upBox.x + upBox.width <= 391, `phone: bob uploads into the write share, its upload button on screen: ${JSON.stringify(upBox)}`);
  const ownerGot = await page.evaluate(async (u) => Array.from(new Uint8Array(await (await fetch(u)).arrayBuffer())), base + `/download/${user}/inbox/from%20bob.bin`);
  check(Buffer.from(ownerGot).equals(fromBob), `the owner reads bob's upload from the inbox byte for byte: ${ownerGot.length} bytes`);
  await page.goto(base + `/files/${user}/inbox/`);
  check((await page.textContent('#listing')).includes('from bob.bin'), `the owner's inbox lists bob's upload`);
  // A second file, deleted by bob through the write share (after a
  // confirmation); the read share offers no Delete.
  await bp.setInputFiles('#shared-pick', { name: 'scratch.txt', mimeType: 'text/plain', buffer: Buffer.from('scratch\n') });
  await bp.waitForSelector('#shared-listing a.file:has-text("scratch.txt")');
  bp.once('dialog', (d) => d.accept());
  await bp.click('#shared-listing button:has-text("Delete scratch.txt")');
  await bp.waitForSelector('#shared-status:has-text("Deleted scratch.txt.")');
  const inboxNames = await bp.$$eval('#shared-listing tbody td.name', (tds) => tds.map((td) => td.textContent));
  check(JSON.stringify(inboxNames) === '["from bob.bin"]', `bob deletes a file through the write share: ${inboxNames}`);
  await page.goto(base + `/files/${user}/inbox/`);
  check(!(await page.textContent('#listing')).includes('scratch.txt'), `the owner's inbox no longer has it`);

  // The owner removes the album's share: bob no longer sees it.
  await page.goto(base + '/shares');
  await page.waitForSelector('#grants', { state: 'visible' });
  await page.click('button[aria-label="Remove the share of /album with user:bob"]');
  await page.waitForSelector('#grants-status:has-text("Removed the share of /album")');
  grantRows = await page.$$eval('#grants tbody tr', (trs) => trs.map((tr) => tr.cells[0].textContent));
  check(JSON.stringify(grantRows) === '["/inbox"]', `the Shares page: the album's share removed: ${grantRows}`);
  await bp.goto(base + '/shared');
  await bp.waitForSelector('#with-me', { state: 'visible' });
  withMe = await bp.$$eval('#with-me tbody tr', (trs) => trs.map((tr) => tr.cells[0].textContent));
  check(JSON.stringify(withMe) === '["inbox/"]', `bob's Shared with me no longer lists the album: ${withMe}`);
  await bp.goto(base + '/shared?id=' + albumID);
  await bp.waitForSelector('#shared-status:has-text("Nothing is shared with you under that ID")');
  r = await bp.goto(base + `/api/shares/with-me/${albumID}/files/photo.bin`);
  check(r.status() === 404, `the removed share's file is refused: ${r.status()}`);
  await bobPhone.close();

  // 8b. The admin's grid page shows quilt up's 10 nodes; the storage page
  // what the drive holds.
  r = await page.goto(base + '/grid');
  const states = await page.$$eval('td.state', (tds) => tds.map((td) => td.textContent));
  check(r.status() === 200 && states.length === 10 && states.every((s) => s === 'alive'), `grid page: ${states.length} nodes: ${states}`);
  check((await page.textContent('.verdict')).includes('healthy'), `grid page: healthy`);
  await page.goto(base + '/storage');
  const used = await page.textContent('#used');
  check(/Used: 2[0-9]\.[0-9]? MB|Used: 2[0-9] MB/.test(used), `storage page: ${used}`);

  // 9. A phone's viewport: nothing wider than the screen, the actions there.
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 3 });
  const pp = await phone.newPage();
  await login(pp, user, password);
  await pp.goto(base + `/files/${user}/album/`);
  const width = await pp.evaluate(() => document.documentElement.scrollWidth);
  check(width <= 390, `phone: no sideways scrolling: ${width}px`);
  for (const sel of ['#dropzone', 'label[for=pick-files]', '#listing', 'button:has-text("Delete photo.bin")', 'a:has-text("Rename photo.bin")']) {
    const box = await pp.locator(sel).first().boundingBox();
    check(box && box.x >= 0 && box.x + box.width <= 391 && box.height >= 20, `phone: ${sel} on screen: ${JSON.stringify(box)}`);
  }
  await pp.click('button.share-open:has-text("Share photo.bin")');
  await pp.waitForSelector('#share-dialog[open]');
  const dbox = await pp.locator('#share-dialog').boundingBox();
  check(dbox && dbox.x >= 0 && dbox.x + dbox.width <= 391, `phone: the share dialog on screen: ${JSON.stringify(dbox)}`);
  await pp.click('#share-create');
  await pp.waitForSelector('#share-result', { state: 'visible' });
  const qbox = await pp.locator('#share-qr').boundingBox();
  check(qbox && qbox.x >= 0 && qbox.x + qbox.width <= 391 && qbox.width >= 100, `phone: the QR code on screen: ${JSON.stringify(qbox)}`);
  await phone.close();

  // 10. By keyboard only: log in, make a folder, open it.
  const kb = await browser.newContext();
  const kp = await kb.newPage();
  await kp.goto(base + '/login');
  const focused = () => kp.evaluate(() => document.activeElement && (document.activeElement.id || document.activeElement.textContent.trim()));
  check(await focused() === 'user', `keyboard: the user field has the focus`);
  await kp.keyboard.type(user);
  await kp.keyboard.press('Tab');
  check(await focused() === 'password', `keyboard: Tab to the password`);
  await kp.keyboard.type(password);
  await Promise.all([kp.waitForNavigation(), kp.keyboard.press('Enter')]);
  check(kp.url() === base + `/files/${user}/`, `keyboard: logged in: ${kp.url()}`);
  async function tabTo(want, max = 60) {
    for (let i = 0; i < max; i++) {
      await kp.keyboard.press('Tab');
      const f = await focused();
      if (f === want) return true;
    }
    return false;
  }
  check(await tabTo('newdir'), `keyboard: Tab reaches the new folder field`);
  const outline = await kp.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
  check(outline !== 'none', `keyboard: the focus is visible: outline ${outline}`);
  await kp.keyboard.type('by-keyboard');
  await Promise.all([kp.waitForNavigation(), kp.keyboard.press('Enter')]);
  const flash = await kp.textContent('.flash');
  check(flash.includes('Made the folder by-keyboard'), `keyboard: folder made: ${flash}`);
  check(await tabTo('by-keyboard/'), `keyboard: Tab reaches the new folder's link`);
  await Promise.all([kp.waitForNavigation(), kp.keyboard.press('Enter')]);
  check(kp.url() === base + `/files/${user}/by-keyboard/`, `keyboard: opened the folder: ${kp.url()}`);
  // Share it by keyboard: the dialog takes the focus, Create link gives
  // the link focused and selected, Escape closes the dialog.
  check(await tabTo('Share this folder'), `keyboard: Tab reaches Share this folder`);
  await kp.keyboard.press('Enter');
  await kp.waitForSelector('#share-dialog[open]');
  check(await kp.evaluate(() => document.getElementById('share-dialog').contains(document.activeElement)), `keyboard: the share dialog has the focus`);
  check(await tabTo('share-create', 10), `keyboard: Tab reaches Create link`);
  await kp.keyboard.press('Enter');
  await kp.waitForSelector('#share-result', { state: 'visible' });
  const sel = await kp.evaluate(() => [document.activeElement.id, document.activeElement.value, window.getSelection().toString() || document.activeElement.value.slice(document.activeElement.selectionStart, document.activeElement.selectionEnd)]);
  check(sel[0] === 'share-url' && /\/s\/[A-Za-z0-9_-]{24}$/.test(sel[1]) && sel[2] === sel[1], `keyboard: the link is focused and selected: ${sel[1]}`);
  await kp.keyboard.press('Escape');
  check(await kp.evaluate(() => !document.getElementById('share-dialog').open), `keyboard: Escape closes the share dialog`);
  // Share it with bob by keyboard: Tab to the name, type it, Enter.
  check(await tabTo('Share this folder'), `keyboard: Tab reaches Share this folder again`);
  await kp.keyboard.press('Enter');
  await kp.waitForSelector('#share-dialog[open]');
  check(await tabTo('grant-name', 15), `keyboard: Tab reaches the name to share with`);
  await kp.keyboard.type('bob');
  await kp.keyboard.press('Enter');
  await kp.waitForSelector('#grant-done:has-text("Shared")');
  const kmsg = await kp.textContent('#grant-done');
  check(kmsg === 'Shared /by-keyboard with the user bob, read-only.', `keyboard: shared with bob from the keyboard: ${kmsg}`);
  await kp.keyboard.press('Escape');
  check(await kp.evaluate(() => !document.getElementById('share-dialog').open), `keyboard: Escape closes the share dialog again`);

  // 11. The admin's Users page. Carol added by keyboard: her S3 key is
  // shown once; she logs in to her empty drive in another context. Her
  // password changed: the old one refused, the new one let in. Carol
  // removed: her login refused. bob, not an admin, gets no Users page.
  check(await tabTo('Users'), `keyboard: Tab reaches the Users link`);
  await Promise.all([kp.waitForNavigation(), kp.keyboard.press('Enter')]);
  check(kp.url() === base + '/users', `keyboard: the Users page: ${kp.url()}`);
  const userNames = await kp.$$eval('#users tbody td.name', (tds) => tds.map((td) => td.textContent));
  check(userNames.includes(user) && userNames.includes('bob'), `users page: lists ${userNames}`);
  const crew = await kp.textContent('#group-list');
  check(/crew\s*bob/.test(crew), `users page: the group crew with bob: ${crew.replace(/\s+/g, ' ').trim()}`);
  const carolPw = 'carol-' + randomBytes(6).toString('hex');
  const carolPw2 = 'carol2-' + randomBytes(6).toString('hex');
  check(await tabTo('nu-name'), `keyboard: Tab reaches the new user's name`);
  await kp.keyboard.type('carol');
  for (const [id, text] of [['nu-password', carolPw], ['nu-password2', carolPw], ['nu-quota', '1GiB'], ['nu-groups', 'crew']]) {
    await kp.keyboard.press('Tab');
    check(await focused() === id, `keyboard: Tab to ${id}`);
    await kp.keyboard.type(text);
  }
  await Promise.all([kp.waitForNavigation(), kp.keyboard.press('Enter')]);
  check((await kp.textContent('h1')) === 'User carol added', `keyboard: carol added: ${await kp.textContent('h1')}`);
  const keyID = (await kp.textContent('#key-id')).trim();
  const secret = (await kp.textContent('#key-secret')).trim();
  check(/^[A-Za-z0-9]{8,}$/.test(keyID) && secret.length >= 20, `carol's S3 key shown: ${keyID}`);
  await kp.goto(base + '/users');
  const usersHTML = await kp.content();
  check(!usersHTML.includes(secret), `the secret is not shown again`);
  const carolRow = await kp.textContent('#users tr:has(a:text-is("carol"))');
  check(carolRow.includes('home-carol') && carolRow.includes('crew') && carolRow.includes('1.1 GB'), `users page: carol's row: ${carolRow.replace(/\s+/g, ' ').trim()}`);

  const carolCtx = await browser.newContext();
  const cp = await carolCtx.newPage();
  await login(cp, 'carol', carolPw);
  check(cp.url() === base + '/files/carol/', `carol logs in to her drive: ${cp.url()}`);
  check((await cp.textContent('#listing')).includes('This folder is empty.'), `carol's drive is empty`);
  r = await cp.goto(base + '/users');
  check(r.status() === 403 && (await cp.textContent('body')).includes('for admins'), `carol, not an admin: the Users page refused: ${r.status()}`);
  check(await cp.locator('nav a[href="/users"]').count() === 0, `carol's pages have no Users link`);

  await kp.goto(base + '/users/edit?name=carol');
  await kp.fill('#pw1', carolPw2);
  await kp.fill('#pw2', carolPw2);
  await Promise.all([kp.waitForNavigation(), kp.click('#set-password button[type=submit]')]);
  check((await kp.textContent('.flash')).includes('the old one no longer logs in'), `carol's password changed`);
  await login(cp, 'carol', carolPw);
  check(cp.url().startsWith(base + '/login') && (await cp.textContent('#login-error')).includes('Wrong user name or password.'), `carol's old password refused`);
  await login(cp, 'carol', carolPw2);
  check(cp.url() === base + '/files/carol/', `carol's new password logs in: ${cp.url()}`);

  await kp.check('#rm-confirm');
  await Promise.all([kp.waitForNavigation(), kp.click('#remove-user button[type=submit]')]);
  check(kp.url() === base + '/users' && (await kp.textContent('.flash')).includes('User carol is removed'), `carol removed: ${await kp.textContent('.flash')}`);
  check(!(await kp.$$eval('#users tbody td.name', (tds) => tds.map((td) => td.textContent))).includes('carol'), `carol is no longer listed`);
  r = await cp.goto(base + '/files/carol/');
  check(cp.url().startsWith(base + '/login'), `carol's session ended with her account: ${cp.url()}`);
  await login(cp, 'carol', carolPw2);
  check(cp.url().startsWith(base + '/login') && (await cp.textContent('#login-error')).includes('Wrong user name or password.'), `carol's login refused after removal`);
  await carolCtx.close();
  await kb.close();
  // The Users page at a phone's viewport: nothing wider than the screen.
  const phone2 = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 3 });
  const up = await phone2.newPage();
  await login(up, user, password);
  await up.goto(base + '/users');
  const uwidth = await up.evaluate(() => document.documentElement.scrollWidth);
  check(uwidth <= 390, `phone: the Users page has no sideways scrolling: ${uwidth}px`);
  for (const sel of ['#nu-name', '#add-user button[type=submit]', '#ng-name']) {
    const box = await up.locator(sel).first().boundingBox();
    check(box && box.x >= 0 && box.x + box.width <= 391 && box.height >= 20, `phone: ${sel} on screen: ${JSON.stringify(box)}`);
  }
  await phone2.close();

  console.log('browser test: all passed');
} finally {
  clearTimeout(deadline);
  if (browser) await browser.close();
}
