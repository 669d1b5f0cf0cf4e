// Headless Chromium uploads one file through the web app, as a person
// would (run by ../every-door.sh): log in, make a folder with the "New
// folder" form, open it, choose the file with "Choose files", watch the
// progress reach 100%, and see the file listed with its size. With
// QUILT_READ=NAME it first opens the file NAME at the top of the drive
// (written through another door) and downloads it with the page's
// Download button, printing "read NAME SHA256".
//
// Environment: QUILT_WEB_URL, QUILT_USER, QUILT_PASSWORD, QUILT_FOLDER
// (a folder name at the top of the drive), QUILT_FILE (the local file),
// QUILT_READ (optional).
import { readFileSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { basename } from 'node:path';
import { chromium } from 'playwright-core';

const base = process.env.QUILT_WEB_URL.replace(/\/$/, '');
const user = process.env.QUILT_USER;
const folder = process.env.QUILT_FOLDER;
const file = process.env.QUILT_FILE;
const name = basename(file);

const deadline = setTimeout(() => { console.error('upload: timed out after 150 s'); process.exit(1); }, 150_000);

function check(cond, what) {
  if (!cond) throw new Error(what);
  console.log('ok:', what);
}

let browser;
try {
  browser = await chromium.launch({
    executablePath: process.env.QUILT_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  const page = await (await browser.newContext({ acceptDownloads: true })).newPage();
  page.setDefaultTimeout(60_000);

  await page.goto(base + '/login');
  await page.fill('#user', user);
  await page.fill('#password', process.env.QUILT_PASSWORD);
  await Promise.all([page.waitForNavigation(), page.click('form.login button[type=submit]')]);
  check(page.url() === `${base}/files/${user}/`, `${user} logged in: ${page.url()}`);

  const read = process.env.QUILT_READ;
  if (read) {
    await page.click(`#listing a.file:text-is("${read}")`);
    await page.waitForURL(`${base}/files/${user}/${encodeURIComponent(read)}`);
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
    const sum = createHash('sha256').update(readFileSync(await dl.path())).digest('hex');
    check(dl.suggestedFilename() === read, `${read} downloaded from its page`);
    console.log('read', read, sum);
    await page.goto(`${base}/files/${user}/`);
  }

  await page.fill('#newdir', folder);
  await Promise.all([page.waitForNavigation(), page.click('form.mkdir button[type=submit]')]);
  check((await page.textContent('.flash')).includes(`Made the folder ${folder}`), `folder ${folder} made`);
  await page.goto(`${base}/files/${user}/${encodeURIComponent(folder)}/`);

  await page.setInputFiles('#pick-files', file);
  await page.waitForFunction(() => document.getElementById('total-progress').value === 100, null, { timeout: 120_000 });
  const total = await page.textContent('#total-text');
  check(total.includes('1 of 1 files') && total.includes('(100%)') && !total.includes('failed'), `upload of ${name}: ${total}`);

  await page.waitForSelector(`#listing a.file:text-is("${name}")`);
  const sizeText = await page.$eval(`#listing tr:has(a.file:text-is("${name}")) td.num`, (td) => td.textContent);
  check(sizeText.trim() !== '', `${name} listed in ${folder}/, ${sizeText} (${statSync(file).size} bytes)`);
} finally {
  clearTimeout(deadline);
  if (browser) await browser.close();
}
